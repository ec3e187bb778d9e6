/// The nearest-rank percentile every figure of a run is reported by: `p` (0–100) of `sorted`,
/// which must be in ascending order; NaN when empty.
public func nearestRankPercentile(_ sorted: [Double], _ p: Double) -> Double {
    guard !sorted.isEmpty else { return .nan }
    return sorted[min(sorted.count - 1, Int((p / 100 * Double(sorted.count - 1)).rounded()))]
}
