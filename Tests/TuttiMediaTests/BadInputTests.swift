import Foundation
import Testing
import TuttiMedia
import TuttiTestSupport

/// Inputs that are not playable audio: each gives one `MediaError` naming the input and the reason.
@Suite struct BadInputTests {
    private func openError(_ path: String, sourceLocation: SourceLocation = #_sourceLocation) -> MediaError? {
        let error = #expect(throws: MediaError.self, sourceLocation: sourceLocation) {
            _ = try AudioFileDecoder(path: path)
        }
        if let error {
            #expect(error.input == path, sourceLocation: sourceLocation)
            #expect(error.description.hasPrefix(path + ": "), sourceLocation: sourceLocation)
            #expect(!error.reason.isEmpty, sourceLocation: sourceLocation)
            #expect(!error.description.contains("\n"), "one line", sourceLocation: sourceLocation)
        }
        return error
    }

    @Test func missingFile() throws {
        let dir = try TemporaryDirectory("tutti-bad")
        defer { dir.remove() }
        let error = openError(dir.file("does-not-exist.flac"))
        #expect(error?.kind == .notFound)
        #expect(error?.reason == "no such file")
    }

    @Test func directory() throws {
        let dir = try TemporaryDirectory("tutti-bad")
        defer { dir.remove() }
        let path = dir.file("album.flac")
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: false)
        let error = openError(path)
        #expect(error?.kind == .unreadable)
        #expect(error?.reason == "is a directory")
    }

    @Test func emptyFile() throws {
        let dir = try TemporaryDirectory("tutti-bad")
        defer { dir.remove() }
        let path = dir.file("empty.mp3")
        #expect(FileManager.default.createFile(atPath: path, contents: Data()))
        let error = openError(path)
        #expect(error?.kind == .notAudio)
        #expect(error?.reason == "empty file")
    }

    @Test(arguments: ["notes.txt", "notes.mp3", "long-notes.txt"])
    func textFile(_ name: String) throws {
        let dir = try TemporaryDirectory("tutti-bad")
        defer { dir.remove() }
        let path = dir.file(name)
        let line = "This is not audio. Dies ist kein Ton. 1234567890\n"
        let text = name.hasPrefix("long") ? String(repeating: line, count: 2000) : line
        try text.write(toFile: path, atomically: false, encoding: .utf8)
        let error = openError(path)
        #expect(error?.kind == .notAudio)
        #expect(error.map { $0.reason.contains("not a media file") || $0.reason.contains("no audio stream") } == true,
                "reason: \(error?.reason ?? "-")")
    }

    @Test func pngImage() throws {
        let dir = try TemporaryDirectory("tutti-bad")
        defer { dir.remove() }
        let error = openError(try makeCoverPNG(in: dir))
        #expect(error?.kind == .notAudio)
        #expect(error?.reason.contains("no audio stream") == true, "reason: \(error?.reason ?? "-")")
    }

    /// Half a file opens, decodes what is there without crashing, and comes up short of the
    /// length the header promised, so the player can report the truncation.
    @Test(arguments: [Codec.flac, .mp3, .vorbis, .wav16])
    func truncatedFile(_ codec: Codec) throws {
        let dir = try TemporaryDirectory("tutti-bad")
        defer { dir.remove() }
        let frames = 88_200
        let full = try makeFile(codec, in: dir, frames: frames)
        let data = try Data(contentsOf: URL(fileURLWithPath: full))
        let truncated = dir.file("truncated.\(codec.fileExtension)")
        try data.prefix(data.count / 2).write(to: URL(fileURLWithPath: truncated))

        let (decoded, decoder) = try decodeWithTutti(truncated)
        let expected = try #require(decoder.expectedFrameCount)
        #expect(expected == Int64(frames))
        #expect(decoded.frameCount > frames / 4, "decoded only \(decoded.frameCount) frames")
        #expect(Int64(decoded.frameCount) < expected - Int64(frames / 4), "decoded \(decoded.frameCount) of \(expected) frames")
        // What was decoded is the start of the track, sample for sample.
        let reference = try TestMedia.decodeWithFFmpeg(full)
        let checked = max(0, decoded.frameCount - 4_608) * 2  // the last packet may be cut mid-way
        #expect(SignalCheck.maxDifference(Array(decoded.samples.prefix(checked)), reference) <= 1e-6)
    }

    /// Random bytes over a block in the middle of an MP3: decoding runs to the end and either
    /// reports corrupt packets or produces different audio; it never crashes or stops early.
    @Test(arguments: [UInt64(1), 2, 3, 4])
    func corruptMP3(_ seed: UInt64) throws {
        let dir = try TemporaryDirectory("tutti-bad")
        defer { dir.remove() }
        let frames = 88_200
        let path = try makeFile(.mp3, in: dir, frames: frames)
        let clean = try decodeWithTutti(path).0
        var bytes = [UInt8](try Data(contentsOf: URL(fileURLWithPath: path)))
        var random = SeededGenerator(seed: seed)
        let start = bytes.count / 2 - 2_000
        for i in start..<(start + 4_000) { bytes[i] = UInt8.random(in: 0...255, using: &random) }
        let corrupt = dir.file("corrupt.mp3")
        try Data(bytes).write(to: URL(fileURLWithPath: corrupt))

        let (decoded, decoder) = try decodeWithTutti(corrupt)
        #expect(decoder.corruptPacketCount > 0 || maxDifferenceSameLength(decoded.samples, clean.samples) > 0.01)
        // Decoding went on past the damage to the end of the file.
        #expect(decoded.frameCount > frames * 3 / 4, "decoded only \(decoded.frameCount) frames")
        let tail = 20_000
        let tailDifference = SignalCheck.maxDifference(Array(decoded.samples.suffix(tail * 2)), Array(clean.samples.suffix(tail * 2)))
        #expect(tailDifference <= 1e-6, "the audio after the damaged block differs: \(tailDifference)")
    }
}
