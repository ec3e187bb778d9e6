import Algorithms

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
    /// Local time the exchanges span.
    public var spanNanoseconds: Int64 = 0

    public init(reference: Int64, offset: Double, skew: Double, errorNanoseconds: Double, sampleCount: Int, spanNanoseconds: Int64 = 0) {
        self.reference = reference
        self.offset = offset
        self.skew = skew
        self.errorNanoseconds = errorNanoseconds
        self.sampleCount = sampleCount
        self.spanNanoseconds = spanNanoseconds
    }

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
/// Jitter only ever adds delay, so the truth lies on the *lower envelope* of the one-way
/// measurements: `t2 − t1 = offset(t1) + way out` and `t4 − t3 = way back − offset(t4)`, each at
/// least the path's base delay. Following Moon, Skelly and Towsley's linear-programming skew
/// estimator, each envelope is the line under all points closest to them on average — the edge
/// of the points' lower convex hull that spans their mean time. Half the difference of the two
/// lines is the offset, half the difference of their slopes the rate (clock drift). The error
/// shrinks like jitter / N, not jitter / √N as averaging would, and delay spikes cannot pull it.
/// Between exchanges and through outages the lines extrapolate. Assumes equal base delay each
/// way, as any two-way method must. Not thread-safe.
public final class ClockEstimator {
    public struct Configuration: Sendable {
        /// How much history the fit uses.
        public var windowNanoseconds: Int64 = 120_000_000_000
        /// Below this span of local time the rate is not fitted (kept at its last value).
        public var minimumRateSpanNanoseconds: Int64 = 1_000_000_000
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

    private func refit() {
        let window = samples[head...]
        guard let last = window.last else { return }
        let reference = last.clientSend
        // Way out: (t1, t2 − t1); way back: (t4, t4 − t3). Times relative to the reference.
        let out = window.map { (Double($0.clientSend - reference), Double($0.serverReceive - $0.clientSend)) }
        let back = window.map { (Double($0.clientReceive - reference), Double($0.clientReceive - $0.serverSend)) }
        let span = Double(last.clientSend - window.first!.clientSend)
        let fitSlope = span >= Double(configuration.minimumRateSpanNanoseconds)
        let lineOut = Self.lowerEnvelope(out, fitSlope: fitSlope)
        let lineBack = Self.lowerEnvelope(back, fitSlope: fitSlope)
        // out = θ + base, back = base − θ  ⇒  θ = (out − back) / 2, at the reference (time 0).
        let offset = (lineOut.intercept - lineBack.intercept) / 2
        var skew = fitSlope ? (lineOut.slope - lineBack.slope) / 2 : (mapping?.skew ?? 0)
        skew = max(-0.001, min(0.001, skew))
        let error = (Self.slack(out, lineOut) + Self.slack(back, lineBack)) / 2
        mapping = ClockMapping(reference: reference, offset: offset, skew: skew, errorNanoseconds: error, sampleCount: window.count,
                               spanNanoseconds: last.clientSend - window.first!.clientSend)
    }

    /// The line under all `points` (sorted by x) with the least total distance to them: the lower
    /// convex hull's edge that spans the points' mean x. With `fitSlope` false, the flat line
    /// through the lowest point.
    static func lowerEnvelope(_ points: [(Double, Double)], fitSlope: Bool) -> (slope: Double, intercept: Double) {
        guard fitSlope, points.count >= 2 else {
            return (0, points.map(\.1).min() ?? 0)
        }
        var hull: [(Double, Double)] = []
        for p in points {
            while hull.count >= 2 {
                let a = hull[hull.count - 2], b = hull[hull.count - 1]
                // Drop b if it lies on or above the segment a → p.
                if (b.0 - a.0) * (p.1 - a.1) - (b.1 - a.1) * (p.0 - a.0) <= 0 { hull.removeLast() } else { break }
            }
            hull.append(p)
        }
        let meanX = points.reduce(0.0) { $0 + $1.0 } / Double(points.count)
        guard hull.count >= 2 else { return (0, hull[0].1) }
        var index = 0
        while index < hull.count - 2 && hull[index + 1].0 < meanX { index += 1 }
        let a = hull[index], b = hull[index + 1]
        guard b.0 > a.0 else { return (0, min(a.1, b.1)) }
        let slope = (b.1 - a.1) / (b.0 - a.0)
        let intercept = a.1 - slope * a.0
        // Two hull points pin the line, and which two changes as exchanges come and go. Raise it
        // by the mean height of the points nearest it (the lowest 5 %): the same small bias in
        // both directions cancels in the offset, and the average steadies the estimate.
        // A partial sort: the refit runs on every exchange over up to two minutes of them.
        let near = points.map { $0.1 - (intercept + slope * $0.0) }.min(count: max(8, points.count / 20))
        return (slope, intercept + near.reduce(0, +) / Double(near.count))
    }

    /// The median height of the lowest tenth of the points above `line`.
    static func slack(_ points: [(Double, Double)], _ line: (slope: Double, intercept: Double)) -> Double {
        let heights = points.map { $0.1 - (line.intercept + line.slope * $0.0) }
        return heights.min(count: min(heights.count, heights.count / 20 + 1)).last!
    }
}
