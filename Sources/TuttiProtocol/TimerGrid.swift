import TuttiCore
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The timer grid a path delivers on, found from the arrival stamps of one way's datagrams.
///
/// A relay whose timers fire on whole ticks (a busy router, a kernel at 250 Hz, `tutti proxy`
/// on one) holds each datagram to its next tick: arrivals then fall on a lattice, one tick
/// apart, in the receiver's clock. A datagram that reaches the relay just before a tick crosses
/// at the path's floor; one just after waits a whole tick. Sent at random phases, one exchange
/// in hundreds lands within a few µs of the floor (on a 4 ms grid with 0.2 ms of jitter, one in
/// a thousand within 40 µs), and the estimate's error is what the few found leave
/// (`AimedExchanges` aims at the tick instead).
///
/// Found by the stamps' phase against each candidate period (the resultant length of the
/// phases as angles): arrivals on a lattice of period T, or of any multiple of it, line up;
/// arrivals at random do not. The longest period they line up on is the grid's. Tracked from
/// each stamp after that, so that a clock drifting against the relay's (±100 ppm: 100 µs a
/// second) keeps its lattice.
///
/// Not thread-safe: one way of one room's clock sync owns one.
public struct TimerGrid: Sendable {
    public struct Configuration: Sendable, Equatable {
        /// The periods a grid may have: the ticks kernels and routers run on (1000, 500, 250,
        /// 200 and 100 Hz).
        public var candidatePeriods: [Int64] = [1_000_000, 2_000_000, 4_000_000, 5_000_000, 10_000_000]
        /// The stamps each look spans.
        public var window = 64
        /// How often (in stamps) the grid is looked for again.
        public var lookEvery = 16
        /// The resultant length (0 ... 1) that says the stamps lie on a lattice: stamps at
        /// random give about 1/√window (0.125 for 64), a lattice with a tenth of its period of
        /// scatter about 0.95.
        public var threshold = 0.9
        /// Below this, a grid found is taken to be gone: a burst of late stamps (a relay's
        /// timers late under load) does not drop it, and the exchanges with it, at once.
        public var lossThreshold = 0.6
        /// How far each stamp moves the tracked lattice towards itself: enough to follow a
        /// clock 100 ppm off the relay's within a few µs, little enough to average a late stamp
        /// away.
        public var tracking = 0.125
        public init() {}
    }

    public let configuration: Configuration
    /// The last `window` stamps, a ring.
    private var stamps: [Int64]
    private var next = 0
    private var seen = 0
    /// The grid's period, if the stamps lie on one.
    public private(set) var period: Int64?
    /// One of the lattice's points (the receiver's clock), tracked forward.
    private var anchor: Int64 = 0

    public init(configuration: Configuration = Configuration()) {
        precondition(configuration.window >= 8 && configuration.lookEvery >= 1 && !configuration.candidatePeriods.isEmpty
                     && configuration.candidatePeriods.allSatisfy { $0 > 0 }, "TimerGrid: a window of 8 or more, positive periods")
        self.configuration = configuration
        stamps = Array(repeating: 0, count: configuration.window)
    }

    /// Adds a datagram's arrival stamp (the receiver's clock). An `aimed` datagram (sent to
    /// reach a tick of the lattice already found) only moves the lattice: the grid is looked
    /// for among the others, or the aims, arriving on the lattice because they were aimed at
    /// it, would keep a grid that has gone (a relay's timers made exact, its jitter small).
    public mutating func add(_ stamp: Int64, aimed: Bool = false) {
        if !aimed {
            stamps[next] = stamp
            next = (next + 1) % stamps.count
            seen += 1
        }
        if let period {
            // Onto the lattice point nearest the stamp, then part of the way to it. A stamp far
            // off (a late wake-up on the relay) counts as a sixteenth of a tick off at most, and
            // moves it an eighth of that.
            let steps = ((stamp - anchor) + period / 2).floorDivided(by: period)
            anchor += steps * period
            let deviation = max(-period / 16, min(period / 16, stamp - anchor))
            anchor += Int64((Double(deviation) * configuration.tracking).rounded())
        }
        if !aimed && seen >= stamps.count && seen % configuration.lookEvery == 0 { look(latest: stamp) }
    }

    /// The first lattice point at or after `time` (the receiver's clock), if there is a grid.
    public func point(atOrAfter time: Int64) -> Int64? {
        guard let period else { return nil }
        return anchor + (time - anchor + period - 1).floorDivided(by: period) * period
    }

    /// The lattice point nearest `time`, if there is a grid.
    public func nearestPoint(to time: Int64) -> Int64? {
        guard let period else { return nil }
        return anchor + (time - anchor + period / 2).floorDivided(by: period) * period
    }

    /// How well the window's stamps line up on `candidate` (0 ... 1), and their mean phase in
    /// it (ns).
    private func resultant(_ candidate: Int64) -> (length: Double, phase: Double) {
        var cosines = 0.0, sines = 0.0
        for stamp in stamps {
            let angle = 2 * Double.pi * Double(stamp.floorModulo(candidate)) / Double(candidate)
            cosines += cos(angle)
            sines += sin(angle)
        }
        var phase = atan2(sines, cosines) / (2 * Double.pi)
        if phase < 0 { phase += 1 }
        return ((cosines * cosines + sines * sines).squareRoot() / Double(stamps.count), phase * Double(candidate))
    }

    /// Looks for the longest candidate period the window's stamps line up on.
    private mutating func look(latest: Int64) {
        var found: (period: Int64, phase: Double)?
        for candidate in configuration.candidatePeriods.sorted(by: >) {
            let (length, phase) = resultant(candidate)
            if length >= configuration.threshold {
                found = (candidate, phase)
                break
            }
        }
        guard let found else {
            // A grid found stays while its stamps still mostly line up.
            if let period, resultant(period).length >= configuration.lossThreshold { return }
            period = nil
            return
        }
        // A grid already tracked at that period keeps its (finer) anchor.
        guard period != found.period else { return }
        period = found.period
        let phase = Int64(found.phase.rounded())
        anchor = latest - (latest - phase).floorModulo(found.period)
        if latest - anchor > found.period / 2 { anchor += found.period }
    }
}

extension Int64 {
    /// The quotient rounded towards −∞ (`/` rounds towards 0).
    func floorDivided(by divisor: Int64) -> Int64 {
        let quotient = self / divisor
        return (self % divisor != 0 && (self < 0) != (divisor < 0)) ? quotient - 1 : quotient
    }

    /// The remainder in 0 ..< divisor, for a positive divisor.
    func floorModulo(_ divisor: Int64) -> Int64 {
        let remainder = self % divisor
        return remainder < 0 ? remainder + divisor : remainder
    }
}
