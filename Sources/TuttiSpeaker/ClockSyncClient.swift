import NIOCore
import NIOPosix
import Synchronization
import TuttiCore
import TuttiProtocol

/// Runs the speaker's side of clock sync over UDP, each reply feeding a `ClockEstimator`.
///
/// Exchanges come fastest (about 290 a second) in the first 3 s, then at about 220 a second
/// while the estimate's spread is wide, 100 a second while it is young, then 20 a second. An estimate's error falls with the number of exchanges near each
/// path's floor, and a soft floor (a relay's timer grid, uniform jitter) needs many: at 20 a
/// second the first ten seconds gave 200 exchanges and a skew p99 of 60-120 µs on such paths,
/// at 100 a second 1000 exchanges and half that. Slowing down on a path whose spread (then
/// called its bound) was still wide made it worse (coarse timers, seed 2: p99 51 → 69 µs): the fitted lines pivot about
/// the window's mean time, which the dense early exchanges then hold far from now.
/// On a path whose arrivals lie on a relay's timer grid, three exchanges in four are timed to
/// reach its ticks at each way's floor (`AimedExchanges`), and the exchanges stay at 100–200 a
/// second however narrow the spread (see `scheduleNext`).
/// Exchanges run only while the room holds a clock-sync session (`setSession`: its connection's,
/// once the house has admitted it): each request carries the session's tag, and a reply that
/// does not carry it is dropped, so a forged reply cannot move the room's clock. Between
/// connections the room sends nothing and plays on its estimate.
///
/// Thread-safety: all members may be called from any thread.
public final class ClockSyncClient: Sendable {
    public struct Configuration: Sendable {
        /// The interval while settling, for `fastSpanNanoseconds` of history.
        public var fastIntervalNanoseconds: Int64 = 10_000_000
        /// The interval while the estimate's spread (`ClockMapping.spreadNanoseconds`) is over
        /// `settledSpreadNanoseconds`, however long its history: a soft floor (a relay's timer
        /// grid, uniform jitter) needs many exchanges, and only such a path pays for them. In
        /// the simulated house (10 seeds, 10 s of history, 40 s of play), going from 100 to
        /// about 220 a second took the worst seed's skew p99 from 55.6 to 34.9 µs on a 1 ms
        /// timer grid, 114.6 to 78.2 on a 4 ms grid and 55.3 to 20.1 under uniform jitter. About
        /// 500 a second (a 1 ms interval) took the 4 ms grid's to 51.7 (20 seeds: 59.1 against
        /// 78.5 and 70.0), but 32 real rooms starting on this 2-core machine from 23 to 101 µs
        /// (their 16 000 requests a second held the house's clock thread), and a speaker behind
        /// a soft floor from 3 to 5-7 % of a core.
        public var wideSpreadIntervalNanoseconds: Int64 = 4_000_000
        /// The interval in clock sync's first `startSpanNanoseconds` (2.5 ms, and the dither:
        /// about 290 exchanges a second, three times the fast rate), so that a
        /// play pressed when the rooms come up plays on a rate known sooner (a rate fitted over
        /// a second of jittery exchanges is tens of ppm off, and the offset carried from the
        /// window's middle to now by as many microseconds). The house holds each reply up to
        /// 10 ms (`ClockSyncResponder`), so some overtake others and are dropped.
        public var startIntervalNanoseconds: Int64 = 2_500_000
        public var startSpanNanoseconds: Int64 = 3_000_000_000
        public var fastSpanNanoseconds: Int64 = 15_000_000_000
        public var settledSpreadNanoseconds: Double = 30_000
        /// The interval once settled.
        public var intervalNanoseconds: Int64 = 50_000_000
        /// Which estimator the exchanges feed (another than the envelope only to compare them).
        public var estimator: ClockEstimatorKind = .envelope
        /// Each interval is lengthened by a random 0 ..< this: on a path that delivers on a
        /// timer grid, requests sent at a steady interval would keep one phase of it, and the
        /// way out would never show its floor (the house dithers its replies likewise).
        public var ditherNanoseconds: Int64 = 2_000_000
        /// Draws the dither (a simulated room passes its own, to replay).
        public var seed: UInt64?
        /// A reply the house held longer than this (its t3 − t2: its dither is at most 20 ms)
        /// says the house is behind: its clock thread has more requests than it can answer (64
        /// rooms starting at once on a small machine). The room then exchanges at the settled
        /// rate for `busyBackoffNanoseconds`, whatever phase it is in: at about 290 a second each, 64
        /// starting rooms held replies for over half a second, and no room's clock settled.
        public var busyHouseHoldNanoseconds: Int64 = 40_000_000
        public var busyBackoffNanoseconds: Int64 = 2_000_000_000
        /// Whether exchanges are aimed at the ticks of a timer grid the path delivers on, when
        /// the arrivals show one (`AimedExchanges`; off only to compare).
        public var aimsAtTimerGrids = true
        public var aim = AimedExchanges.Configuration()
        public init() {}
    }

