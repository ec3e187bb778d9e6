import CEbur128

/// A loudness measurement fed block by block (libebur128: integrated loudness, gated as
/// BS.1770-4 says, and the true peak, 4× oversampled, over every channel): a file decoded by
/// `LoudnessMeter`, or an item as the engine plays it (`GaplessQueueReader.Entry.measuresLoudness`).
///
/// Thread-safety: one thread at a time; not `Sendable` (it owns libebur128's state).
public final class RunningLoudnessMeter {
    public let channelCount: Int
    public let sampleRate: Int
    private var state: UnsafeMutablePointer<ebur128_state>?

    /// nil for a format libebur128 does not take (no channels, a rate it refuses).
    public init?(channelCount: Int, sampleRate: Int) {
        guard channelCount > 0, sampleRate > 0,
              let state = ebur128_init(UInt32(channelCount), UInt(sampleRate), Int32(EBUR128_MODE_I.rawValue | EBUR128_MODE_TRUE_PEAK.rawValue))
        else { return nil }
        self.channelCount = channelCount
        self.sampleRate = sampleRate
        self.state = state
    }

    deinit { ebur128_destroy(&state) }

    /// Adds `frames` interleaved frames.
    public func add(_ samples: UnsafePointer<Float>, frames: Int) {
        guard frames > 0 else { return }
        let status = ebur128_add_frames_float(state, samples, frames)
        // Only out of memory: a broken invariant, not a property of the audio.
        precondition(status == Int32(EBUR128_SUCCESS.rawValue), "libebur128 failed to take \(frames) frames: \(status)")
    }

    /// What was added so far; nil when none of it is above the gate (silence, which no gain helps).
    public var loudness: Loudness? {
        var integrated = 0.0
        guard ebur128_loudness_global(state, &integrated) == Int32(EBUR128_SUCCESS.rawValue), integrated.isFinite else { return nil }
        var peak = 0.0
        for channel in 0..<channelCount {
            var channelPeak = 0.0
            if ebur128_true_peak(state, UInt32(channel), &channelPeak) == Int32(EBUR128_SUCCESS.rawValue) { peak = max(peak, channelPeak) }
        }
        return Loudness(integratedLUFS: integrated, peak: peak)
    }
}
