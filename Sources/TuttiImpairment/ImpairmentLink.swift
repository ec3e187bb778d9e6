import NIOCore
import Synchronization
import TuttiCore

/// Which way bytes travel through the proxy.
enum ImpairmentDirection: Sendable {
    /// From a client (speaker) to the upstream server.
    case toUpstream
    /// From the upstream server back to a client.
    case toClient
}

/// The state every relay of one `ImpairmentProxy` shares, from any event loop: the current
/// impairment, the outage windows, and the counters. Each flow draws its randomness from its own
/// `SplitMix64`, derived from the seed and the flow's number, so a flow's jitter and loss do not
/// depend on how other flows interleave with it.
final class ImpairmentLink: Sendable {
    private struct Settings {
        var impairment: ImpairmentProxy.Impairment
        /// Half-open windows [start, end) on the `NIODeadline` (monotonic) clock.
        var outages: [(start: NIODeadline, end: NIODeadline)] = []
        /// When each direction's shared queue (`NetworkModel.sharedQueueBytes`) will have sent
        /// the stream bytes put in it so far: to the upstream, and to the clients.
        var queueToUpstreamBusyUntil = NIODeadline.uptimeNanoseconds(0)
        var queueToClientBusyUntil = NIODeadline.uptimeNanoseconds(0)
    }

    private let settings: Mutex<Settings>
    let toUpstream = DirectionCounters()
    let toClient = DirectionCounters()
    let tcpConnections = Atomic<Int>(0)
    let tcpUpstreamFailures = Atomic<Int>(0)
    let udpSessions = Atomic<Int>(0)
    private let tcpFlows = Atomic<UInt64>(0)
    private let udpFlows = Atomic<UInt64>(0)

    /// When the proxy started: a network model's floor steps count from here.
    let origin = NIODeadline.now()

    /// What the stream toward the clients meets on the way besides delay: a byte flipped (a
    /// forged or corrupted segment that got past TCP's checksum), and an eavesdropper's copy.
    private struct Tap {
        /// Flip the byte at this offset of everything sent toward the clients, once.
        var flipAt: Int?
        var seen = 0
        var captureLimit = 0
        var captured: [UInt8] = []
    }
    private let tap = Mutex(Tap())

    func setTap(flipAt: Int?, captureLimit: Int) {
        tap.withLock { $0 = Tap(flipAt: flipAt, captureLimit: captureLimit) }
    }

    var capturedToClient: [UInt8] { tap.withLock { $0.captured } }
    var flipped: Bool { tap.withLock { tap in tap.flipAt.map { tap.seen > $0 } ?? false } }

    /// Applies the tap to a chunk read from the upstream, before it is relayed.
    func tapToClient(_ buffer: inout ByteBuffer) {
        tap.withLock { tap in
            let count = buffer.readableBytes
            if tap.captured.count < tap.captureLimit {
                tap.captured += buffer.readableBytesView.prefix(tap.captureLimit - tap.captured.count)
            }
            if let at = tap.flipAt, at >= tap.seen, at < tap.seen + count {
                let index = buffer.readerIndex + (at - tap.seen)
                buffer.setInteger(buffer.getInteger(at: index, as: UInt8.self)! ^ 0x10, at: index)
            }
            tap.seen += count
        }
    }

    init(impairment: ImpairmentProxy.Impairment) {
        settings = Mutex(Settings(impairment: impairment))
    }

    /// One chunk's or datagram's delay in `direction`, sent at `now`.
    func sampleDelay(_ direction: ImpairmentDirection, at now: NIODeadline, random: inout SplitMix64) -> Int64 {
        let impairment = impairment
        guard let network = impairment.network else { return impairment.sampleDelay(using: &random) }
        let model = direction == .toClient ? network.toRoom : network.toHouse
        let base = impairment.delayNanoseconds > 0 ? impairment.delayNanoseconds : model.baseDelayNanoseconds
        var withBase = model
        withBase.baseDelayNanoseconds = base
        return withBase.delay(elapsed: (now - origin).nanoseconds, phase: 0, random: &random)
    }

    /// When a TCP chunk of `bytes` read at `now`, due at `due` by its path's delay, arrives:
    /// with a shared queue, it first waits for the bytes ahead of it and its own to be sent,
    /// then travels the path (as a datagram waits in the queue, then travels).
    func streamArrival(_ direction: ImpairmentDirection, bytes: Int, at now: NIODeadline, due: NIODeadline) -> NIODeadline {
        settings.withLock { s in
            guard let network = s.impairment.network, network.sharedQueueBytes > 0 else { return due }
            let serialization = TimeAmount.nanoseconds(Int64(Double(bytes) / network.queueBytesPerSecond * 1e9))
            switch direction {
            case .toUpstream:
                s.queueToUpstreamBusyUntil = max(s.queueToUpstreamBusyUntil, now) + serialization
                return s.queueToUpstreamBusyUntil + (due - now)
            case .toClient:
                s.queueToClientBusyUntil = max(s.queueToClientBusyUntil, now) + serialization
                return s.queueToClientBusyUntil + (due - now)
            }
        }
    }

