/// An exact rational time on a media timeline: `value / timescale` seconds, like CMTime.
///
/// Arithmetic is exact: sums of times with different timescales use their least common
/// multiple, and comparisons cross-multiply in 128 bits. Positions along a timeline are
/// therefore never accumulated as floating point; `seconds` exists only for display and
/// for APIs that speak Double.
public struct MediaTime: Sendable, Hashable, Comparable, CustomStringConvertible {
    public var value: Int64
    /// Units per second. Always positive.
    public var timescale: Int32

    public init(value: Int64, timescale: Int32) {
        precondition(timescale > 0, "MediaTime timescale must be positive, got \(timescale)")
        self.value = value
        self.timescale = timescale
    }

    /// The time of frame `frame` in a stream of `sampleRate` frames per second.
    public init(frame: Int64, sampleRate: Int) {
        self.init(value: frame, timescale: Int32(sampleRate))
    }

    /// Nearest representable time in `timescale` units; for user input such as `--start 12.5`.
    public init(seconds: Double, timescale: Int32 = 1_000_000) {
        self.init(value: Int64((seconds * Double(timescale)).rounded()), timescale: timescale)
    }

    public static let zero = MediaTime(value: 0, timescale: 1)

    /// For display only; never accumulate this.
    public var seconds: Double { Double(value) / Double(timescale) }

    /// This time in `newTimescale` units, rounded to nearest (ties away from zero) unless told otherwise.
    public func converted(to newTimescale: Int32, rounding: FloatingPointRoundingRule = .toNearestOrAwayFromZero) -> MediaTime {
        if newTimescale == timescale { return self }
        let scaled = WideMath.multiplyDivide(value, Int64(newTimescale), Int64(timescale), rounding: rounding)
        return MediaTime(value: scaled, timescale: newTimescale)
    }

    /// The index of the frame at this time for `sampleRate`, rounded down unless told otherwise.
    public func frame(atSampleRate sampleRate: Int, rounding: FloatingPointRoundingRule = .down) -> Int64 {
        WideMath.multiplyDivide(value, Int64(sampleRate), Int64(timescale), rounding: rounding)
    }

    /// Nanoseconds, rounded to nearest.
    public var nanoseconds: Int64 {
        WideMath.multiplyDivide(value, 1_000_000_000, Int64(timescale), rounding: .toNearestOrAwayFromZero)
    }

    public static func + (lhs: MediaTime, rhs: MediaTime) -> MediaTime {
        let (l, r, scale) = commonScale(lhs, rhs)
        return MediaTime(value: l + r, timescale: scale)
    }

    public static func - (lhs: MediaTime, rhs: MediaTime) -> MediaTime {
        let (l, r, scale) = commonScale(lhs, rhs)
        return MediaTime(value: l - r, timescale: scale)
    }

    public static func * (lhs: MediaTime, rhs: Int64) -> MediaTime {
        MediaTime(value: lhs.value * rhs, timescale: lhs.timescale)
    }

    public static func += (lhs: inout MediaTime, rhs: MediaTime) { lhs = lhs + rhs }
    public static func -= (lhs: inout MediaTime, rhs: MediaTime) { lhs = lhs - rhs }

    public static func < (lhs: MediaTime, rhs: MediaTime) -> Bool {
        Int128(lhs.value) * Int128(rhs.timescale) < Int128(rhs.value) * Int128(lhs.timescale)
    }

    public static func == (lhs: MediaTime, rhs: MediaTime) -> Bool {
        Int128(lhs.value) * Int128(rhs.timescale) == Int128(rhs.value) * Int128(lhs.timescale)
    }

    public func hash(into hasher: inout Hasher) {
        // Equal times with different timescales must hash alike: hash the reduced fraction.
        let divisor = WideMath.gcd(abs(value), Int64(timescale))
        hasher.combine(value / max(divisor, 1))
        hasher.combine(Int64(timescale) / max(divisor, 1))
    }

    public var description: String {
        "\(value)/\(timescale)"
    }

    /// Both values expressed in one timescale: the least common multiple when it fits in Int32
    /// (the usual case: 44100 and 48000 give 7 056 000), else the larger one, rounding the other.
    private static func commonScale(_ a: MediaTime, _ b: MediaTime) -> (Int64, Int64, Int32) {
        if a.timescale == b.timescale { return (a.value, b.value, a.timescale) }
        let lcm = Int64(a.timescale) / WideMath.gcd(Int64(a.timescale), Int64(b.timescale)) * Int64(b.timescale)
        let scale = lcm <= Int64(Int32.max) ? Int32(lcm) : max(a.timescale, b.timescale)
        return (a.converted(to: scale).value, b.converted(to: scale).value, scale)
    }
}
