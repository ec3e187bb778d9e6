/// The waits between a room's attempts to reach the house: 0.1 s doubling to 2 s, each drawn
/// ±20 % around its nominal value, so rooms that lost the house together spread their retries.
///
/// Short by design: a house that restarts is back within a second or two, and the room's
/// buffer covers the gap; a connection attempt costs the house almost nothing.
/// Not thread-safe: a value owned by the reconnect loop.
struct ReconnectBackoff {
    static let first: Int64 = 100_000_000
    static let maximum: Int64 = 2_000_000_000

    /// The nominal wait before the next attempt.
    private(set) var current: Int64 = first
    private var random: any RandomNumberGenerator

    init(random: any RandomNumberGenerator = SystemRandomNumberGenerator()) {
        self.random = random
    }

    /// The wait to use now (jittered), and the next nominal one doubles.
    mutating func next() -> Int64 {
        let wait = Int64(Double(current) * Double.random(in: 0.8...1.2, using: &random))
        current = min(current * 2, Self.maximum)
        return wait
    }

    mutating func reset() {
        current = Self.first
    }

    /// The longest wait: for a house that refuses this room, whose own house may come back.
    mutating func setToMaximum() {
        current = Self.maximum
    }
}
