/// A clock running at an offset and a rate error from a base clock:
/// `reading = base + offset + (base - anchor) × drift`.
///
/// Speakers run with one of these in tests and in `tutti speaker --clock-offset-ms/--clock-drift-ppm`,
/// so that one machine faces the clock problems of many. The mapping is computed in closed
/// form with 128-bit integers from the anchor, so it never accumulates error.
public struct SkewedClock: HostClock {
    public let base: any HostClock
    public let offsetNanoseconds: Int64
    /// Rate error in parts per billion: +1000 runs 1 ppm fast.
    public let driftPartsPerBillion: Int64
    /// The base reading at which the offset is exactly `offsetNanoseconds`.
    public let anchor: Int64

    public init(base: any HostClock, offsetNanoseconds: Int64 = 0, driftPPM: Double = 0, anchor: Int64? = nil) {
        self.base = base
        self.offsetNanoseconds = offsetNanoseconds
        self.driftPartsPerBillion = Int64((driftPPM * 1000).rounded())
        self.anchor = anchor ?? base.now()
    }

    public func now() -> Int64 { reading(atBase: base.now()) }

    /// This clock's reading when the base clock reads `baseTime`.
    public func reading(atBase baseTime: Int64) -> Int64 {
        let elapsed = baseTime - anchor
        return baseTime + offsetNanoseconds + WideMath.multiplyDivide(elapsed, driftPartsPerBillion, 1_000_000_000, rounding: .toNearestOrAwayFromZero)
    }

    /// The base clock's reading when this clock reads `reading` (inverse of `reading(atBase:)`, ±1 ns).
    public func baseTime(atReading reading: Int64) -> Int64 {
        // reading - offset - anchor = elapsed × (1 + ppb/1e9)
        let scaled = reading - offsetNanoseconds - anchor
        return anchor + WideMath.multiplyDivide(scaled, 1_000_000_000, 1_000_000_000 + driftPartsPerBillion, rounding: .toNearestOrAwayFromZero)
    }
}
