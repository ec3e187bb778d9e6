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
    /// Local time the estimate's history spans, from its first exchange.
    public var spanNanoseconds: Int64 = 0
    /// Route changes seen so far (steps of the round-trip floor), and how much of the two
    /// ways' lines' offset is taken, since the first exchange, as their asymmetry
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
        /// floor before them (or one of them fell that far below it), each way's floor is taken
        /// to have stepped there (`PathStep`), and the exchanges from there on are fitted moved
        /// back by their way's step. Lines through points on both floors would tilt.
        public var floorStepNanoseconds: Int64 = 500_000
        public var floorStepSpanNanoseconds: Int64 = 5_000_000_000
        /// How far either side of a route change each way's step is measured from
        /// (`measurePathSteps`): measured again at each refit until that much of its later side
        /// is in, then kept.
        public var pathStepMeasureNanoseconds: Int64 = 10_000_000_000
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

    /// A route change: from the exchange that left at `at` on, each way's floor lies this much
    /// higher (lower, if negative) than before it. A monotonic clock never steps, so the clocks
    /// carry on through it at their one rate, and each way's step is what its envelope jumps
    /// by there (at that rate, from its lowest point before to its lowest after). Fitting the
    /// exchanges after it moved back by their way's step joins the window's two floors into one,
    /// so the rate is fitted over all of it: restarting the window at the step and keeping the
    /// rate known before it until the new window was 30 s long carried that rate's error, a ppm
    /// or two, into 15–30 µs of drift in real rooms.
    private struct PathStep {
        var at: Int64
        /// The rate known before it, which it is measured at.
        var skew: Double
        var outward = 0.0
        var backward = 0.0
        /// The last exchange it was measured with.
        var measuredUntil: Int64 = .min
    }

    /// The route changes whose earlier floor is still in the window, oldest first.
    private var pathSteps: [PathStep] = []
    /// The steps of the route changes whose earlier floor has left the window: every exchange
    /// in it is beyond them.
    private var settledOutward = 0.0, settledBackward = 0.0

    /// How far each way's floor lies from where it was when the first exchange was made.
    private var totalOutwardStep: Double { pathSteps.reduce(settledOutward) { $0 + $1.outward } }
    private var totalBackwardStep: Double { pathSteps.reduce(settledBackward) { $0 + $1.backward } }

    /// The index of the window's first exchange sent at `time` or later.
    private func firstIndex(sentAtOrAfter time: Int64) -> Int {
        var low = head, high = samples.count
        while low < high {
            let middle = (low + high) / 2
            if samples[middle].clientSend < time { low = middle + 1 } else { high = middle }
        }
        return low
    }

    /// Measures the steps of the route changes whose later side is still shorter than
    /// `pathStepMeasureNanoseconds`, each way's: its lowest point on a line of the rate known
    /// before the change, within that long after it, less the one within that long before it
    /// (back to the change before, if nearer). The rate is the one known before the change, not
    /// the joined window's: a step measured at a rate fitted across it can lean with that rate,
    /// and neither then corrects the other. The lever is short so that the rate's error, carried
    /// from one lowest point to the other, stays small. A change whose earlier side has left
    /// the window is settled.
    private func measurePathSteps() {
        guard head < samples.count, let last = samples.last else { return }
        while let oldest = pathSteps.first, oldest.at <= samples[head].clientSend {
            settledOutward += oldest.outward
            settledBackward += oldest.backward
            pathSteps.removeFirst()
        }
        let lever = configuration.pathStepMeasureNanoseconds
        for k in pathSteps.indices {
            let step = pathSteps[k]
            // Measured until a lever's length of its later side is in; then kept.
            guard step.measuredUntil < step.at + lever else { continue }
            let from = max(step.at - lever, k > 0 ? pathSteps[k - 1].at : .min)
            let to = min(step.at + lever, k + 1 < pathSteps.count ? pathSteps[k + 1].at : .max)
            var outBefore = Double.infinity, backBefore = Double.infinity, outAfter = Double.infinity, backAfter = Double.infinity
            var index = firstIndex(sentAtOrAfter: from)
            while index < samples.count && samples[index].clientSend < to {
                let sample = samples[index]
                // Way out: t2 − t1 = θ + way, θ growing at the rate; way back: t4 − t3 = way − θ.
                let out = Double(sample.serverReceive - sample.clientSend) - step.skew * Double(sample.clientSend - step.at)
                let back = Double(sample.clientReceive - sample.serverSend) + step.skew * Double(sample.clientReceive - step.at)
                if sample.clientSend < step.at {
                    outBefore = min(outBefore, out)
                    backBefore = min(backBefore, back)
                } else {
                    outAfter = min(outAfter, out)
                    backAfter = min(backAfter, back)
                }
                index += 1
            }
            guard outBefore.isFinite, outAfter.isFinite else { continue }
            pathSteps[k].outward = outAfter - outBefore
            pathSteps[k].backward = backAfter - backBefore
            pathSteps[k].measuredUntil = last.clientSend
        }
    }

    /// Notes a route change, if the last `floorStepSpanNanoseconds` show one: their lowest round
    /// trip (each exchange's moved back by the steps known) is above the lowest of every earlier
    /// span of that length (so jitter alone, which lifts a short span's minimum too, does not
    /// look like a step), or below anything before. Returns whether it did.
    private func noteFloorStep() -> Bool {
        // Four earlier spans at least, so that their highest floor shows how high jitter alone
        // lifts a span's.
        guard let last = samples.last, last.clientSend - samples[head].clientSend > 5 * configuration.floorStepSpanNanoseconds else { return false }
        let span = configuration.floorStepSpanNanoseconds
        let recentStart = last.clientSend - span
        var olderFloor = Int64.max, highestSpanFloor = Int64.min, recentFloor = Int64.max, firstRecent = samples.count
        var spanStart = samples[head].clientSend, spanFloor = Int64.max
        for index in head..<samples.count {
            let sample = samples[index]
            let delay = stepFreeDelay(of: sample)
            if sample.clientSend < recentStart {
                olderFloor = min(olderFloor, delay)
                if sample.clientSend - spanStart >= span {
                    highestSpanFloor = max(highestSpanFloor, spanFloor)
                    spanStart = sample.clientSend
                    spanFloor = .max
                }
                spanFloor = min(spanFloor, delay)
            } else {
                if firstRecent == samples.count { firstRecent = index }
                recentFloor = min(recentFloor, delay)
            }
        }
        // The recent span must be full: right after an outage a second of exchanges is no span.
        guard olderFloor != .max, recentFloor != .max, highestSpanFloor != .min, firstRecent < samples.count,
              samples[firstRecent].clientSend - recentStart < span / 5 else { return false }
        let threshold = configuration.floorStepNanoseconds
        let rose = recentFloor > highestSpanFloor + threshold
        guard rose || recentFloor < olderFloor - threshold else { return false }
        // Where the new floor starts. A floor that rose shows only once a whole span lies above
        // the old one (jitter lifts a short span's floor too), so that span is on the new floor.
        // One that fell shows at its first exchange below the old one.
        var firstNew = firstRecent
        if !rose {
            while firstNew < samples.count - 1 && stepFreeDelay(of: samples[firstNew]) >= olderFloor - threshold { firstNew += 1 }
        }
        // After every step known so far (a new one cannot come before the last).
        guard pathSteps.last.map({ samples[firstNew].clientSend > $0.at }) ?? true else { return false }
        let at = samples[firstNew].clientSend
        // The refits since the change rest on lines with points of the new floor.
        let skew = recentEstimates.last { $0.reference < at }?.skew ?? mapping?.skew ?? 0
        pathSteps.append(PathStep(at: at, skew: skew))
        floorSteps += 1
        return true
    }

    /// An exchange's round trip less the steps of the route changes before it that are still
    /// being measured (the window's exchanges are all beyond the settled ones).
    private func stepFreeDelay(of sample: ClockSample) -> Int64 {
        var shift = 0.0
        for step in pathSteps where sample.clientSend >= step.at { shift += step.outward + step.backward }
        return sample.delay - Int64(shift.rounded())
    }

    /// How much of the two lines' offset is the paths' asymmetry, in nanoseconds: taken out of
    /// every estimate. A monotonic clock never steps, so when the round-trip floor steps (a
    /// route change) and the lines' offset steps with it, the step is in the paths, not the
    /// clocks: one way got longer than the other by twice this (`PathStep`). (Taken as an
    /// offset, a 4 ms step on one way moved every estimate by 2 ms, and rooms behind different
    /// routes apart by as much.) A step on both ways alike leaves this near 0.
    public var asymmetryNanoseconds: Double { (totalOutwardStep - totalBackwardStep) / 2 }

    /// Floor steps (route changes) seen.
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
        // A new route change is looked for with the steps as last measured (measured first, a
        // floor that fell within a step's later side would be taken into that step unseen).
        _ = noteFloorStep()
        measurePathSteps()
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
        // Each exchange moved back by its way's steps since the window's first: one floor each
        // way. The block whose points a step starts within has a new hull whenever the step is
        // measured again; whole blocks each side move as one.
        var stepIndex = 0, shiftOut = 0.0, shiftBack = 0.0
        for step in pathSteps {
            let number = removed + firstIndex(sentAtOrAfter: step.at)
            outward.refreshBlock(holding: number)
            backward.refreshBlock(holding: number)
        }
        for sample in window {
            while stepIndex < pathSteps.count && sample.clientSend >= pathSteps[stepIndex].at {
                shiftOut += pathSteps[stepIndex].outward
                shiftBack += pathSteps[stepIndex].backward
                stepIndex += 1
            }
            outward.append(x: Double(sample.clientSend - reference), y: Double(sample.serverReceive - sample.clientSend) - shiftOut)
            backward.append(x: Double(sample.clientReceive - reference), y: Double(sample.clientReceive - sample.serverSend) - shiftBack)
        }
        let span = Double(last.clientSend - first.clientSend)
        let keepsRate = mapping != nil && hasFittedRate && recoversFromGap(window)
        let fitSlope = span >= Double(configuration.minimumRateSpanNanoseconds) && !keepsRate
        // Unfitted, the rate known so far: the way out's delay grows with it, the way back's shrinks.
        let known = mapping?.skew ?? 0
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
        // The lines are joined across the route changes still in the window; those that have
        // left it moved every exchange in it alike.
        let linesOffset = (lineOut.intercept - lineBack.intercept) / 2
        var offset = linesOffset - (settledOutward - settledBackward) / 2
        // The history the estimate rests on, from the first exchange ever kept.
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
        // The raw floors, where the latest exchanges lie: beyond every step in the window.
        floors = ClockFloors(reference: reference, outwardIntercept: lineOut.intercept + shiftOut, outwardSlope: lineOut.slope,
                             backwardIntercept: lineBack.intercept + shiftBack, backwardSlope: lineBack.slope)
        if recentEstimates.count == Self.recentEstimateCount { recentEstimates.removeFirst() }
        // Before its rate is fitted an estimate is known to drift; it is no yardstick.
        if fitSlope { recentEstimates.append(estimate) }
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
