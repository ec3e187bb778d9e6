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
    /// length the header promised (FLAC STREAMINFO, MP3 Xing/LAME), so the player can report it.
    @Test(arguments: [Codec.flac, .flac24, .mp3])
    func truncatedFile(_ codec: Codec) throws {
        let dir = try TemporaryDirectory("tutti-bad")
        defer { dir.remove() }
        let frames = 88_200
        let full = try makeFile(codec, in: dir, frames: frames)
        let truncated = try truncate(full, to: 0.5, in: dir)

        let (decoded, decoder) = try decodeWithTutti(truncated)
        let expected = try #require(decoder.expectedFrameCount)
        #expect(expected == Int64(frames))
        #expect(decoded.frameCount > frames / 4, "decoded only \(decoded.frameCount) frames")
        #expect(Int64(decoded.frameCount) < expected - Int64(frames / 4), "decoded \(decoded.frameCount) of \(expected) frames")
        // What was decoded is the start of the track, sample for sample.
        try expectPrefix(decoded, of: full)
    }

    /// A WAV or Ogg file cut short decodes its beginning; libavformat takes their length from
    /// what is there (the file size, the last complete page), so the cut is not detectable here.
    @Test(arguments: [Codec.wav16, .vorbis, .opus])
    func truncatedFileDecodesItsBeginning(_ codec: Codec) throws {
        let dir = try TemporaryDirectory("tutti-bad")
        defer { dir.remove() }
        let rate = codec.decodedRate(forSourceRate: 44100)
        let full = try makeFile(codec, in: dir, frames: 3 * rate + 123, sampleRate: rate)
        let (decoded, _) = try decodeWithTutti(try truncate(full, to: 0.6, in: dir))
        #expect(decoded.frameCount > rate / 2, "decoded only \(decoded.frameCount) frames")
        #expect(decoded.frameCount < 5 * rate / 2, "decoded \(decoded.frameCount) frames")
        try expectPrefix(decoded, of: full)
    }

    /// An Ogg file cut inside its headers or first page cannot be opened: libavformat reads up
    /// to the first audio packet. The error says the file is truncated, not that it is empty.
    @Test(arguments: [Codec.vorbis, .opus])
    func oggTruncatedInFirstPage(_ codec: Codec) throws {
        let dir = try TemporaryDirectory("tutti-bad")
        defer { dir.remove() }
        let rate = codec.decodedRate(forSourceRate: 44100)
        let full = try makeFile(codec, in: dir, frames: 3 * rate, sampleRate: rate)
        let size = try #require(FileManager.default.attributesOfItem(atPath: full)[.size] as? Int)
        let truncated = try truncate(full, to: 1_000.0 / Double(size), in: dir)
        let error = openError(truncated)
        #expect(error?.kind == .truncated)
        #expect(error?.reason.contains("truncated") == true, "reason: \(error?.reason ?? "-")")
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
        #expect(decoder.readError == nil)
        // Up to the damage it is the clean audio.
        let damageFrame = frames / 2 - 8 * 1152
        #expect(SignalCheck.maxDifference(Array(decoded.samples.prefix(damageFrame * 2)), clean.samples) <= 1e-6)
        // Decoding went on past the damage and resynchronised: well after it, the audio is the
        // clean audio again, shifted by whole MP3 frames (those lost to the damage).
        #expect(decoded.frameCount > frames * 3 / 4, "decoded only \(decoded.frameCount) frames")
        let probe = decoded.frameCount - 10_000
        let segment = Array(decoded.samples[(probe * 2)..<((probe + 2_000) * 2)])
        let shift = (-20...20).map { $0 * 1152 }.first { shift in
            let from = probe + shift
            guard from >= 0, from + 2_000 <= clean.frameCount else { return false }
            return SignalCheck.maxDifference(segment, Array(clean.samples[(from * 2)..<((from + 2_000) * 2)])) <= 1e-6
        }
        #expect(shift != nil, "no resynchronisation after the damaged block")
    }

    private func truncate(_ path: String, to fraction: Double, in dir: TemporaryDirectory) throws -> String {
        let data = try Data(contentsOf: URL(fileURLWithPath: path))
        let truncated = dir.file("truncated-" + (path.split(separator: "/").last.map(String.init) ?? "file"))
        try data.prefix(Int(Double(data.count) * fraction)).write(to: URL(fileURLWithPath: truncated))
        return truncated
    }

    /// `decoded` equals the start of the CLI's decode of the intact file (but for the last,
    /// possibly cut, packet).
    private func expectPrefix(_ decoded: Decoded, of full: String, sourceLocation: SourceLocation = #_sourceLocation) throws {
        let reference = try TestMedia.decodeWithFFmpeg(full)
        let checked = max(0, decoded.frameCount - 4_608) * decoded.channels
        #expect(checked > 0, sourceLocation: sourceLocation)
        #expect(SignalCheck.maxDifference(Array(decoded.samples.prefix(checked)), reference) <= 1e-6, sourceLocation: sourceLocation)
    }
}
