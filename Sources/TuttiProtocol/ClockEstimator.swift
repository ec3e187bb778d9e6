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
    /// The bound on the error of `serverTime(atLocal: reference)`, in nanoseconds: the server
    /// time lies within it, whatever the paths' asymmetry (`ClockEstimator` says how it is
    /// found). Further from `reference` it widens by `rateUncertainty` (`bound(atLocal:)`).
    public var errorNanoseconds: Double
    /// How far the true rate may be from `skew`, as a fraction: the bound widens by this much
    /// of the time from `reference` (through an outage, for instance).
    public var rateUncertainty: Double = 0
    /// How far the estimate's nearest exchanges and its recent estimates spread about it: its
    /// precision, in nanoseconds. Not a bound (an asymmetric path can hold the estimate
    /// steadily off); it says whether more exchanges would still sharpen the estimate.
    public var spreadNanoseconds: Double = 0
    /// Exchanges the estimate rests on.
    public var sampleCount: Int
    /// Local time the estimate's history spans, from its first exchange (a window restarted
    /// at a floor step keeps the rate fitted before it, and this).
    public var spanNanoseconds: Int64 = 0
    /// Route changes seen so far (steps of the round-trip floor), and how much of the two
    /// ways' lines' offset is taken since the last one as their asymmetry
    /// (`ClockEstimator.asymmetryNanoseconds`).
    public var pathChanges = 0
    public var asymmetryNanoseconds: Double = 0

    public init(reference: Int64, offset: Double, skew: Double, errorNanoseconds: Double, sampleCount: Int, spanNanoseconds: Int64 = 0) {
        self.reference = reference
        self.offset = offset
        self.skew = skew
        self.errorNanoseconds = errorNanoseconds
        self.sampleCount = sampleCount
        self.spanNanoseconds = spanNanoseconds
    }

    /// The error bound of `serverTime(atLocal: local)`: `errorNanoseconds`, widened by the rate's
    /// uncertainty over the time from `reference`.
    public func bound(atLocal local: Int64) -> Double {
        errorNanoseconds + rateUncertainty * abs(Double(local - reference))
    }

    /// `bound(atLocal:)` in whole nanoseconds, rounded up, and at most an hour (a mapping
    /// carried through a days-long outage at its clamp rate): what a room reports.
    public func reportedBound(atLocal local: Int64) -> Int64 {
        Int64(min(bound(atLocal: local), 3.6e12).rounded(.up))
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
/// estimator, each envelope is a line under all points along their lower convex hull: its
/// chord across the middle half of the window's span (a single edge, between two floor points a
/// second apart, tilts by a ppm or two on a real path). Half the difference of the two
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
        /// Once the rate is fitted, how often the fit is refreshed. One more exchange moves a
        /// fit over minutes of them very little, and the mapping extrapolates in between, so a
        /// speaker exchanging 20 times a second refits 4 times a second: less CPU on a small
        /// speaker, and a simulated house that runs many times faster than real time.
        public var refitIntervalNanoseconds: Int64 = 250_000_000
        /// A route change moves the paths' floors: when no exchange of the last
        /// `floorStepSpanNanoseconds` came within `floorStepNanoseconds` of the round-trip
        /// floor before them (or one of them fell that far below it), the fit starts again from
        /// them (from the first that fell). Lines through points on both floors would tilt.
        public var floorStepNanoseconds: Int64 = 500_000
        public var floorStepSpanNanoseconds: Int64 = 5_000_000_000
        /// After a floor step the rate is kept (a route change does not change the clocks)
        /// until the window since the step spans this much: a rate fitted over a few seconds
        /// is worse than the one before.
        public var rateSpanAfterFloorStepNanoseconds: Int64 = 30_000_000_000
        /// How fast the two paths' summed delay may change along the fitted lines (as a
        /// fraction: 1e-3 is 1 ms a second) before they are taken for a stretch of late
        /// exchanges rather than the clocks' rate. Jitter tilts a short window's lines by
        /// hundreds of ppm (a user-space relay on a loaded machine: at 100 ppm, the estimates
        /// that fell back and those that did not differed by their lines' raise, and the bound
        /// that measures their wander stayed over 100 µs); a late stretch, by thousands.
        public var maximumPathTrend: Double = 1e-3
        /// An outage: no exchange for this long. Until the exchanges after it span
        /// `rateSpanAfterGapNanoseconds`, the rate is kept and the lines go through each
        /// envelope's lowest point at that rate. A free fit's chord then crosses the gap: its
        /// far end sits on the first few exchanges after it, as high above the floor as they
        /// happen to be (0.3–1 ms under 0–2 ms of jitter), and a room whose clock had held to
        /// 20 µs through a 12 s outage was moved 0.9 ms off by it, and back 2 s later.
        public var exchangeGapNanoseconds: Int64 = 2_000_000_000
        public var rateSpanAfterGapNanoseconds: Int64 = 3_000_000_000
        /// The least uncertainty of a fitted rate, as a fraction (2e-6 is 2 ppm): what the bound
        /// allows per second between an exchange and now, beyond what the fit's slack and how
        /// far the recent fits' rates spread allow. A fit over minutes on a clean path was seen 0.5 ppm off for tens of
        /// seconds (its error grew half a microsecond a second while its estimates agreed).
        public var minimumRateUncertainty: Double = 2e-6
        /// How far back exchanges count towards the bound: past this their carry to now
        /// costs more than any exchange could tighten it.
        public var boundHorizonNanoseconds: Int64 = 30_000_000_000
        public init() {}
    }

    public let configuration: Configuration
    private var samples: [ClockSample] = []
    private var head = 0
    /// Exchanges dropped from the front of `samples`: `samples[i]` is exchange number `removed + i`.
    private var removed = 0
    public private(set) var mapping: ClockMapping?
    /// The two ways' lines of the last fit (the raw floors, before any asymmetry is taken out).
    public private(set) var floors: ClockFloors?

    public init(configuration: Configuration = Configuration()) {
        self.configuration = configuration
    }

    public var sampleCount: Int { samples.count - head }

    /// Adds an exchange, refitting when due (`refitIntervalNanoseconds`). Returns false for an
    /// exchange that was rejected as implausible.
    @discardableResult
    public func add(_ sample: ClockSample) -> Bool {
        // The server's stamps come off the network: any value a forged reply carries must not
        // overflow the arithmetic below (36 years either side of zero is any monotonic clock's
        // reading; at 2^62 each way, t3 − t2 minus t4 − t1 reached 2^63 and trapped).
        let limit: Int64 = 1 << 60
        guard (-limit...limit).contains(sample.serverReceive), (-limit...limit).contains(sample.serverSend),
              (-limit...limit).contains(sample.clientSend), (-limit...limit).contains(sample.clientReceive) else { return false }
        guard sample.clientReceive >= sample.clientSend, sample.serverSend >= sample.serverReceive,
              sample.delay >= 0, sample.delay <= configuration.maximumDelayNanoseconds else { return false }
        // A reply that arrives after one sent later (the house held it longer, or its way back
        // was slower) goes in where its request left: the house dithers its holds over 20 ms,
        // and dropping the overtaken replies kept those held briefly, so the way back saw its
        // timer grid at some phases more than others, and rooms behind a 4 ms grid sat 25 µs
        // off for good. The envelopes sort their points by time (the way back's arrive out of
        // order). Replies older than the last `reorderLimit` exchanges are dropped.
        var index = samples.count
        while index > head && samples.count - index < Self.reorderLimit && samples[index - 1].clientSend > sample.clientSend { index -= 1 }
        if index < samples.count {
            guard index > head, samples[index - 1].clientSend < sample.clientSend, samples[index].clientSend > sample.clientSend else { return false }
            samples.insert(sample, at: index)
            outward.invalidate(fromNumber: removed + index)
            backward.invalidate(fromNumber: removed + index)
        } else {
            if let last = samples.last, sample.clientSend <= last.clientSend { return false }
            samples.append(sample)
        }
        let horizon = sample.localMidpoint - configuration.windowNanoseconds
        while head < samples.count && samples[head].localMidpoint < horizon { head += 1 }
        if head > 4096 { samples.removeFirst(head); removed += head; head = 0 }
        let converging = mapping.map { $0.spanNanoseconds < configuration.minimumRateSpanNanoseconds } ?? true
        if converging || sample.clientSend - mapping!.reference >= configuration.refitIntervalNanoseconds {
            refit()
        }
        return true
    }

    /// How many exchanges back a reply overtaken by later ones is still put in.
    private static let reorderLimit = 64

    /// The way-out and way-back points of the window, and their fits' working space: kept
    /// between refits, so a refit over two minutes of exchanges allocates nothing.
    private var outward = LowerEnvelope()
    private var backward = LowerEnvelope()

    /// Starts the window at the latest floor step, if the last `floorStepSpanNanoseconds` show
    /// one: their lowest round trip is above the lowest of every earlier span of that length
    /// (so jitter alone, which lifts a short span's minimum too, does not look like a step), or
    /// below anything before.
    private func restartAtFloorStep() {
        // Four earlier spans at least, so that their highest floor shows how high jitter alone
        // lifts a span's.
        guard let last = samples.last, last.clientSend - samples[head].clientSend > 5 * configuration.floorStepSpanNanoseconds else { return }
        let span = configuration.floorStepSpanNanoseconds
        let recentStart = last.clientSend - span
        var olderFloor = Int64.max, highestSpanFloor = Int64.min, recentFloor = Int64.max, firstRecent = samples.count
        var spanStart = samples[head].clientSend, spanFloor = Int64.max
        for index in head..<samples.count {
            let sample = samples[index]
            if sample.clientSend < recentStart {
                olderFloor = min(olderFloor, sample.delay)
                if sample.clientSend - spanStart >= span {
                    highestSpanFloor = max(highestSpanFloor, spanFloor)
                    spanStart = sample.clientSend
                    spanFloor = .max
                }
                spanFloor = min(spanFloor, sample.delay)
            } else {
                if firstRecent == samples.count { firstRecent = index }
                recentFloor = min(recentFloor, sample.delay)
            }
        }
        // The recent span must be full: right after an outage a second of exchanges is no span.
        guard olderFloor != .max, recentFloor != .max, highestSpanFloor != .min, firstRecent < samples.count,
              samples[firstRecent].clientSend - recentStart < span / 5 else { return }
        let step = configuration.floorStepNanoseconds
        let rose = recentFloor > highestSpanFloor + step
        guard rose || recentFloor < olderFloor - step else { return }
        // Where the new floor starts. A floor that rose shows only once a whole span lies above
        // the old one (jitter lifts a short span's floor too), so that span is on the new floor.
        // One that fell shows at its first exchange below the old one, and a window from there
        // starts on it; the estimates before it rest on the old floor alone.
        var firstNew = firstRecent
        if !rose {
            while firstNew < samples.count - 1 && samples[firstNew].delay >= olderFloor - step { firstNew += 1 }
        }
        // The clocks as known before the new floor's first exchange: the offset carries on
        // from there (see `asymmetryNanoseconds`). A floor that rose has a span of exchanges on
        // it already, and the asymmetry is measured once; one that fell has one exchange, and
        // the asymmetry is measured again until a span of them is in.
        estimateBeforeStep = recentEstimates.last { $0.reference < samples[firstNew].clientSend } ?? mapping
        rateBeforeStep = estimateBeforeStep?.skew
        carriesBeforeStepUntil = rose ? last.clientSend : samples[firstNew].clientSend + span
        head = firstNew
        floorSteps += 1
        keepsRateAfterStep = true
    }

    /// Set by a floor step: the estimate the clocks carry on from, until `carriesBeforeStepUntil`.
    /// Until then every refit measures the asymmetry afresh against it, and after it the last
    /// measure stays: a floor that fell is seen at its first exchange, and one exchange's height
    /// above the new floor (up to the jitter) would have been taken for asymmetry for good.
    private var estimateBeforeStep: ClockMapping?
    private var carriesBeforeStepUntil: Int64 = .min

    /// How much of the two lines' offset is the paths' asymmetry, in nanoseconds: taken out of
    /// every estimate. A monotonic clock never steps, so when the round-trip floor steps (a
    /// route change) and the lines' offset steps with it, the step is in the paths, not the
    /// clocks: one way got longer than the other. The offset carries on from the estimate
    /// before the step at the rate known then, and what the new lines say beyond that is kept
    /// here. (Taken as an offset, a 4 ms step on one way moved every estimate by 2 ms, and
    /// rooms behind different routes apart by as much.) A step on both ways alike leaves this
    /// near 0.
    public private(set) var asymmetryNanoseconds: Double = 0

    /// The rate of `estimateBeforeStep`, kept while `keepsRateAfterStep`.
    private var rateBeforeStep: Double?

    /// Whether the window starts at a floor step and is still too short to fit a rate.
    private var keepsRateAfterStep = false

    /// Floor steps seen (and restarted from).
    public private(set) var floorSteps = 0

    /// Refits whose lines tilted together (`maximumPathTrend`) and that kept the known rate.
    public private(set) var implausibleFits = 0

    /// Whether the window's exchanges since its latest outage (`exchangeGapNanoseconds` with
    /// none) span less than `rateSpanAfterGapNanoseconds`. Looks back that far at most.
    private func recoversFromGap(_ window: ArraySlice<ClockSample>) -> Bool {
        guard let last = window.last else { return false }
        var index = window.endIndex - 1
        while index > window.startIndex {
            let here = window[index].clientSend
            if last.clientSend - here >= configuration.rateSpanAfterGapNanoseconds { return false }
            if here - window[index - 1].clientSend >= configuration.exchangeGapNanoseconds { return true }
            index -= 1
        }
        return false
    }

    private func refit() {
        restartAtFloorStep()
        let window = samples[head...]
        guard let first = window.first, let last = window.last else { return }
        let reference = last.clientSend
        // Way out: (t1, t2 − t1); way back: (t4, t4 − t3). Times relative to the reference.
        // Worked on as locals (swapped out and back, no copy): a class's stored property would
        // be checked for exclusive access on every append.
        var outward = LowerEnvelope(), backward = LowerEnvelope()
        swap(&outward, &self.outward)
        swap(&backward, &self.backward)
        defer {
            swap(&outward, &self.outward)
            swap(&backward, &self.backward)
        }
        outward.startWindow(firstNumber: removed + head)
        backward.startWindow(firstNumber: removed + head)
        for sample in window {
            outward.append(x: Double(sample.clientSend - reference), y: Double(sample.serverReceive - sample.clientSend))
            backward.append(x: Double(sample.clientReceive - reference), y: Double(sample.clientReceive - sample.serverSend))
        }
        let span = Double(last.clientSend - first.clientSend)
        if keepsRateAfterStep && span >= Double(configuration.rateSpanAfterFloorStepNanoseconds) {
            keepsRateAfterStep = false
            rateBeforeStep = nil
        }
        let keepsRate = keepsRateAfterStep || (mapping != nil && hasFittedRate && recoversFromGap(window))
        let fitSlope = span >= Double(configuration.minimumRateSpanNanoseconds) && !keepsRate
        // Unfitted, the rate known so far: the way out's delay grows with it, the way back's shrinks.
        // After a floor step, the rate of the estimate before it: the refits between the step
        // and its detection (a span later) rest on lines whose ends may sit on the new floor,
        // and one of them, kept, had a room 50 ppm off and 0.7 ms away 20 s on (under a CPU hog).
        let known = (keepsRateAfterStep ? rateBeforeStep : nil) ?? mapping?.skew ?? 0
        var lineOut = outward.fit(slope: fitSlope ? nil : known)
        var lineBack = backward.fit(slope: fitSlope ? nil : -known)
        // Clock drift tilts the two envelopes opposite ways by the same amount; a path whose
        // delay changes tilts them the same way. Lines whose tilts do not cancel rest on a
        // stretch of late exchanges the window is too short to see over (a loaded machine
        // right after a start: every request for a second stamped late on its way in), and
        // extrapolated to now they put the offset tens of milliseconds off. The rate known so
        // far, through each envelope's lowest point, is the better estimate until a later
        // window sees past the stretch.
        if fitSlope && abs(lineOut.slope + lineBack.slope) > configuration.maximumPathTrend {
            lineOut = outward.fit(slope: known)
            lineBack = backward.fit(slope: -known)
            implausibleFits += 1
        }
        var skew = (lineOut.slope - lineBack.slope) / 2
        skew = max(-0.001, min(0.001, skew))
        if fitSlope {
            // Each line again with the rate both give, through its lowest point: the rate is
            // the clocks', the same both ways, and half the slopes' difference is a better
            // estimate of it than either slope. The lowest point lies seconds back, and a
            // slope's error, carried from it to now, was most of a timer-grid path's error
            // (the grid's floor is found within a few µs; the slope only within ppm).
            lineOut = outward.fit(slope: skew)
            lineBack = backward.fit(slope: -skew)
        }
        // out = θ + base, back = base − θ  ⇒  θ = (out − back) / 2, at the reference (time 0).
        let linesOffset = (lineOut.intercept - lineBack.intercept) / 2
        if let before = estimateBeforeStep {
            // On a new floor: the clocks went on as they were.
            asymmetryNanoseconds = linesOffset - Double(before.serverTime(atLocal: reference) - reference)
            if reference >= carriesBeforeStepUntil { estimateBeforeStep = nil }
        }
        var offset = linesOffset - asymmetryNanoseconds
        // The history the estimate rests on: a window restarted at a floor step keeps the rate
        // fitted before it, so a room that plays by the clock goes on playing.
        historyStart = min(historyStart ?? first.clientSend, first.clientSend)
        var estimate = ClockMapping(reference: reference, offset: offset, skew: skew, errorNanoseconds: 0, sampleCount: window.count,
                                    spanNanoseconds: last.clientSend - historyStart!)
        // The spread: how far above the lines the nearest points reach, plus how far the
        // estimates of the last few seconds stray from this one, each compared where it was made
        // (an early estimate's rate error, carried over seconds, would count against this one).
        var wander = 0.0, rateWander = 0.0
        for earlier in recentEstimates {
            wander = max(wander, abs(Double(earlier.serverTime(atLocal: earlier.reference) - estimate.serverTime(atLocal: earlier.reference))))
            rateWander = max(rateWander, abs(earlier.skew - skew))
        }
        estimate.spreadNanoseconds = (lineOut.slack + lineBack.slack) / 2 + wander
        estimate.pathChanges = floorSteps
        estimate.asymmetryNanoseconds = asymmetryNanoseconds
        // The rate's uncertainty: until a rate is fitted, anything the clamp allows. A fitted
        // rate rests on two chords, each end of which may sit as high above the true floor as
        // the points nearest the line reach (the slack): each slope may be off by twice its
        // slack over the chord's length, half the window's span, and the rate by half their
        // sum. Or by as much as the last fits' rates strayed, if more; and never by less than
        // the least a fit is trusted to. (A first fit, over a second, may be tens of ppm off,
        // and carried the exchanges of that second to the end of it, a bound without this was
        // seen to miss the truth by 15 µs.)
        // While the window restarted at a floor step keeps the rate fitted before it, the rate
        // is that fit's, and so is its uncertainty (this window's lines are not fitted).
        if fitSlope { hasFittedRate = true }
        if keepsRate, let before = mapping {
            estimate.rateUncertainty = before.rateUncertainty
        } else if hasFittedRate {
            let fitUncertainty = span > 0 ? 2 * (lineOut.slack + lineBack.slack) / span : 1e-3
            estimate.rateUncertainty = min(1e-3, configuration.minimumRateUncertainty + max(fitUncertainty, rateWander))
        } else {
            estimate.rateUncertainty = 1e-3
        }
        let feasible = feasibleInterval(window: window, reference: reference, skew: skew, rateUncertainty: estimate.rateUncertainty)
        // The truth lies in the feasible interval: an estimate outside it (an asymmetry carried
        // over a route that has changed since) is brought to its nearest end. Ends that cross
        // (lower above upper) mean an assumption failed: the rate is further off than its
        // uncertainty says, or a clock stepped; the bound then grows by the overlap.
        if feasible.lower <= feasible.upper {
            offset = min(max(offset, feasible.lower), feasible.upper)
            estimate.offset = offset
        }
        estimate.errorNanoseconds = max(abs(feasible.upper - offset), abs(offset - feasible.lower)) + max(0, feasible.lower - feasible.upper)
        floors = ClockFloors(reference: reference, outwardIntercept: lineOut.intercept, outwardSlope: lineOut.slope,
                             backwardIntercept: lineBack.intercept, backwardSlope: lineBack.slope)
        if recentEstimates.count == Self.recentEstimateCount { recentEstimates.removeFirst() }
        // Before its rate is fitted an estimate is known to drift; it is no yardstick.
        if fitSlope || keepsRateAfterStep { recentEstimates.append(estimate) }
        mapping = estimate
    }

    /// Whether a rate has ever been fitted (a window restarted at a floor step keeps it).
    private var hasFittedRate = false

    /// The interval the exchanges confine the true offset at `reference` to, whatever the paths'
    /// asymmetry; the bound is how far the estimate is from its farther end.
    ///
    /// Each exchange's way out took no less than nothing, so the true offset when it left was at
    /// most `t2 − t1`; its way back likewise, so the offset when it came back was at least
    /// `−(t4 − t3)`. Carried to the reference at the fitted rate, and widened by the rate's
    /// uncertainty over the carry, the lowest of the first and the highest of the second close
    /// an interval around the truth: at best as wide as the two ways' least delays (the way out
    /// of one exchange and the way back of another), half of it on each side of an estimate
    /// that assumes the ways equal. That is a bound, not a statistic: it holds on paths whose
    /// two ways differ, which no two-way estimate can see (a statistic of the fit's own
    /// scatter covered the truth 64 % of the time in a room behind a busy relay). It is as
    /// tight as the path's round-trip floor allows: kernel receive stamps (`DatagramArrivalStamper`)
    /// keep the hosts' wake-ups out of it.
    private func feasibleInterval(window: ArraySlice<ClockSample>, reference: Int64, skew: Double, rateUncertainty: Double) -> (lower: Double, upper: Double) {
        var upper = Double.infinity, lower = -Double.infinity
        let horizon = reference - configuration.boundHorizonNanoseconds
        for sample in window.reversed() {
            if sample.clientReceive < horizon { break }
            // θ(reference) = θ(t) + skew · (reference − t), the rate within ± rateUncertainty.
            let out = Double(reference - sample.clientSend)
            upper = min(upper, Double(sample.serverReceive - sample.clientSend) + skew * out + rateUncertainty * abs(out))
            let back = Double(reference - sample.clientReceive)
            lower = max(lower, -Double(sample.clientReceive - sample.serverSend) + skew * back - rateUncertainty * abs(back))
        }
        // The window always holds the exchange at the reference: both ends are set.
        precondition(upper.isFinite && lower.isFinite, "ClockEstimator: a refit's window holds no exchange within the bound's horizon")
        return (lower, upper)
    }

    /// The first exchange the estimate rests on (the window may have started again since).
    private var historyStart: Int64?

    /// The last estimates (a refit every `refitIntervalNanoseconds`: the last ten seconds).
    private var recentEstimates: [ClockMapping] = []
    private static let recentEstimateCount = 40
}