    private let clock: any HostClock
    private let server: SocketAddress
    private let configuration: Configuration
    private let estimator: Mutex<any ClockEstimating>
    private let channel = Mutex<(any Channel)?>(nil)
    private let onUpdate: @Sendable (ClockMapping) -> Void
    private let sent = Atomic<Int>(0)
    private let random: Mutex<SplitMix64>
    private let received = Atomic<Int>(0)
    /// Until when (local clock) the house is taken to be busy.
    private let houseBusyUntil = Atomic<Int64>(.min)
    /// When the exchanges began (local clock): the start phase is timed from it, so that a room
    /// whose replies never come (a house gone, a firewall) does not stay at the start rate.
    private let startedAt = Atomic<Int64>(.max)
    /// The session requests are tagged with, and replies checked against.
    private let session = Mutex<ClockSyncKey?>(nil)
    /// Whether an exchange is scheduled: the exchanges pause while there is no session.
    private let running = Atomic<Bool>(false)
    private let nextSequence = Atomic<UInt32>(0)
    /// Replies dropped because their tag did not verify.
    private let forged = Atomic<Int>(0)
    /// Where the exchanges go on a path with a timer grid (and the random draws for the dither).
    private let aim: Mutex<AimedExchanges>

    public init(server: SocketAddress, clock: any HostClock, configuration: Configuration = Configuration(),
                onUpdate: @escaping @Sendable (ClockMapping) -> Void) {
        self.server = server
        self.clock = clock
        self.configuration = configuration
        self.onUpdate = onUpdate
        estimator = Mutex(configuration.estimator.make())
        random = Mutex(SplitMix64(seed: configuration.seed ?? UInt64(bitPattern: clock.now()) | 1))
        aim = Mutex(AimedExchanges(configuration: configuration.aim))
    }


    public var mapping: ClockMapping? { estimator.withLock { $0.mapping } }

    /// Whether the estimate rests on enough history, and has stopped moving enough, to slow
    /// down: its spread (its precision), not its bound, which the path's round trip sets and
    /// more exchanges would not shrink.
    private var isSettled: Bool {
        guard let mapping else { return false }
        return mapping.spanNanoseconds >= configuration.fastSpanNanoseconds && mapping.spreadNanoseconds <= configuration.settledSpreadNanoseconds
    }
    /// Whether the estimate's spread says more exchanges would still sharpen it.
    private var isSpreadWide: Bool {
        guard let mapping else { return false }
        return mapping.spreadNanoseconds > configuration.settledSpreadNanoseconds
    }
    public var exchanges: (sent: Int, received: Int) { (sent.load(ordering: .relaxed), received.load(ordering: .relaxed)) }
    /// Replies dropped for a tag that did not verify (forged, or of a session since replaced).
    public var forgedReplies: Int { forged.load(ordering: .relaxed) }

    /// Runs the exchanges under `key` (the connection's, once admitted), or pauses them (nil).
    public func setSession(_ key: ClockSyncKey?) {
        session.withLock { $0 = key }
        guard key != nil, let channel = channel.withLock({ $0 }) else { return }
        if running.compareExchange(expected: false, desired: true, ordering: .acquiringAndReleasing).exchanged {
            channel.eventLoop.execute { self.scheduleNext(on: channel, first: true) }
        }
    }

