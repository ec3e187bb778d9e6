/// NTP's clock filter (RFC 5905 §10), as a point of comparison for `ClockEstimator`: of the
/// last eight exchanges, the one with the least round-trip delay gives the offset (queueing
/// only ever adds delay, so the quickest exchange is the least disturbed). NTP leaves the rate
/// to its discipline loop; here it is the slope between the filtered offset now and the one
/// about `rateSpanNanoseconds` earlier, which is what a frequency-locked loop converges to.
///
/// The bound is NTP's synchronization distance without the root terms: half the chosen delay,
/// plus the dispersion that accrues with the sample's age (15 ppm), plus the jitter of the
/// eight offsets. Not thread-safe.
public final class ClockFilterEstimator: ClockEstimating {
    private var register: [ClockSample] = []
    /// Filtered offsets: (local time, offset), for the rate.
    private var history: [(time: Int64, offset: Double)] = []
    public private(set) var mapping: ClockMapping?
    private var firstTime: Int64?
    public let rateSpanNanoseconds: Int64

    public init(rateSpanNanoseconds: Int64 = 10_000_000_000) {
        self.rateSpanNanoseconds = rateSpanNanoseconds
    }

    @discardableResult
    public func add(_ sample: ClockSample) -> Bool {
        guard sample.clientReceive >= sample.clientSend, sample.serverSend >= sample.serverReceive, sample.delay >= 0 else { return false }
        firstTime = firstTime ?? sample.clientSend
        register.append(sample)
        if register.count > 8 { register.removeFirst() }
        let best = register.min { $0.delay < $1.delay }!
        let time = best.localMidpoint
        if history.last?.time != time { history.append((time, best.offset)) }
        while let first = history.first, time - first.time > 2 * rateSpanNanoseconds { history.removeFirst() }
        var skew = mapping?.skew ?? 0
        if let past = history.last(where: { time - $0.time >= rateSpanNanoseconds }) {
            skew = max(-0.001, min(0.001, (best.offset - past.offset) / Double(time - past.time)))
        }
        let offsets = register.map(\.offset)
        let jitter = (offsets.map { ($0 - best.offset) * ($0 - best.offset) }.reduce(0, +) / Double(max(1, offsets.count - 1))).squareRoot()
        let age = Double(sample.clientReceive - best.clientReceive)
        let bound = Double(best.delay) / 2 + 15e-6 * age + jitter
        var mapping = ClockMapping(reference: time, offset: best.offset, skew: skew, errorNanoseconds: bound, sampleCount: register.count,
                                   spanNanoseconds: sample.clientSend - firstTime!)
        // NTP's root distance (half the best delay, the dispersion, the jitter) is its bound;
        // the jitter its precision.
        mapping.rateUncertainty = 15e-6
        mapping.spreadNanoseconds = jitter
        self.mapping = mapping
        return true
    }
}
