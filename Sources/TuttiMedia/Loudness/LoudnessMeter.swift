/// Measures a file's loudness with libebur128 (`RunningLoudnessMeter`): its integrated loudness
/// (EBU R128, gated) and its true peak, decoding all of it at its own rate with
/// `AudioFileDecoder`. What the library scan does for a file whose tags state none.
///
/// Thread-safety: any thread; each call has its own decoder and meter.
public enum LoudnessMeter {
    /// - Returns: nil for a file with no audio above the gate (silence), which no gain helps.
    public static func measure(path: String) throws(MediaError) -> Loudness? {
        let decoder = try AudioFileDecoder(path: path)
        let channels = decoder.outputChannelCount
        guard let meter = RunningLoudnessMeter(channelCount: channels, sampleRate: decoder.sampleRate) else {
            throw MediaError(.unsupported, input: path, reason: "libebur128 cannot measure \(channels) channels at \(decoder.sampleRate) Hz")
        }
        var block: [Float] = []
        while true {
            let frames = try decoder.read(into: &block)
            if frames == 0 { break }
            block.withUnsafeBufferPointer { meter.add($0.baseAddress!, frames: frames) }
        }
        return meter.loudness
    }

    /// The loudness of interleaved samples (a stream as a room was sent it, in tests); nil for
    /// silence or a format libebur128 does not take.
    public static func measure(samples: [Float], sampleRate: Int, channelCount: Int) -> Loudness? {
        guard let meter = RunningLoudnessMeter(channelCount: channelCount, sampleRate: sampleRate) else { return nil }
        samples.withUnsafeBufferPointer { meter.add($0.baseAddress!, frames: samples.count / channelCount) }
        return meter.loudness
    }
}
