import Foundation
import Testing
import TuttiMedia
import TuttiTestSupport

/// MP4 gapless timing: Tutti reads the edit list and sample table itself, because libavformat
/// applies the edit list rounded to the movie timescale (1 ms in files FFmpeg writes).
@Suite struct MP4TimingTests {
    static let frames = GaplessTests.frames  // 2.3457 s at 44.1 kHz: not a whole millisecond

    private func aacFile(in dir: TemporaryDirectory, name: String, extra: [String] = []) throws -> String {
        let path = dir.file(name)
        try makeSignal(path, frames: Self.frames, codecArguments: Codec.aac.encoderArguments, extra: extra)
        return path
    }

    /// The edit list in a file FFmpeg writes ends up to 1 ms off the real end (here: before the
    /// last, short packet, which libavformat then drops); the sample table has the exact length.
    @Test func millisecondEditListIsNotTrusted() throws {
        let dir = try TemporaryDirectory("tutti-mp4")
        defer { dir.remove() }
        let path = try aacFile(in: dir, name: "ms.m4a")
        let (decoded, decoder) = try decodeWithTutti(path)
        #expect(decoded.frameCount == Self.frames)
        #expect(decoder.expectedFrameCount == Int64(Self.frames))
        // What the CLI decodes (libavformat's edit handling) is the same audio, but not the same length.
        let reference = try TestMedia.decodeWithFFmpeg(path)
        #expect(reference.count / 2 != Self.frames)
        #expect(SignalCheck.maxDifference(decoded.samples, reference) <= 1e-6)
    }

    /// With a movie timescale equal to the sample rate the edit list is exact, and the CLI keeps
    /// the padding of the last packet that Tutti trims.
    @Test func exactEditList() throws {
        let dir = try TemporaryDirectory("tutti-mp4")
        defer { dir.remove() }
        let path = try aacFile(in: dir, name: "exact.m4a", extra: ["-movie_timescale", "44100"])
        let (decoded, _) = try decodeWithTutti(path)
        #expect(decoded.frameCount == Self.frames)
        let reference = try TestMedia.decodeWithFFmpeg(path)
        #expect(reference.count / 2 > Self.frames)
        #expect(SignalCheck.maxDifference(decoded.samples, reference) <= 1e-6)
    }

    /// An edit that ends well before the media (more than a movie tick) is obeyed.
    @Test func shortEditIsObeyed() throws {
        let dir = try TemporaryDirectory("tutti-mp4")
        defer { dir.remove() }
        let path = try aacFile(in: dir, name: "full.m4a")
        var bytes = [UInt8](try Data(contentsOf: URL(fileURLWithPath: path)))
        // elst (version 0, one entry): size, "elst", version/flags, count, segment duration (ms), media time.
        let elst = try #require(bytes.indices.dropLast(24).first { bytes[$0..<($0 + 4)] == [0x65, 0x6C, 0x73, 0x74] })
        try #require(bytes[elst + 4] == 0 && bytes[(elst + 8)..<(elst + 12)] == [0, 0, 0, 1])
        let segment = bytes[(elst + 12)..<(elst + 16)].reduce(0) { $0 << 8 | Int($1) }
        #expect(segment == 2345)
        let shortened = 1_845
        for i in 0..<4 { bytes[elst + 12 + i] = UInt8((shortened >> (8 * (3 - i))) & 0xFF) }
        let edited = dir.file("edited.m4a")
        try Data(bytes).write(to: URL(fileURLWithPath: edited))

        let (full, _) = try decodeWithTutti(path)
        let (decoded, decoder) = try decodeWithTutti(edited)
        let expected = 81_365  // 1.845 s at 44.1 kHz, rounded
        #expect(decoded.frameCount == expected)
        #expect(decoder.expectedFrameCount == Int64(expected))
        #expect(maxDifferenceSameLength(decoded.samples, Array(full.samples.prefix(expected * 2))) <= 1e-6)
        let duration = try #require(decoder.info.duration)
        #expect(abs(duration.seconds - 1.845) < 0.0001)
    }

    /// iTunes gapless info (iTunSMPB) states the length and wins over the edit list.
    @Test func iTunSMPBLengthWins() throws {
        let dir = try TemporaryDirectory("tutti-mp4")
        defer { dir.remove() }
        let length = 100_000
        let smpb = " 00000000 00000400 00000000 " + String(format: "%016X", length) + " 00000000 00000000"
        let path = try aacFile(in: dir, name: "smpb.m4a", extra: ["-movflags", "use_metadata_tags", "-metadata", "iTunSMPB=\(smpb)"])
        let plain = try aacFile(in: dir, name: "plain.m4a")
        let (decoded, decoder) = try decodeWithTutti(path)
        #expect(decoded.frameCount == length)
        #expect(decoder.info.duration?.frame(atSampleRate: 44100) == Int64(length))
        let (full, _) = try decodeWithTutti(plain)
        #expect(maxDifferenceSameLength(decoded.samples, Array(full.samples.prefix(length * 2))) <= 1e-6)
    }

    /// Older iTunes files have no edit list: iTunSMPB gives the priming as well as the length.
    @Test func iTunSMPBWithoutEditList() throws {
        let dir = try TemporaryDirectory("tutti-mp4")
        defer { dir.remove() }
        let smpb = " 00000000 00000400 000003AB " + String(format: "%016X", Self.frames) + " 00000000 00000000"
        let path = try aacFile(in: dir, name: "itunes.m4a",
                               extra: ["-use_editlist", "0", "-movflags", "use_metadata_tags", "-metadata", "iTunSMPB=\(smpb)"])
        let plain = try aacFile(in: dir, name: "plain.m4a")
        // libavformat alone decodes the priming and the padding too.
        #expect(try TestMedia.decodeWithFFmpeg(path).count / 2 == Self.frames + 1024 + 1024 - Self.frames % 1024)
        let (decoded, decoder) = try decodeWithTutti(path)
        #expect(decoded.frameCount == Self.frames)
        #expect(decoder.info.duration?.frame(atSampleRate: 44100) == Int64(Self.frames))
        let (reference, _) = try decodeWithTutti(plain)
        #expect(maxDifferenceSameLength(decoded.samples, reference.samples) <= 1e-6)
        // Seeking counts from the end of the priming too.
        try decoder.seek(toFrame: 50_000)
        let rest = try readToEnd(decoder)
        #expect(rest.frameCount == Self.frames - 50_000)
        #expect(SignalCheck.bestLag(rest.samples, Array(reference.samples[100_000...]), channels: 2, around: 5_000) == 0)
    }

    /// An edit list Tutti does not handle itself (an empty edit delaying the track, then the
    /// media) is left to libavformat: the audio is what the CLI decodes.
    @Test func otherEditListsAreLeftToLibavformat() throws {
        let dir = try TemporaryDirectory("tutti-mp4")
        defer { dir.remove() }
        let source = try makeFile(.wavFloat, in: dir, frames: Self.frames)
        let path = dir.file("delayed.m4a")
        try TestMedia.ffmpeg(["-itsoffset", "0.25", "-i", source] + Codec.aac.encoderArguments + [path])
        let (decoded, _) = try decodeWithTutti(path)
        let reference = try TestMedia.decodeWithFFmpeg(path)
        #expect(decoded.frameCount > Self.frames)
        #expect(decoded.samples.count <= reference.count)
        #expect(SignalCheck.maxDifference(decoded.samples, reference) <= 1e-6)
    }
}
