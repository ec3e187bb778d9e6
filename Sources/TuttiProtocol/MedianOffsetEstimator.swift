/// Snapcast's clock estimate (snapclient's `TimeProvider`), as a point of comparison for
/// `ClockEstimator`: the median of the last 200 exchanges' offsets, with no delay filter and no
/// rate model, so it lags a drifting clock by about half its window. Snapcast exchanges once a
/// second (a 200 s window); at a room's 20 exchanges a second the window is 10 s. It claims no
/// bound; the one given is the spread of the middle half of the offsets, the most it could
/// honestly say. Not thread-safe.
public final class MedianOffsetEstimator: ClockEstimating {
    private var offsets: [(time: Int64, offset: Double)] = []
    public private(set) var mapping: ClockMapping?
    private var firstTime: Int64?
    public let window: Int

    public init(window: Int = 200) {
        self.window = window
    }

    @discardableResult
    public func add(_ sample: ClockSample) -> Bool {
        guard sample.clientReceive >= sample.clientSend, sample.serverSend >= sample.serverReceive else { return false }
        firstTime = firstTime ?? sample.clientSend
        offsets.append((sample.localMidpoint, sample.offset))
        if offsets.count > window { offsets.removeFirst() }
        let sorted = offsets.map(\.offset).sorted()
        let median = sorted[sorted.count / 2]
        let spread = (sorted[sorted.count * 3 / 4] - sorted[sorted.count / 4]) / 2
        var mapping = ClockMapping(reference: sample.localMidpoint, offset: median, skew: 0, errorNanoseconds: spread, sampleCount: offsets.count,
                                   spanNanoseconds: sample.clientSend - firstTime!)
        // Snapcast's figure: the offsets' spread, its bound and its precision alike. It fits no
        // rate: the clocks may drift apart by anything a crystal does (±100 ppm).
        mapping.spreadNanoseconds = spread
        mapping.rateUncertainty = 100e-6
        self.mapping = mapping
        return true
    }
}
