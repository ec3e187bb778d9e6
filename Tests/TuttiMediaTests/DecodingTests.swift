import Foundation
import Testing
import TuttiMedia
import TuttiTestSupport

/// Tutti's decode of every supported format, compared sample by sample with an independent
/// decode by the ffmpeg CLI (`ffmpeg -i F -f f32le -`, no resampling).
@Suite struct DecodingTests {
    /// Not a multiple of any codec's frame size (1152, 1024, 960, 4096, 576, ...).
    static let frames = 66_151  // 1.5 s at 44.1 kHz

    @Test(arguments: Codec.allCases)
    func decodesLikeTheFFmpegCLI(_ codec: Codec) throws {
        let dir = try TemporaryDirectory("tutti-media")
        defer { dir.remove() }
        let sourceRate = codec.codecName == "opus" ? 48000 : 44100
        let sourceFrames = codec.codecName == "opus" ? 72_001 : Self.frames
        let path = try makeFile(codec, in: dir, frames: sourceFrames, sampleRate: sourceRate)

        let (tutti, decoder) = try decodeWithTutti(path)
        let reference = try TestMedia.decodeWithFFmpeg(path)

        #expect(decoder.info.codec == codec.codecName)
        #expect(decoder.info.sampleRate == sourceRate)
        #expect(decoder.info.channelCount == 2)
        #expect(decoder.outputChannelCount == 2)
        #expect(decoder.corruptPacketCount == 0)
        #expect(decoder.readError == nil)
        #expect(tutti.blockCount > 1, "decoded in one block: read(into:) should deliver packet-sized blocks")
        #expect(decoder.position == Int64(tutti.frameCount))

        if codec == .aac {
            // The CLI follows libavformat's edit list, rounded to 1 ms in files FFmpeg writes: it
            // keeps the padding of the last packet, or drops that packet; Tutti trims to the
            // exact length (see MP4TimingTests). Compare the common part.
            #expect(tutti.frameCount == sourceFrames)
            #expect(reference.count / 2 >= Self.frames - 1024, "CLI decode unexpectedly short")
            let common = min(tutti.samples.count, reference.count)
            #expect(SignalCheck.maxDifference(Array(tutti.samples.prefix(common)), Array(reference.prefix(common))) <= 1e-6)
        } else {
            #expect(tutti.frameCount == reference.count / 2)
            #expect(tutti.frameCount == sourceFrames)
            #expect(maxDifferenceSameLength(tutti.samples, reference) <= 1e-6)
        }
        // A decode of silence or of the wrong channel would still "match" a broken reference.
        #expect(SignalCheck.rms(tutti.samples, channels: 2, frames: 0..<tutti.frameCount) > 0.1)
    }

    /// Lossless formats must also equal the source signal itself, checked with an independent parser.
    @Test(arguments: [Codec.wav16, .wav24, .wavFloat])
    func wavEqualsIndependentParse(_ codec: Codec) throws {
        let dir = try TemporaryDirectory("tutti-media")
        defer { dir.remove() }
        let path = try makeFile(codec, in: dir, frames: 12_345)
        let (tutti, decoder) = try decodeWithTutti(path)
        let wav = try WAVFile(path: path)
        #expect(tutti.frameCount == wav.frameCount)
        #expect(maxDifferenceSameLength(tutti.samples, wav.samples) == 0)
        let expectedBits = ["pcm_s16le": 16, "pcm_s24le": 24, "pcm_f32le": 32][codec.codecName]
        #expect(decoder.info.bitsPerSample == expectedBits)
    }

    /// FLAC and ALAC decode to exactly the PCM that went in.
    @Test(arguments: [(Codec.flac, Codec.wav16), (.flac24, .wav24), (.alac, .wav16)])
    func losslessEqualsSource(_ codec: Codec, _ pcm: Codec) throws {
        let dir = try TemporaryDirectory("tutti-media")
        defer { dir.remove() }
        let source = try makeFile(pcm, in: dir, frames: 23_456)
        let encoded = dir.file("encoded.\(codec.fileExtension)")
        try TestMedia.ffmpeg(["-i", source] + codec.encoderArguments + [encoded])
        let (tutti, decoder) = try decodeWithTutti(encoded)
        let wav = try WAVFile(path: source)
        #expect(tutti.frameCount == 23_456)
        #expect(maxDifferenceSameLength(tutti.samples, wav.samples) == 0)
        #expect(decoder.info.bitsPerSample == (pcm == .wav24 ? 24 : 16))
    }

