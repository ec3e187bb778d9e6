
/// When a simulated crystal emits each frame: frame `n` leaves the DAC at
/// `start + n / (rate × (1 + drift))` seconds of the pacing clock, computed in closed form with
/// 128-bit integers so that hours of frames carry no rounding drift.
public struct EmissionSchedule: Sendable, Equatable {
    public let sampleRate: Int
    /// Crystal error in parts per billion; +100 000 is a crystal 100 ppm fast.
    public let driftPartsPerBillion: Int64
    /// Pacing-clock time of frame 0.
    public let start: Int64

    public init(sampleRate: Int, driftPPM: Double, start: Int64) {
        self.sampleRate = sampleRate
        self.driftPartsPerBillion = Int64((driftPPM * 1000).rounded())
        self.start = start
    }

    /// Frames per second of the pacing clock, as a rational: rate × (1e9 + ppb) / 1e9.
    public var effectiveRate: Double { Double(sampleRate) * Double(1_000_000_000 + driftPartsPerBillion) / 1e9 }

    /// Pacing-clock time at which `frame` is emitted (rounded to the nearest nanosecond).
    @inlinable
    public func time(ofFrame frame: Int64) -> Int64 {
        // frame × 1e9 / (rate × (1 + ppb/1e9)) = frame × 1e18 / (rate × (1e9 + ppb))
        let numerator = Int128(frame) * 1_000_000_000_000_000_000
        let denominator = Int128(sampleRate) * Int128(1_000_000_000 + driftPartsPerBillion)
        let twice = (2 * numerator + denominator) / (2 * denominator)
        return start + Int64(numerator >= 0 ? twice : -((2 * -numerator + denominator) / (2 * denominator)))
    }

    /// Frames emitted (fully left the DAC) by pacing-clock time `time`.
    @inlinable
    public func framesEmitted(by time: Int64) -> Int64 {
        let elapsed = time - start
        if elapsed <= 0 { return 0 }
        let numerator = Int128(elapsed) * Int128(sampleRate) * Int128(1_000_000_000 + driftPartsPerBillion)
        return Int64(numerator / 1_000_000_000_000_000_000)
    }
}