    public func start(group: any EventLoopGroup) async throws {
        let bootstrap = DatagramBootstrap(group: group)
            .channelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHandlers([DatagramArrivalStamper(clock: self.clock), ReplyHandler(client: self)])
                }
            }
        let bound = try await bootstrap.bind(host: server.protocol == .inet6 ? "::" : "0.0.0.0", port: 0).get()
        channel.withLock { $0 = bound }
        // A session set before the channel was: start now.
        if let key = session.withLock({ $0 }) { setSession(key) }
    }

    /// Runs clock sync on `datagrams`, a channel made by someone else (a simulated link): adds
    /// the reply handler and starts the exchanges. Call on the channel's event loop.
    public func attach(to datagrams: any Channel) throws {
        try datagrams.pipeline.syncOperations.addHandlers([DatagramArrivalStamper(clock: clock), ReplyHandler(client: self)])
        channel.withLock { $0 = datagrams }
        if let key = session.withLock({ $0 }) { setSession(key) }
    }

    public func stop() async {
        let current = channel.withLock { c -> (any Channel)? in defer { c = nil }; return c }
        try? await current?.close()
    }

    private func scheduleNext(on channel: any Channel, first: Bool = false) {
        let now = clock.now()
        if startedAt.load(ordering: .relaxed) == .max { startedAt.store(now, ordering: .relaxed) }
        let starting = now - startedAt.load(ordering: .relaxed) < configuration.startSpanNanoseconds
        var delay = starting ? configuration.startIntervalNanoseconds
            : isSettled ? configuration.intervalNanoseconds
            : isSpreadWide ? configuration.wideSpreadIntervalNanoseconds : configuration.fastIntervalNanoseconds
        // On a timer grid aimed at, as often as while the spread is wide (about 150 a second
        // on a 4 ms grid, with the waits for the ticks), however narrow it gets: an aimed
        // exchange shows the round trip's floor only when both its aims make their ticks (one
        // in a hundred), and the floor-step check takes the least round trip
        // of 5 s. At 20 a second a span of them often had none, its least round trip lay half
        // a tick above the earlier spans', and it was taken for a route change (14 of 40
        // simulated rooms on a 4 ms grid; in real processes one room was 140 µs off from then
        // on). At about 150 a second a span has several (five on average; one in a few hundred
        // has none).
        // The floors as last fitted, read once: they decide both the rate and the aim.
        let floors = configuration.aimsAtTimerGrids ? estimator.withLock { $0.floors } : nil
        if floors != nil && aim.withLock({ $0.isAiming }) {
            delay = min(delay, configuration.wideSpreadIntervalNanoseconds)
        }
        if now < houseBusyUntil.load(ordering: .relaxed) { delay = max(delay, configuration.intervalNanoseconds) }
        if configuration.ditherNanoseconds > 0 {
            delay += random.withLock { Int64($0.next() % UInt64(configuration.ditherNanoseconds)) }
        }
        let sequence = nextSequence.wrappingAdd(1, ordering: .relaxed).oldValue
        let earliest = now + (first ? 0 : delay)
        let plan: AimedExchanges.Plan
        if configuration.aimsAtTimerGrids && !first {
            plan = random.withLock { random in aim.withLock { $0.plan(sequence: sequence, earliest: earliest, floors: floors, random: &random) } }
        } else {
            plan = AimedExchanges.Plan(send: earliest)
        }
        channel.eventLoop.scheduleTask(in: .nanoseconds(max(0, plan.send - now))) { [self] in
            guard channel.isActive else { return running.store(false, ordering: .releasing) }
            guard let key = session.withLock({ $0 }) else {
                // Paused until the next session; `setSession` starts the exchanges again.
                running.store(false, ordering: .releasing)
                if session.withLock({ $0 }) != nil, running.compareExchange(expected: false, desired: true, ordering: .acquiringAndReleasing).exchanged {
                    scheduleNext(on: channel, first: true)
                }
                return
            }
            // A request's t3 field asks the house when to reply (0: when its dither says).
            let packet = ClockSyncPacket(isReply: false, sequence: sequence, clientSend: clock.now(), serverSend: plan.replyAt)
            let envelope = AddressedEnvelope(remoteAddress: server, data: channel.allocator.buffer(bytes: packet.encoded(key: key)))
            channel.writeAndFlush(envelope, promise: nil)
            sent.add(1, ordering: .relaxed)
            scheduleNext(on: channel)
        }
    }

    fileprivate func receive(_ bytes: ByteBuffer, at arrival: Int64) {
        let view = bytes.readableBytesView
        guard let packet = try? ClockSyncPacket(decoding: view), packet.isReply else { return }
        guard let key = session.withLock({ $0 }), packet.sessionID == key.sessionID, ClockSyncPacket.isAuthentic(view, key: key) else {
            forged.add(1, ordering: .relaxed)
            return
        }
        received.add(1, ordering: .relaxed)
        let sample = ClockSample(clientSend: packet.clientSend, serverReceive: packet.serverReceive,
                                 serverSend: packet.serverSend, clientReceive: arrival)
        let (accepted, mapping) = estimator.withLock { e -> (Bool, ClockMapping?) in
            let accepted = e.add(sample)
            return (accepted, e.mapping)
        }
        // Only an exchange the estimator took (its stamps in range and consistent) says how
        // long the house held it: a forged or garbled reply neither slows the room nor
        // overflows the subtraction.
        if accepted && sample.serverSend - sample.serverReceive > configuration.busyHouseHoldNanoseconds {
            houseBusyUntil.store(arrival + configuration.busyBackoffNanoseconds, ordering: .relaxed)
        }
        if accepted && configuration.aimsAtTimerGrids { aim.withLock { $0.observe(sequence: packet.sequence, sample: sample) } }
        if let mapping { onUpdate(mapping) }
    }

    /// Behind a `DatagramArrivalStamper`: the kernel's arrival stamp, not when this loop got to
    /// the datagram. The loop also carries the audio stream, and a reply waiting behind a chunk
    /// would look late on its way back only.
    private final class ReplyHandler: ChannelInboundHandler, Sendable {
        typealias InboundIn = StampedDatagram
        let client: ClockSyncClient
        init(client: ClockSyncClient) { self.client = client }

        func channelRead(context: ChannelHandlerContext, data: NIOAny) {
            let datagram = Self.unwrapInboundIn(data)
            client.receive(datagram.envelope.data, at: datagram.arrival)
        }
    }
}
