/// Chooses which variant of an HLS stream the next segment comes from, from measured network
/// throughput (bits per second). Pure logic: no clocks, no I/O.
///
/// - Start: the highest variant whose bandwidth fits in `fitFraction` of the last throughput
///   (from an earlier session); with none known, the lowest, because starting too high means
///   a stall before the first measurement can correct it.
/// - Down at once: a segment that arrived at less than `downSwitchFactor` × the current
///   variant's bandwidth means the next ones may not keep up; switch to the highest variant that
///   fits in `fitFraction` of that throughput (the lowest if none does).
/// - Up slowly: only after `upSwitchSegments` consecutive segments arrived at `upSwitchFactor` ×
///   the next variant's bandwidth or more, to the highest variant that all of them would carry
///   with that headroom. The asymmetry avoids oscillating on a noisy link.
///
/// Thread-safety: a value type; its owner serializes use.
public struct HLSVariantSelector: Sendable, Equatable {
    public struct Policy: Sendable, Equatable {
        public var fitFraction = 0.8
        public var downSwitchFactor = 1.2
        public var upSwitchFactor = 1.5
        public var upSwitchSegments = 2
        public init() {}
    }

    /// The candidates' bandwidths in bits per second, ascending.
    public let bandwidths: [Int]
    public let policy: Policy
    /// Index into `bandwidths` of the variant in use.
    public private(set) var current: Int
    /// Throughputs of the current run of segments with headroom for the next variant up.
    private var headroom: [Double] = []

    /// - Parameter lastThroughput: bits per second measured last time, if any.
    public init(bandwidths: [Int], lastThroughput: Double?, policy: Policy = Policy()) {
        precondition(!bandwidths.isEmpty, "HLSVariantSelector needs at least one variant")
        precondition(zip(bandwidths, bandwidths.dropFirst()).allSatisfy { $0 <= $1 }, "bandwidths must be ascending")
        self.bandwidths = bandwidths
        self.policy = policy
        current = lastThroughput.map { Self.highest(in: bandwidths, fitting: $0 * policy.fitFraction) } ?? 0
    }

    /// Continues at `current` (after the candidates changed, say).
    public init(bandwidths: [Int], current: Int, policy: Policy = Policy()) {
        self.init(bandwidths: bandwidths, lastThroughput: nil, policy: policy)
        precondition(bandwidths.indices.contains(current), "current must index bandwidths")
        self.current = current
    }

    public var currentBandwidth: Int { bandwidths[current] }

    /// Records the throughput one segment arrived at; returns the new index when the next
    /// segment should come from another variant.
    public mutating func record(throughput: Double) -> Int? {
        if throughput < Double(bandwidths[current]) * policy.downSwitchFactor {
            headroom.removeAll()
            let target = Self.highest(in: bandwidths, fitting: throughput * policy.fitFraction)
            return target < current ? switchTo(target) : nil
        }
        guard current + 1 < bandwidths.count, throughput >= Double(bandwidths[current + 1]) * policy.upSwitchFactor else {
            headroom.removeAll()
            return nil
        }
        headroom.append(throughput)
        guard headroom.count >= policy.upSwitchSegments else { return nil }
        let sustained = headroom.min()!
        return switchTo(max(current + 1, Self.highest(in: bandwidths, fitting: sustained / policy.upSwitchFactor)))
    }

    private mutating func switchTo(_ index: Int) -> Int {
        current = index
        headroom.removeAll()
        return index
    }

    /// The highest index whose bandwidth is at most `bitsPerSecond`; 0 when none is.
    static func highest(in bandwidths: [Int], fitting bitsPerSecond: Double) -> Int {
        bandwidths.lastIndex { Double($0) <= bitsPerSecond } ?? 0
    }
}
