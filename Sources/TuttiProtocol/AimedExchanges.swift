import TuttiCore

/// Times a room's clock-sync exchanges so that, on a path that delivers on a timer grid
/// (`TimerGrid`), their datagrams reach each tick just in time: at the way's floor.
///
/// On such a path an exchange shows its way's floor only if its datagram reaches the relay just
/// before a tick; sent at random, one in hundreds does, and the floors (so the clocks' offset,
/// and more so their rate, carried from the lowest points seconds back to now) are found only
/// as well as those few allow. Aimed, each request leaves so that, at the way out's floor, it
/// would arrive a small lead before a tick of the house's arrival lattice; each reply is held
/// by the house (the request names when, `ClockSyncPacket.serverSend`) so that it would arrive
/// a lead before a tick of the room's. An aim that the path's jitter carries past its tick
/// waits a whole tick more, far above the floor, where the lower envelope does not look; one
/// that makes it lands within the lead of the floor. The lead is steered so that about one aim
/// in ten makes its tick (`madeShare`): a lower lead is closer to the floor but made less
/// often. It drifts down to the truth from a floor found too high (an aim below the line that
/// makes its tick is a new lowest point), and absorbs how late each side's timers fire.
///
/// One exchange in `unaimedEvery` is left at random (at a random phase of the grid, and with the
/// house's own dither), so the floors keep being sampled at every phase whatever the aim does.
///
/// Not thread-safe: one room's clock sync owns one.
public struct AimedExchanges: Sendable {
    public struct Configuration: Sendable, Equatable {
        /// How far above the lowest lead the leads are drawn.
        public var widthNanoseconds: Int64 = 40_000
        /// The share of aims that should make their tick.
        public var madeShare = 0.1
        /// How far one missed aim raises the lowest lead (a made one lowers it by as much
        /// times (1 − share) / share).
        public var stepNanoseconds = 1_000.0
        /// One exchange in this many is not aimed.
        public var unaimedEvery = 4
        /// How long after its request can have arrived (past a tick missed) a reply is asked for.
        public var replyMarginNanoseconds: Int64 = 500_000
        /// The longest hold a room asks the house for (`ClockSyncResponder.maximumRequestedHold`).
        public var maximumHoldNanoseconds: Int64 = 25_000_000
        public var grid = TimerGrid.Configuration()
        public init() {}
    }

    /// When to send one exchange, and what it aims at.
    public struct Plan: Sendable, Equatable {
        /// When to send the request (local clock).
        public var send: Int64
        /// The tick of the house's arrival lattice the request aims at (house clock).
        public var outwardTick: Int64?
        /// When the house should send its reply (house clock), 0 for its own dither.
        public var replyAt: Int64
        /// The tick of the room's arrival lattice the reply aims at (local clock).
        public var backwardTick: Int64?

        public init(send: Int64, outwardTick: Int64? = nil, replyAt: Int64 = 0, backwardTick: Int64? = nil) {
            self.send = send
            self.outwardTick = outwardTick
            self.replyAt = replyAt
            self.backwardTick = backwardTick
        }
    }

    public let configuration: Configuration
    /// Arrivals at the house (`t2`, its clock) and at the room (`t4`).
    public private(set) var outwardGrid: TimerGrid
    public private(set) var backwardGrid: TimerGrid
    /// The lowest lead over each way's floor an aim is drawn from.
    private var outwardLead: Double
    private var backwardLead: Double
    private var outwardPeriod: Int64?
    private var backwardPeriod: Int64?
    /// The plans of the exchanges in flight, by sequence number modulo the ring's size.
    private var pending: [(sequence: UInt32, plan: Plan)?]
    private var planned = 0
    /// Aims that made their tick, and aims in all, each way.
    public private(set) var outwardMade = 0, outwardAimed = 0, backwardMade = 0, backwardAimed = 0

    /// Whether both ways' grids are known, so that both ways are aimed at.
    public var isAiming: Bool { outwardGrid.period != nil && backwardGrid.period != nil }

    public init(configuration: Configuration = Configuration()) {
        precondition(configuration.unaimedEvery >= 1 && configuration.madeShare > 0 && configuration.madeShare < 1,
                     "AimedExchanges: unaimedEvery ≥ 1 and 0 < madeShare < 1")
        self.configuration = configuration
        outwardGrid = TimerGrid(configuration: configuration.grid)
        backwardGrid = TimerGrid(configuration: configuration.grid)
        outwardLead = Self.initialLead
        backwardLead = Self.initialLead
        pending = Array(repeating: nil, count: 128)
    }

    /// Where the lead starts: a little below the floor found so far, which sits above the
    /// truth by the few µs its lowest exchange had to spare.
    private static let initialLead = -20_000.0

