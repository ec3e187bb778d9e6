import Foundation
import Testing
import TuttiMedia
import TuttiTestSupport

/// libsoxr through `Resampler`, compared with the ffmpeg CLI's soxr resampler at the same precision.
@Suite struct ResamplerTests {
    static let frames = 66_151  // 1.5 s at 44.1 kHz, not a multiple of any block size

    /// The source signal as float, decoded by the CLI (independent of Tutti's decoder).
    private func source(in dir: TemporaryDirectory, rate: Int = 44100, channels: Int = 2) throws -> (path: String, samples: [Float]) {
        let path = try makeFile(.wavFloat, in: dir, frames: Self.frames, sampleRate: rate, channels: channels)
        let samples = try TestMedia.decodeWithFFmpeg(path)
        try #require(samples.count == Self.frames * channels)
        return (path, samples)
    }

    /// Feeds `input` in chunks of the given sizes (cycled), then flushes.
    private func resample(_ input: [Float], channels: Int, from inputRate: Int = 44100, to outputRate: Int = 48000,
                          chunks: [Int]) throws -> [Float] {
        let resampler = try Resampler(inputRate: inputRate, outputRate: outputRate, channelCount: channels, quality: .high)
        var output = [Float]()
        let total = input.count / channels
        var offset = 0
        var i = 0
        input.withUnsafeBufferPointer { buffer in
            while offset < total {
                let n = min(chunks[i % chunks.count], total - offset)
                resampler.process(buffer.baseAddress! + offset * channels, frames: n, appendingTo: &output)
                offset += n
                i += 1
            }
        }
        resampler.flush(appendingTo: &output)
        // A second flush adds nothing.
        let count = output.count
        resampler.flush(appendingTo: &output)
        #expect(output.count == count)
        return output
    }

    @Test(arguments: [(44100, 48000, 2), (48000, 44100, 2), (44100, 96000, 1), (96000, 48000, 2), (22050, 44100, 1)])
    func matchesFFmpegSoxr(_ inputRate: Int, _ outputRate: Int, _ channels: Int) throws {
        let dir = try TemporaryDirectory("tutti-resample")
        defer { dir.remove() }
        let (path, input) = try source(in: dir, rate: inputRate, channels: channels)
        var random = SeededGenerator(seed: 7)
        let uneven = (0..<64).map { _ in Int.random(in: 1...3_000, using: &random) }
        let output = try resample(input, channels: channels, from: inputRate, to: outputRate, chunks: uneven)

        let expectedFrames = Int((Double(Self.frames) * Double(outputRate) / Double(inputRate)).rounded())
        let outputFrames = output.count / channels
        #expect(output.count % channels == 0)
        #expect(abs(outputFrames - expectedFrames) <= 1, "\(outputFrames) frames, expected \(expectedFrames)")

        let reference = try TestMedia.decodeWithFFmpeg(path, filters: "aresample=\(outputRate):resampler=soxr:precision=20")
        #expect(abs(reference.count / channels - expectedFrames) <= 1)
        let rms = SignalCheck.rmsDifference(output, reference, channels: channels, frames: 100..<(expectedFrames - 100))
        #expect(rms < 1e-3, "RMS difference to ffmpeg's soxr: \(rms)")
        #expect(SignalCheck.bestLag(output, reference, channels: channels, around: expectedFrames / 2) == 0)
        // It is the signal, not silence.
        #expect(SignalCheck.rms(output, channels: channels, frames: 100..<(expectedFrames - 100)) > 0.1)
    }

    /// The output does not depend on how the input is split into calls.
    @Test func chunkingDoesNotChangeOutput() throws {
        let dir = try TemporaryDirectory("tutti-resample")
        defer { dir.remove() }
        let (_, input) = try source(in: dir)
        let whole = try resample(input, channels: 2, chunks: [Self.frames])
        #expect(abs(whole.count / 2 - 72_000) <= 1)
        var random = SeededGenerator(seed: 99)
        let randomSizes = (0..<200).map { _ in Int.random(in: 1...5_000, using: &random) }
        for chunks in [[7], [1_000], [1], [4_096], randomSizes] {
            let chunked = try resample(input, channels: 2, chunks: chunks)
            #expect(chunked.count == whole.count, "chunks \(chunks.prefix(3))")
            #expect(maxDifferenceSameLength(chunked, whole) == 0, "chunks \(chunks.prefix(3))")
        }
    }

    @Test func rejectsImpossibleRates() {
        let error = #expect(throws: MediaError.self) {
            _ = try Resampler(inputRate: 0, outputRate: 48000, channelCount: 2)
        }
        #expect(error?.kind == .unsupported)
        #expect(error?.description.contains("0 Hz to 48000 Hz") == true)
    }
}
