import TuttiDiagnostics
import TuttiMedia

extension VirtualCapture {
    /// This capture as if its card ran at `sampleRate`: its samples through libsoxr (whose
    /// output is aligned with its input), each period's first frame at its exact place on the
    /// new scale, rounded down, and its emission time moved by the fraction of a frame rounded
    /// off. So a receiver's card at 44.1 kHz (an AirPlay receiver's) is compared sample by
    /// sample with rooms at the stream's 48 kHz.
    public func converted(toSampleRate rate: Int) throws -> VirtualCapture {
        guard rate != sampleRate else { return self }
        let resampler = try Resampler(inputRate: sampleRate, outputRate: rate, channelCount: channelCount, quality: .veryHigh)
        var converted: [Float] = []
        converted.reserveCapacity(samples.count * rate / sampleRate + 4096)
        samples.withUnsafeBufferPointer { resampler.process($0.baseAddress!, frames: frameCount, appendingTo: &converted) }
        resampler.flush(appendingTo: &converted)
        let ratio = Double(rate) / Double(sampleRate)
        var frames: [Int64] = [], times: [Int64] = []
        for (frame, time) in zip(periodFrames, periodTimes) {
            let exact = Double(frame) * ratio
            let whole = exact.rounded(.down)
            frames.append(Int64(whole))
            times.append(time - Int64(((exact - whole) * 1e9 / Double(rate)).rounded()))
        }
        return VirtualCapture(sampleRate: rate, channelCount: channelCount, samples: converted, periodFrames: frames, periodTimes: times,
                              underruns: underruns.map { (frame: Int64((Double($0.frame) * ratio).rounded()), frames: Int64((Double($0.frames) * ratio).rounded())) })
    }
}