    /// Plans exchange `sequence`, to be sent no earlier than `earliest` (local clock).
    public mutating func plan(sequence: UInt32, earliest: Int64, floors: ClockFloors?, random: inout SplitMix64) -> Plan {
        planned += 1
        var plan = Plan(send: earliest, outwardTick: nil, replyAt: 0, backwardTick: nil)
        defer { pending[slot(sequence)] = (sequence, plan) }
        guard let floors else { return plan }
        guard planned % configuration.unaimedEvery != 0 else {
            // Unaimed: at a random phase of the way out's grid. Left at `earliest`, it would
            // follow the aimed exchange before it (a tick's phase) by the client's interval and
            // dither, a 2 ms arc of a 4 ms grid just after the tick, where no request shows
            // the floor and every arrival lies on the lattice whether the grid is there or not.
            if let period = outwardGrid.period { plan.send = earliest + Int64(random.next() % UInt64(period)) }
            return plan
        }
        let width = Double(configuration.widthNanoseconds)
        let outwardFloor = floors.outward(atLocal: earliest)
        // The house's arrival, at the floor: the request's send (local) plus t2 − t1.
        var arrival = Double(earliest) + outwardFloor
        if outwardGrid.period != nil {
            let lead = outwardLead + random.nextUnitInterval() * width
            if let tick = outwardGrid.point(atOrAfter: Int64((Double(earliest) + outwardFloor + lead).rounded(.up))) {
                plan.send = max(earliest, Int64((Double(tick) - outwardFloor - lead).rounded()))
                plan.outwardTick = tick
                arrival = Double(tick)
            }
        }
        if backwardGrid.period != nil {
            // No earlier than the request can have reached the house, a tick late if it missed.
            let earliestReply = arrival + Double((outwardGrid.period ?? 0) + configuration.replyMarginNanoseconds)
            let backwardFloor = floors.backward(atLocal: plan.send)
            let lead = backwardLead + random.nextUnitInterval() * width
            if let tick = backwardGrid.point(atOrAfter: Int64((earliestReply + backwardFloor + lead).rounded(.up))) {
                let replyAt = Int64((Double(tick) - backwardFloor - lead).rounded())
                // A hold the house would refuse (a floor far off) is not asked for. Measured from
                // the earliest the request can arrive: one that misses its tick arrives later, and
                // is held less.
                if Double(replyAt) - (Double(plan.send) + outwardFloor) <= Double(configuration.maximumHoldNanoseconds - configuration.replyMarginNanoseconds) {
                    plan.replyAt = replyAt
                    plan.backwardTick = tick
                }
            }
        }
        return plan
    }

    /// Takes exchange `sequence`'s reply: its arrivals show each way's grid, and whether its
    /// aims made their ticks.
    public mutating func observe(sequence: UInt32, sample: ClockSample) {
        // Stamps any clock can read (36 years either side of zero): an estimator other than
        // `ClockEstimator` passes on what a reply carries unchecked.
        let limit: Int64 = 1 << 60
        guard [sample.clientSend, sample.serverReceive, sample.serverSend, sample.clientReceive].allSatisfy({ (-limit...limit).contains($0) }) else { return }
        let slot = slot(sequence)
        let entry = pending[slot].flatMap { $0.sequence == sequence ? $0 : nil }
        pending[slot] = nil
        outwardGrid.add(sample.serverReceive, aimed: entry?.plan.outwardTick != nil)
        backwardGrid.add(sample.clientReceive, aimed: entry?.plan.backwardTick != nil)
        if outwardGrid.period != outwardPeriod {
            outwardPeriod = outwardGrid.period
            outwardLead = Self.initialLead
        }
        if backwardGrid.period != backwardPeriod {
            backwardPeriod = backwardGrid.period
            backwardLead = Self.initialLead
        }
        guard let entry else { return }
        if let tick = entry.plan.outwardTick, let period = outwardPeriod {
            let made = abs(sample.serverReceive - tick) < period / 2
            outwardAimed += 1
            if made { outwardMade += 1 }
            outwardLead = steer(outwardLead, made: made, period: period)
        }
        // Only a reply the house sent when asked (its timer a little late at most) aimed.
        if let tick = entry.plan.backwardTick, let period = backwardPeriod,
           (0...1_000_000).contains(sample.serverSend - entry.plan.replyAt) {
            let made = abs(sample.clientReceive - tick) < period / 2
            backwardAimed += 1
            if made { backwardMade += 1 }
            backwardLead = steer(backwardLead, made: made, period: period)
        }
    }

    /// Where exchange `sequence`'s plan is kept (2³² is a multiple of the ring's size, so the
    /// slots run on across the sequence's wrap).
    private func slot(_ sequence: UInt32) -> Int { Int(sequence % UInt32(pending.count)) }

    /// The lowest lead after an aim that made its tick (lower) or missed it (higher): no lower
    /// than a width below the floor, no higher than a quarter tick above it. An aim below a
    /// floor found too high (the first seconds') makes its tick, and lowers the floor itself
    /// at the next fit; had it lowered the lead too, without limit, the lead went hundreds of
    /// µs under the new floor, every aim of that way then missed for seconds, its floor was
    /// found from the unaimed exchanges only while the other way's was found from aims, and
    /// the offset was off by half the difference (640 µs on a 4 ms grid, cold).
    private func steer(_ lead: Double, made: Bool, period: Int64) -> Double {
        let share = configuration.madeShare
        let moved = made ? lead - configuration.stepNanoseconds * (1 - share) / share : lead + configuration.stepNanoseconds
        return max(-Double(configuration.widthNanoseconds), min(Double(period) / 4, moved))
    }
}
