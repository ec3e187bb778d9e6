import CEbur128

/// Measures a file's loudness with libebur128: its integrated loudness (EBU R128, gated) and
/// its true peak (4× oversampled, over every channel), decoding all of it at its own rate with
/// `AudioFileDecoder`. What the library scan does for a file whose tags state none.
///
/// Thread-safety: any thread; each call has its own decoder and meter.
public enum LoudnessMeter {
    /// - Returns: nil for a file with no audio above the gate (silence), which no gain helps.
    public static func measure(path: String) throws(MediaError) -> Loudness? {
        let decoder = try AudioFileDecoder(path: path)
        let channels = decoder.outputChannelCount
        guard let state = makeState(channels: channels, sampleRate: decoder.sampleRate) else {
            throw MediaError(.unsupported, input: path, reason: "libebur128 cannot measure \(channels) channels at \(decoder.sampleRate) Hz")
        }
        var meter: UnsafeMutablePointer<ebur128_state>? = state
        defer { ebur128_destroy(&meter) }
        var block: [Float] = []
        while true {
            let frames = try decoder.read(into: &block)
            if frames == 0 { break }
            add(block, frames: frames, to: state)
        }
        return result(of: state, channels: channels)
    }

    /// The loudness of interleaved samples (a stream as a room was sent it, in tests); nil for
    /// silence or a format libebur128 does not take.
    public static func measure(samples: [Float], sampleRate: Int, channelCount: Int) -> Loudness? {
        guard channelCount > 0, let state = makeState(channels: channelCount, sampleRate: sampleRate) else { return nil }
        var meter: UnsafeMutablePointer<ebur128_state>? = state
        defer { ebur128_destroy(&meter) }
        add(samples, frames: samples.count / channelCount, to: state)
        return result(of: state, channels: channelCount)
    }

    private static func makeState(channels: Int, sampleRate: Int) -> UnsafeMutablePointer<ebur128_state>? {
        ebur128_init(UInt32(channels), UInt(sampleRate), Int32(EBUR128_MODE_I.rawValue | EBUR128_MODE_TRUE_PEAK.rawValue))
    }

    private static func add(_ samples: [Float], frames: Int, to state: UnsafeMutablePointer<ebur128_state>) {
        let status = samples.withUnsafeBufferPointer { ebur128_add_frames_float(state, $0.baseAddress, frames) }
        // Only out of memory: a broken invariant, not a property of the audio.
        precondition(status == Int32(EBUR128_SUCCESS.rawValue), "libebur128 failed to take \(frames) frames: \(status)")
    }

    private static func result(of state: UnsafeMutablePointer<ebur128_state>, channels: Int) -> Loudness? {
        var loudness = 0.0
        guard ebur128_loudness_global(state, &loudness) == Int32(EBUR128_SUCCESS.rawValue), loudness.isFinite else { return nil }
        var peak = 0.0
        for channel in 0..<channels {
            var channelPeak = 0.0
            if ebur128_true_peak(state, UInt32(channel), &channelPeak) == Int32(EBUR128_SUCCESS.rawValue) { peak = max(peak, channelPeak) }
        }
        return Loudness(integratedLUFS: loudness, peak: peak)
    }
}
