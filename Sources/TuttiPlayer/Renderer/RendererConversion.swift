import TuttiCore
import TuttiMedia

/// Brings enqueued PCM to the renderer's output format and places it on the output-frame
/// timeline, one resampler per contiguous run.
///
/// A run is a sequence of buffers of one source format, each starting exactly where the
/// previous one ended. Within a run the resampler's filter state carries across buffers, so the
/// joins are continuous and the run's length is the rounding of the whole. A buffer that does
/// not continue the run ends it (the resampler's tail is emitted) and starts a new one at its
/// own presentation time.
///
/// Not thread-safe: the renderer serialises all use behind its enqueue lock.
final class RendererConversion {
    struct Placed {
        var startFrame: Int64
        var samples: [Float]
    }

    let output: AudioFormat
    let quality: Resampler.Quality

    private struct Run {
        var sourceRate: Int
        var sourceChannels: Int
        var startTime: MediaTime
        var sourceFrames: Int64
        var outputStart: Int64
        var outputFrames: Int64
        var resampler: Resampler?

        var nextSourceTime: MediaTime { startTime + MediaTime(frame: sourceFrames, sampleRate: sourceRate) }
    }

    private var run: Run?

    init(output: AudioFormat, quality: Resampler.Quality) {
        self.output = output
        self.quality = quality
    }

    /// True when `buffer` would continue the current run.
    func continuesRun(_ buffer: PCMBuffer) -> Bool {
        guard let run else { return false }
        return run.sourceRate == buffer.format.sampleRate && run.sourceChannels == buffer.format.channelCount
            && run.nextSourceTime == buffer.presentationTime
    }

    /// Converts `buffer`; returns what is ready to place (the previous run's tail first).
    func convert(_ buffer: PCMBuffer) throws(MediaError) -> [Placed] {
        var placed: [Placed] = []
        if !continuesRun(buffer) {
            if let tail = endRun() { placed.append(tail) }
            let rate = buffer.format.sampleRate
            run = Run(sourceRate: rate, sourceChannels: buffer.format.channelCount, startTime: buffer.presentationTime,
                      sourceFrames: 0,
                      outputStart: buffer.presentationTime.frame(atSampleRate: output.sampleRate, rounding: .toNearestOrAwayFromZero),
                      outputFrames: 0,
                      resampler: rate == output.sampleRate ? nil
                          : try Resampler(inputRate: rate, outputRate: output.sampleRate, channelCount: output.channelCount, quality: quality))
        }
        let remixed = Self.remix(buffer.samples, from: buffer.format.channelCount, to: output.channelCount)
        run!.sourceFrames += Int64(buffer.frameCount)
        if let resampler = run!.resampler {
            var converted: [Float] = []
            converted.reserveCapacity((buffer.frameCount * output.sampleRate / buffer.format.sampleRate + 64) * output.channelCount)
            remixed.withUnsafeBufferPointer { resampler.process($0.baseAddress!, frames: buffer.frameCount, appendingTo: &converted) }
            if let piece = take(converted) { placed.append(piece) }
        } else if let piece = take(remixed) {
            placed.append(piece)
        }
        return placed
    }

    /// Ends the current run: returns the resampler's remaining output, if any.
    func endRun() -> Placed? {
        guard let current = run else { return nil }
        defer { run = nil }
        guard let resampler = current.resampler else { return nil }
        var tail: [Float] = []
        resampler.flush(appendingTo: &tail)
        return take(tail)
    }

    /// Forgets the current run without emitting its tail (after a flush).
    func reset() { run = nil }

    private func take(_ samples: [Float]) -> Placed? {
        guard !samples.isEmpty, run != nil else { return nil }
        let start = run!.outputStart + run!.outputFrames
        run!.outputFrames += Int64(samples.count / output.channelCount)
        return Placed(startFrame: start, samples: samples)
    }

    /// Channel conversion: mono is copied to every output channel, anything to mono is the
    /// average of its channels, and otherwise channels map one to one (extra outputs silent,
    /// extra inputs dropped). Layout-aware downmixing is the decoder's job (`AudioFileDecoder`).
    static func remix(_ samples: [Float], from sourceChannels: Int, to outputChannels: Int) -> [Float] {
        if sourceChannels == outputChannels { return samples }
        let frames = samples.count / sourceChannels
        var result = [Float](repeating: 0, count: frames * outputChannels)
        result.withUnsafeMutableBufferPointer { out in
            samples.withUnsafeBufferPointer { input in
                for frame in 0..<frames {
                    let source = frame * sourceChannels, destination = frame * outputChannels
                    if sourceChannels == 1 {
                        for c in 0..<outputChannels { out[destination + c] = input[source] }
                    } else if outputChannels == 1 {
                        var sum: Float = 0
                        for c in 0..<sourceChannels { sum += input[source + c] }
                        out[destination] = sum / Float(sourceChannels)
                    } else {
                        for c in 0..<min(sourceChannels, outputChannels) { out[destination + c] = input[source + c] }
                    }
                }
            }
        }
        return result
    }
}
