/// SplitMix64 (Steele, Lea & Flood, 2014): a tiny, fast, seedable generator whose output is
/// the same on every platform, so impairment runs (jitter, loss) can be replayed from a seed.
struct SplitMix64: RandomNumberGenerator, Sendable {
    private var state: UInt64

    init(seed: UInt64) { state = seed }

    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        return Self.mix(state)
    }

    /// Uniform in [0, 1), 53 bits.
    mutating func nextUnitInterval() -> Double { Double(next() >> 11) * 0x1p-53 }

    /// The SplitMix64 finalizer: a bijective 64-bit mix, also used to derive independent seeds.
    static func mix(_ value: UInt64) -> UInt64 {
        var z = value
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}
