import Foundation
import Testing
import TuttiCore
import TuttiMedia
import TuttiSimulation
import TuttiTestSupport

/// The encodings the tests generate with the ffmpeg CLI.
enum Codec: String, CaseIterable, Sendable, CustomTestStringConvertible {
    case wav16, wav24, wavFloat, flac, flac24, mp3, aac, alac, opusInOgg, opus, vorbis

    var fileExtension: String {
        switch self {
        case .wav16, .wav24, .wavFloat: "wav"
        case .flac, .flac24: "flac"
        case .mp3: "mp3"
        case .aac, .alac: "m4a"
        case .opusInOgg, .vorbis: "ogg"
        case .opus: "opus"
        }
    }

    var encoderArguments: [String] {
        switch self {
        case .wav16: ["-c:a", "pcm_s16le"]
        case .wav24: ["-c:a", "pcm_s24le"]
        case .wavFloat: ["-c:a", "pcm_f32le"]
        case .flac: ["-c:a", "flac", "-sample_fmt", "s16"]
        case .flac24: ["-c:a", "flac", "-sample_fmt", "s32"]
        case .mp3: ["-c:a", "libmp3lame", "-b:a", "192k"]
        case .aac: ["-c:a", "aac", "-b:a", "160k"]
        case .alac: ["-c:a", "alac", "-sample_fmt", "s16p"]
        case .opusInOgg, .opus: ["-c:a", "libopus", "-b:a", "128k"]
        case .vorbis: ["-c:a", "libvorbis", "-q:a", "5"]
        }
    }

    /// libavcodec's codec name, as reported in `TrackInfo.codec`.
    var codecName: String {
        switch self {
        case .wav16: "pcm_s16le"
        case .wav24: "pcm_s24le"
        case .wavFloat: "pcm_f32le"
        case .flac, .flac24: "flac"
        case .mp3: "mp3"
        case .aac: "aac"
        case .alac: "alac"
        case .opusInOgg, .opus: "opus"
        case .vorbis: "vorbis"
        }
    }

    var isLossless: Bool {
        switch self {
        case .wav16, .wav24, .wavFloat, .flac, .flac24, .alac: true
        case .mp3, .aac, .opusInOgg, .opus, .vorbis: false
        }
    }

    /// Opus always decodes at 48 kHz; the others keep the source rate.
    func decodedRate(forSourceRate rate: Int) -> Int { codecName == "opus" ? 48000 : rate }

    /// Whether the encoder accepts `rate` (MPEG-1 Layer III stops at 48 kHz).
    func supports(sampleRate rate: Int) -> Bool { self == .mp3 ? rate <= 48000 : true }

    var testDescription: String { rawValue }
}

/// A test signal with no periodicity over the file (a chirp plus an incommensurate sine per
/// channel, different per channel), so that a shift, gap, repeat or channel swap of even one
/// frame changes the samples; full float precision, so 24-bit and float encodings carry more
/// than 16 bits. Interleaved.
func testSignal(frames: Int, sampleRate: Int, channels: Int) -> [Float] {
    var samples = [Float]()
    samples.reserveCapacity(frames * channels)
    let rate = Double(sampleRate)
    for i in 0..<frames {
        let t = Double(i) / rate
        samples.append(Float(0.35 * sin(2 * .pi * 440.7 * t) + 0.25 * sin(2 * .pi * (200 * t + 300 * t * t))))
        if channels == 2 {
            samples.append(Float(0.3 * sin(2 * .pi * 659.3 * t + 1) + 0.2 * sin(2 * .pi * (1500 * t - 200 * t * t))))
        }
    }
    return samples
}

/// Writes exactly `frames` frames of the test signal to `path`, encoded by the ffmpeg CLI with
/// `codecArguments` (`extra`: further output options such as tags).
func makeSignal(_ path: String, frames: Int, sampleRate: Int = 44100, channels: Int = 2,
                codecArguments: [String], extra: [String] = []) throws {
    precondition(channels == 1 || channels == 2)
    let raw = path + ".f32"
    try testSignal(frames: frames, sampleRate: sampleRate, channels: channels).withUnsafeBytes {
        try Data($0).write(to: URL(fileURLWithPath: raw))
    }
    defer { try? FileManager.default.removeItem(atPath: raw) }
    try TestMedia.ffmpeg(["-f", "f32le", "-ar", "\(sampleRate)", "-ac", "\(channels)", "-i", raw]
                         + extra + codecArguments + [path])
}

/// Writes the test signal encoded as `codec` and returns its path.
@discardableResult
func makeFile(_ codec: Codec, in directory: TemporaryDirectory, name: String? = nil, frames: Int,
              sampleRate: Int = 44100, channels: Int = 2, extra: [String] = []) throws -> String {
    let path = directory.file("\(name ?? codec.rawValue)-\(sampleRate)-\(channels).\(codec.fileExtension)")
    try makeSignal(path, frames: frames, sampleRate: sampleRate, channels: channels,
                   codecArguments: codec.encoderArguments, extra: extra)
    return path
}

struct Decoded {
    var samples: [Float]
    var channels: Int
    var frameCount: Int { samples.count / channels }
    var blockCount: Int
}

/// Reads `decoder` to the end with `read(into:)`, checking every block's size.
func readToEnd(_ decoder: AudioFileDecoder, sourceLocation: SourceLocation = #_sourceLocation) throws -> Decoded {
    var all = [Float]()
    var block = [Float]()
    var blocks = 0
    while true {
        let frames = try decoder.read(into: &block)
        #expect(block.count == frames * decoder.outputChannelCount, sourceLocation: sourceLocation)
        if frames == 0 { break }
        all.append(contentsOf: block)
        blocks += 1
        try #require(blocks < 1_000_000, "decoder never reached the end", sourceLocation: sourceLocation)
    }
    // Once finished, it stays finished.
    #expect(try decoder.read(into: &block) == 0, sourceLocation: sourceLocation)
    return Decoded(samples: all, channels: decoder.outputChannelCount, blockCount: blocks)
}

func decodeWithTutti(_ path: String, outputChannelCount: Int? = nil) throws -> (Decoded, AudioFileDecoder) {
    let decoder = try AudioFileDecoder(path: path, outputChannelCount: outputChannelCount)
    return (try readToEnd(decoder), decoder)
}

/// Frames in an interleaved buffer.
func frameCount(_ samples: [Float], channels: Int) -> Int { samples.count / channels }

/// Largest absolute difference, or infinity when the lengths differ.
func maxDifferenceSameLength(_ a: [Float], _ b: [Float]) -> Float {
    a.count == b.count ? SignalCheck.maxDifference(a, b) : .infinity
}

/// Deterministic pseudo-random numbers, so failures reproduce.
typealias SeededGenerator = SplitMix64

/// A PNG made by the ffmpeg CLI, for cover art and not-audio inputs.
func makeCoverPNG(in directory: TemporaryDirectory) throws -> String {
    let path = directory.file("cover.png")
    try TestMedia.ffmpeg(["-f", "lavfi", "-i", "color=c=red:s=64x64", "-frames:v", "1", path])
    return path
}
