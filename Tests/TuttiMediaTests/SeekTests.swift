import Foundation
import Testing
import TuttiMedia
import TuttiTestSupport

/// `seek(toFrame:)` lands sample-exactly on formats whose packets carry timestamps.
@Suite struct SeekTests {
    static let frames = 100_003

    static let targets: [Int] = [0, 1, 575, 1_000, 4_095, 4_096, 4_097, 4_608, 33_333, 50_001, frames - 4_096, frames - 1]

    @Test(arguments: [Codec.wav16, .wav24, .wavFloat, .flac, .flac24])
    func seekLandsOnTheFrame(_ codec: Codec) throws {
        let dir = try TemporaryDirectory("tutti-seek")
        defer { dir.remove() }
        let path = try makeFile(codec, in: dir, frames: Self.frames)
        let reference = try TestMedia.decodeWithFFmpeg(path)
        try #require(reference.count == Self.frames * 2)

        // One decoder for all targets, in an order that seeks both forward and backward,
        // sometimes after reading a little, sometimes to the end.
        let decoder = try AudioFileDecoder(path: path)
        var block = [Float]()
        var random = SeededGenerator(seed: 42)
        for (i, target) in (Self.targets.shuffled(using: &random) + Self.targets).enumerated() {
            if i % 3 == 1 { _ = try decoder.read(into: &block) }
            try decoder.seek(toFrame: Int64(target))
            #expect(decoder.position == Int64(target))
            let rest = try readToEnd(decoder)
            #expect(rest.frameCount == Self.frames - target, "after seeking to \(target)")
            let difference = maxDifferenceSameLength(rest.samples, Array(reference[(target * 2)...]))
            #expect(difference == 0, "after seeking to \(target): max difference \(difference)")
            #expect(decoder.position == Int64(Self.frames))
        }
    }

    /// The first block after a seek starts exactly at the target (not just the whole remainder).
    @Test(arguments: [Codec.wav16, .flac])
    func firstBlockAfterSeek(_ codec: Codec) throws {
        let dir = try TemporaryDirectory("tutti-seek")
        defer { dir.remove() }
        let path = try makeFile(codec, in: dir, frames: Self.frames)
        let reference = try TestMedia.decodeWithFFmpeg(path)
        let decoder = try AudioFileDecoder(path: path)
        var block = [Float]()
        for target in [77_777, 12_345, 4_096, 99_000] {
            try decoder.seek(toFrame: Int64(target))
            let count = try decoder.read(into: &block)
            try #require(count > 0)
            #expect(Array(block.prefix(8)) == Array(reference[(target * 2)..<(target * 2 + 8)]), "at \(target)")
            #expect(decoder.position == Int64(target + count))
        }
    }

    /// Past the end there is nothing to decode (and no crash).
    @Test func seekPastEnd() throws {
        let dir = try TemporaryDirectory("tutti-seek")
        defer { dir.remove() }
        let decoder = try AudioFileDecoder(path: try makeFile(.flac, in: dir, frames: 10_000))
        try? decoder.seek(toFrame: 20_000)
        #expect(try readToEnd(decoder).frameCount == 0)
        try decoder.seek(toFrame: 9_000)
        #expect(try readToEnd(decoder).frameCount == 1_000)
    }
}

/// Seeking in lossy formats lands on the right frame too (MP4 priming is applied by Tutti).
/// Right after a seek the decoder has no history (MDCT overlap, bit reservoir), so the first
/// packets may differ from a continuous decode; after that the audio must be the same.
@Suite struct LossySeekTests {
    @Test(arguments: [Codec.aac, .mp3, .vorbis, .opus, .opusInOgg, .alac])
    func seekLandsOnTheFrame(_ codec: Codec) throws {
        let dir = try TemporaryDirectory("tutti-seek")
        defer { dir.remove() }
        let rate = codec.decodedRate(forSourceRate: 44100)
        let frames = 3 * rate + 1_301
        // AAC's perceptual noise substitution is random noise, and the decoder's noise
        // generator is not reset by a flush: without it, AAC decodes repeatably.
        let path = try makeFile(codec, in: dir, frames: frames, sampleRate: rate, extra: codec == .aac ? ["-aac_pns", "0"] : [])
        let (full, decoder) = try decodeWithTutti(path)
        try #require(full.frameCount == frames)
        // After reading to the end; forward and backward; the last one on the last Ogg page.
        for target in [0, 1_000, 100_000, 44_444, frames - 9_000] {
            try decoder.seek(toFrame: Int64(target))
            #expect(decoder.position == Int64(target))
            let rest = try readToEnd(decoder)
            #expect(rest.frameCount == frames - target, "after seeking to \(target)")
            let expected = Array(full.samples[(target * 2)...])
            #expect(SignalCheck.bestLag(rest.samples, expected, channels: 2, around: 5_000) == 0, "after seeking to \(target)")
            let warmUp = 4_096
            let settled = SignalCheck.maxDifference(Array(rest.samples.dropFirst(warmUp * 2)), Array(expected.dropFirst(warmUp * 2)))
            #expect(settled <= 1e-6, "after seeking to \(target): max difference \(settled) after \(warmUp) frames")
            #expect(decoder.position == Int64(frames))
        }
    }
}
