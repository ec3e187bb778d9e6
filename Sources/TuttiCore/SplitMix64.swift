/// SplitMix64 (Steele, Lea & Flood, 2014): a tiny, fast, seedable generator whose output is
/// the same on every platform, so simulations (jitter, loss, clock errors) replay from a seed.
public struct SplitMix64: RandomNumberGenerator, Sendable {
    private var state: UInt64

    public init(seed: UInt64) { state = seed }

    public mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        return Self.mix(state)
    }

    /// Uniform in [0, 1), 53 bits.
    public mutating func nextUnitInterval() -> Double { Double(next() >> 11) * 0x1p-53 }

    /// The SplitMix64 finalizer: a bijective 64-bit mix, also used to derive independent seeds.
    public static func mix(_ value: UInt64) -> UInt64 {
        var z = value
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}
