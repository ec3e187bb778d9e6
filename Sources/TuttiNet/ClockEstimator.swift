import TuttiCore

/// One completed clock-sync exchange: t1, t4 on the local clock; t2, t3 on the server's.
public struct ClockSample: Sendable, Equatable {
    public var clientSend: Int64
    public var serverReceive: Int64
    public var serverSend: Int64
    public var clientReceive: Int64

    public init(clientSend: Int64, serverReceive: Int64, serverSend: Int64, clientReceive: Int64) {
        self.clientSend = clientSend
        self.serverReceive = serverReceive
        self.serverSend = serverSend
        self.clientReceive = clientReceive
    }

    /// Round trip minus the server's processing time.
    public var delay: Int64 { (clientReceive - clientSend) - (serverSend - serverReceive) }
    /// server − local, assuming symmetric paths; off by half the path asymmetry.
    public var offset: Double { (Double(serverReceive - clientSend) + Double(serverSend - clientReceive)) / 2 }
    public var localMidpoint: Int64 { clientSend + (clientReceive - clientSend) / 2 }
}

/// The estimated relation between the local clock and the server's:
/// `server = local + offset + skew × (local − reference)`.
public struct ClockMapping: Sendable, Equatable {
    /// Local time the offset refers to.
    public var reference: Int64
    /// server − local at `reference`, in nanoseconds.
    public var offset: Double
    /// How much faster the server clock runs, as a fraction (1e-6 is 1 ppm).
    public var skew: Double
    /// Estimated uncertainty of `serverTime(atLocal:)` near now, in nanoseconds.
    public var errorNanoseconds: Double
    /// Exchanges the estimate rests on.
    public var sampleCount: Int

    public func serverTime(atLocal local: Int64) -> Int64 {
        local + Int64((offset + skew * Double(local - reference)).rounded())
    }

    public func localTime(atServer server: Int64) -> Int64 {
        // server = L + offset + skew (L − ref)  ⇒  L = (server − offset + skew·ref) / (1 + skew)
        let relative = Double(server - reference) - offset
        return reference + Int64((relative / (1 + skew)).rounded())
    }

    /// Server nanoseconds per local nanosecond.
    public var rate: Double { 1 + skew }
}

/// Estimates offset and rate of the server clock from NTP-style exchanges.
///
/// Jitter only ever adds delay. So rather than trusting any single exchange's offset (off by
/// half its path asymmetry), it tracks the *minimum* one-way delays: in each time bucket the
/// least `t2 − t1` (= offset + shortest way out) and the least `t4 − t3` (= shortest way back −
/// offset); half their difference is the offset, with an error that shrinks like jitter / N
/// instead of jitter / √N. Both are first detrended by the current rate estimate, and the
/// bucket offsets are then fitted against time to refine the rate (clock drift). Between
/// exchanges and through outages the fit extrapolates. Assumes equal base delay each way, as
/// any two-way method must. Not thread-safe.
public final class ClockEstimator {
    public struct Configuration: Sendable {
        /// How much history the fit uses.
        public var windowNanoseconds: Int64 = 120_000_000_000
        /// Each bucket contributes one offset estimate from its minimum one-way delays.
        public var bucketNanoseconds: Int64 = 5_000_000_000
        /// Below this span of local time the rate is not fitted (kept at its last value).
        public var minimumRateSpanNanoseconds: Int64 = 4_000_000_000
        /// Exchanges slower than this are ignored (a stalled path tells nothing).
        public var maximumDelayNanoseconds: Int64 = 500_000_000
        public init() {}
    }

    public let configuration: Configuration
    private var samples: [ClockSample] = []
    private var head = 0
    public private(set) var mapping: ClockMapping?

    public init(configuration: Configuration = Configuration()) {
        self.configuration = configuration
    }

    public var sampleCount: Int { samples.count - head }

    /// Adds an exchange and refits. Returns false for an exchange that was rejected as implausible.
    @discardableResult
    public func add(_ sample: ClockSample) -> Bool {
        guard sample.clientReceive >= sample.clientSend, sample.serverSend >= sample.serverReceive,
              sample.delay >= 0, sample.delay <= configuration.maximumDelayNanoseconds else { return false }
        samples.append(sample)
        let horizon = sample.localMidpoint - configuration.windowNanoseconds
        while head < samples.count && samples[head].localMidpoint < horizon { head += 1 }
        if head > 4096 { samples.removeFirst(head); head = 0 }
        refit()
        return true
    }

    private struct BucketOffset {
        var time: Double    // local time relative to the reference
        var offset: Double  // server − local at the reference, from this bucket's minima
    }

    /// One offset per bucket, each already projected to the reference with `skew`.
    private func bucketOffsets(_ window: ArraySlice<ClockSample>, reference: Int64, skew: Double) -> [BucketOffset] {
        var result: [BucketOffset] = []
        let origin = window.first!.clientSend
        var bucket = Int64.min
        var minOut = Double.infinity, minBack = Double.infinity, timeSum = 0.0, count = 0.0
        func close() {
            if count > 0 { result.append(BucketOffset(time: timeSum / count, offset: (minOut - minBack) / 2)) }
        }
        for sample in window {
            let index = (sample.clientSend - origin) / configuration.bucketNanoseconds
            if index != bucket {
                close()
                bucket = index
                minOut = .infinity; minBack = .infinity; timeSum = 0; count = 0
            }
            let sent = Double(sample.clientSend - reference)
            let received = Double(sample.clientReceive - reference)
            minOut = min(minOut, Double(sample.serverReceive - sample.clientSend) - skew * sent)
            minBack = min(minBack, Double(sample.clientReceive - sample.serverSend) + skew * received)
            timeSum += (sent + received) / 2
            count += 1
        }
        close()
        return result
    }

    private func refit() {
        let window = samples[head...]
        guard let last = window.last else { return }
        let reference = last.clientSend
        let span = Double(last.clientSend - window.first!.clientSend)
        var skew = mapping?.skew ?? 0
        var buckets = bucketOffsets(window, reference: reference, skew: skew)
        if span >= Double(configuration.minimumRateSpanNanoseconds) && buckets.count >= 2 {
            for _ in 0..<3 {
                let (slope, _) = Self.fit(buckets)
                skew = max(-0.001, min(0.001, skew + slope))
                buckets = bucketOffsets(window, reference: reference, skew: skew)
            }
        }
        let n = Double(buckets.count)
        let offset = buckets.map(\.offset).reduce(0, +) / n
        let spread = (buckets.map { ($0.offset - offset) * ($0.offset - offset) }.reduce(0, +) / n).squareRoot()
        mapping = ClockMapping(reference: reference, offset: offset, skew: skew,
                               errorNanoseconds: buckets.count > 1 ? spread / (n - 1).squareRoot() : Double(window.map(\.delay).min()!) / 2,
                               sampleCount: window.count)
    }

    /// Least-squares slope and intercept of offset against time.
    private static func fit(_ points: [BucketOffset]) -> (slope: Double, intercept: Double) {
        let n = Double(points.count)
        let meanX = points.map(\.time).reduce(0, +) / n
        let meanY = points.map(\.offset).reduce(0, +) / n
        var sxx = 0.0, sxy = 0.0
        for p in points { sxx += (p.time - meanX) * (p.time - meanX); sxy += (p.time - meanX) * (p.offset - meanY) }
        let slope = sxx > 0 ? sxy / sxx : 0
        return (slope, meanY - slope * meanX)
    }
}