    /// How long a datagram arriving at `now` waits in the shared queue behind the stream's
    /// bytes: until they are sent, at most the queue's size at its rate (a full queue drops
    /// what comes on, and TCP backs off).
    func datagramQueueWait(_ direction: ImpairmentDirection, at now: NIODeadline) -> Int64 {
        settings.withLock { s in
            guard let network = s.impairment.network, network.sharedQueueBytes > 0 else { return 0 }
            let busy = direction == .toUpstream ? s.queueToUpstreamBusyUntil : s.queueToClientBusyUntil
            guard busy > now else { return 0 }
            return min((busy - now).nanoseconds, Int64(Double(network.sharedQueueBytes) / network.queueBytesPerSecond * 1e9))
        }
    }

    var impairment: ImpairmentProxy.Impairment {
        get {
            // Copied out through a variable, not returned from the closure: returned, the last
            // bytes of the impairment (224 of them, its network model's last field) came out as
            // garbage in debug builds of Swift 6.3 (a queue rate of 1e6 read as -2e77 right after
            // it was stored; read inside the lock, it was right).
            var copy = ImpairmentProxy.Impairment.none
            settings.withLock { copy = $0.impairment }
            return copy
        }
        set { settings.withLock { $0.impairment = newValue } }
    }

    func counters(_ direction: ImpairmentDirection) -> DirectionCounters {
        switch direction {
        case .toUpstream: toUpstream
        case .toClient: toClient
        }
    }

    // MARK: Outages

    func addOutage(start: NIODeadline, end: NIODeadline) {
        guard end > start else { return }
        let now = NIODeadline.now()
        settings.withLock { s in
            s.outages.removeAll { $0.end <= now }
            s.outages.append((start, end))
        }
    }

    /// If `time` lies in an outage, when the link comes back (following overlapping or adjoining
    /// windows); nil when the link is up at `time`.
    func outageEnd(at time: NIODeadline) -> NIODeadline? {
        settings.withLock { s in
            guard !s.outages.isEmpty else { return nil }
            var end: NIODeadline?
            var probe = time
            var extended = true
            while extended {
                extended = false
                for window in s.outages where window.start <= probe && probe < window.end {
                    end = window.end
                    probe = window.end
                    extended = true
                }
            }
            return end
        }
    }

    // MARK: Flows

    /// Two independent generators (one per direction) for the next TCP connection or UDP session.
    func makeFlowRandom(udp: Bool) -> (toUpstream: SplitMix64, toClient: SplitMix64) {
        let index = udp ? udpFlows.wrappingAdd(1, ordering: .relaxed).oldValue : tcpFlows.wrappingAdd(1, ordering: .relaxed).oldValue
        let seed = impairment.seed
        let base = SplitMix64.mix(seed ^ SplitMix64.mix(index << 1 | (udp ? 1 : 0)))
        return (SplitMix64(seed: base), SplitMix64(seed: SplitMix64.mix(base ^ 0xD1B5_4A32_D192_ED03)))
    }

    /// Decides one datagram's fate at its arrival: nil when it is dropped (and counted), else
    /// its delay in nanoseconds.
    func admitDatagram(_ direction: ImpairmentDirection, at now: NIODeadline, random: inout SplitMix64) -> Int64? {
        let counters = counters(direction)
        if outageEnd(at: now) != nil {
            counters.udpDroppedByOutage.add(1, ordering: .relaxed)
            return nil
        }
        if impairment.losesDatagram(using: &random) {
            counters.udpLost.add(1, ordering: .relaxed)
            return nil
        }
        return sampleDelay(direction, at: now, random: &random) + datagramQueueWait(direction, at: now)
    }

    func statistics() -> ImpairmentProxy.Statistics {
        ImpairmentProxy.Statistics(
            toUpstream: toUpstream.snapshot(), toClients: toClient.snapshot(),
            tcpConnections: tcpConnections.load(ordering: .relaxed),
            tcpUpstreamFailures: tcpUpstreamFailures.load(ordering: .relaxed),
            udpSessions: udpSessions.load(ordering: .relaxed))
    }
}

/// Counters of one direction, updated from any event loop.
final class DirectionCounters: Sendable {
    let udpForwarded = Atomic<Int>(0)
    let udpLost = Atomic<Int>(0)
    let udpDroppedByOutage = Atomic<Int>(0)
    let tcpBytes = Atomic<Int>(0)

    func snapshot() -> ImpairmentProxy.Statistics.Direction {
        ImpairmentProxy.Statistics.Direction(
            udpDatagramsForwarded: udpForwarded.load(ordering: .relaxed),
            udpDatagramsLost: udpLost.load(ordering: .relaxed),
            udpDatagramsDroppedByOutage: udpDroppedByOutage.load(ordering: .relaxed),
            tcpBytesForwarded: tcpBytes.load(ordering: .relaxed))
    }
}

extension ImpairmentProxy.Impairment {
    /// One-way delay of one datagram or TCP chunk: `delay` plus a uniform sample in ±`jitter`,
    /// never below zero.
    func sampleDelay(using random: inout SplitMix64) -> Int64 {
        guard jitterNanoseconds > 0 else { return delayNanoseconds }
        return max(0, delayNanoseconds + Int64.random(in: -jitterNanoseconds...jitterNanoseconds, using: &random))
    }

    /// Draws only when loss is configured, so a lossless run's jitter sequence does not change.
    func losesDatagram(using random: inout SplitMix64) -> Bool {
        guard udpLossProbability > 0 else { return false }
        return random.nextUnitInterval() < udpLossProbability
    }
}