    /// A local file's first read returns the first decoded frame alone (a player or a house
    /// starts at once), later reads gather up to the preferred block; a seek starts over.
    @Test(arguments: [Codec.flac, .mp3, .wav16])
    func blocksStartSmallAndGrow(_ codec: Codec) throws {
        let dir = try TemporaryDirectory("tutti-media")
        defer { dir.remove() }
        let decoder = try AudioFileDecoder(path: try makeFile(codec, in: dir, frames: 200_000))
        #expect(decoder.preferredBlockFrames == 16384)
        var block = [Float]()
        var sizes: [Int] = []
        for _ in 0..<8 { sizes.append(try decoder.read(into: &block)) }
        #expect(sizes[0] > 0 && sizes[0] <= 4608, "first read \(sizes[0]) frames: one codec frame")
        #expect(sizes[1] >= 1024 && sizes[1] < 16384, "second read \(sizes[1])")
        #expect(sizes.last! >= 16384, "reads grew to \(sizes)")
        try decoder.seek(toFrame: 100_000)
        let afterSeek = try decoder.read(into: &block)
        #expect(afterSeek > 0 && afterSeek <= 4608, "first read after a seek: \(afterSeek) frames")
    }
}

/// Sample rates and channel layouts, and conversion to the output layout.
@Suite struct RateAndLayoutTests {
    struct Case: Sendable, CustomTestStringConvertible {
        var codec: Codec
        var rate: Int
        var channels: Int
        var testDescription: String { "\(codec.rawValue) \(rate) Hz \(channels == 1 ? "mono" : "stereo")" }
    }

    static let cases: [Case] = [Codec.flac, .mp3, .vorbis, .aac, .opus].flatMap { codec in
        [44100, 48000, 88200, 96000].filter(codec.supports(sampleRate:)).flatMap { rate in
            [1, 2].map { Case(codec: codec, rate: rate, channels: $0) }
        }
    }

    @Test(arguments: cases)
    func decodesRateAndLayout(_ c: Case) throws {
        let dir = try TemporaryDirectory("tutti-media")
        defer { dir.remove() }
        // Over a second: FFmpeg 5.1 cuts the end of Vorbis files shorter than one Ogg page
        // (see GaplessTests.shortVorbisKnownIssue); not within 47 frames after a multiple of
        // 1152, where FFmpeg's MP3 encoder writes a LAME padding too small.
        let frames = c.rate * 5 / 4 + 1_234
        let path = try makeFile(c.codec, in: dir, frames: frames, sampleRate: c.rate, channels: c.channels)
        let (tutti, decoder) = try decodeWithTutti(path)
        let reference = try TestMedia.decodeWithFFmpeg(path)
        let rate = c.codec.decodedRate(forSourceRate: c.rate)

        #expect(decoder.info.sampleRate == rate)
        #expect(decoder.sampleRate == rate)
        #expect(decoder.info.channelCount == c.channels)
        #expect(decoder.outputChannelCount == c.channels)
        // Opus resamples in the encoder: the decoded length is the source length at 48 kHz.
        // (The CLI's resampler in front of the encoder may round that up by one frame.)
        let expectedFrames = Double(frames) * Double(rate) / Double(c.rate)
        #expect(abs(Double(tutti.frameCount) - expectedFrames) < (rate == c.rate ? 0.5 : 1))
        if c.codec == .aac {
            let common = min(tutti.samples.count, reference.count)
            #expect(SignalCheck.maxDifference(Array(tutti.samples.prefix(common)), Array(reference.prefix(common))) <= 1e-6)
        } else {
            #expect(tutti.frameCount == reference.count / c.channels)
            #expect(maxDifferenceSameLength(tutti.samples, reference) <= 1e-6)
        }
        #expect(SignalCheck.rms(tutti.samples, channels: c.channels, frames: 0..<tutti.frameCount) > 0.1)
    }

    /// Decoding to another channel count equals the CLI's `-ac N` (the same libswresample matrix).
    @Test(arguments: [(Codec.flac, 1, 2), (.mp3, 1, 2), (.vorbis, 1, 2), (.flac, 2, 1), (.opus, 2, 1)])
    func convertsToOutputLayout(_ codec: Codec, _ sourceChannels: Int, _ outputChannels: Int) throws {
        let dir = try TemporaryDirectory("tutti-media")
        defer { dir.remove() }
        let rate = codec.decodedRate(forSourceRate: 44100)
        let path = try makeFile(codec, in: dir, frames: 50_001, sampleRate: rate, channels: sourceChannels)
        let (tutti, decoder) = try decodeWithTutti(path, outputChannelCount: outputChannels)
        let reference = try TestMedia.decodeWithFFmpeg(path, channels: outputChannels)
        #expect(decoder.info.channelCount == sourceChannels)
        #expect(decoder.outputChannelCount == outputChannels)
        #expect(tutti.frameCount == 50_001)
        #expect(maxDifferenceSameLength(tutti.samples, reference) <= 1e-6)
        if sourceChannels == 1 {
            // Mono to stereo: both channels carry the same signal.
            let native = try decodeWithTutti(path).0
            #expect(native.frameCount == 50_001)
            var worst: Float = 0
            var ratio: Float = 0
            for i in 0..<min(native.frameCount, tutti.frameCount) {
                worst = max(worst, abs(tutti.samples[2 * i] - tutti.samples[2 * i + 1]))
                if abs(native.samples[i]) > 0.3 { ratio = max(ratio, tutti.samples[2 * i] / native.samples[i]) }
            }
            #expect(worst == 0)
            #expect(ratio > 0.5 && ratio <= 1.0001)
        }
    }
}
