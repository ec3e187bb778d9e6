import NIOCore
import NIOEmbedded
import TuttiCore

/// The network queue one direction of a room's path shares between its stream and its
/// datagrams (`NetworkModel.sharedQueueBytes`): when the stream's bytes written so far will
/// have left it.
final class LinkQueue {
    var busyUntil: Int64 = .min
}

/// One direction of one simulated connection: when each message sent at `now` arrives.
/// TCP keeps order and serializes bytes at the link's bandwidth; datagrams may be lost, and may
/// wait behind the stream in a shared queue. Draws come from the link's own `SplitMix64`, so a
/// run is a function of its seed.
struct LinkDirection {
    let model: LinkModel
    let isStream: Bool
    let toRoom: Bool
    let queue: LinkQueue
    var random: SplitMix64
    /// Where this direction's beacon and timer grids lie.
    private let phase: Int64
    /// When the previous stream message finished arriving: TCP never reorders.
    private var lastArrival: Int64 = .min

    init(model: LinkModel, isStream: Bool, toRoom: Bool, queue: LinkQueue, seed: UInt64) {
        self.model = model
        self.isStream = isStream
        self.toRoom = toRoom
        self.queue = queue
        random = SplitMix64(seed: seed)
        // From the seed without a draw: links without a network model draw as they always did.
        phase = Int64(SplitMix64.mix(seed ^ 0x6A09_E667_F3BC_C909) % 1_000_000_000)
    }

    /// One message's delay on the path, sent at `now`.
    private mutating func pathDelay(sentAt now: Int64) -> Int64 {
        guard let network = model.network else {
            return model.baseDelayNanoseconds + (model.jitterNanoseconds > 0 ? Int64(random.next() % UInt64(model.jitterNanoseconds)) : 0)
        }
        let direction = toRoom ? network.toRoom : network.toHouse
        return direction.delay(elapsed: now - SimulatedHouse.startTime, phase: phase, random: &random)
    }

    /// Arrival time of a message of `bytes` sent at `now`; nil when it is lost.
    mutating func arrival(sentAt now: Int64, bytes: Int) -> Int64? {
        let delay = pathDelay(sentAt: now)
        var departure = now
        if let outage = model.outage(at: now) {
            guard isStream else { return nil }
            departure = outage.upperBound
        }
        if !isStream {
            if model.datagramLoss > 0 && Double(random.next() >> 11) / Double(1 << 53) < model.datagramLoss { return nil }
            var wait: Int64 = 0
            if let shared = model.network?.sharedQueueBytes, shared > 0, queue.busyUntil > departure {
                wait = min(queue.busyUntil - departure, Int64(Double(shared) / model.bytesPerSecond * 1e9))
            }
            return departure + wait + delay
        }
        let serialization = Int64(Double(bytes) / model.bytesPerSecond * 1e9)
        queue.busyUntil = max(queue.busyUntil, departure) + serialization
        let arrival = max(lastArrival, departure + delay) + serialization
        lastArrival = arrival
        return arrival
    }
}

/// The far end of a simulated link, placed first in a channel's pipeline: it takes what the
/// channel writes (bytes, or addressed datagrams) and delivers it to the peer channel at its
/// arrival time, as a task on the simulation's event loop.
///
/// A stream's messages arrive in order, so they wait in a queue with one task scheduled for the
/// head: the loop's task heap stays small while the house sends minutes of audio ahead. A
/// stream's sender sees back-pressure as from a real socket: past `sendWindowBytes` not yet
/// delivered its channel turns unwritable (firing `channelWritabilityChanged`), and writable
/// again once the link has drained it to a quarter.
final class LinkTap<Message>: ChannelOutboundHandler {
    typealias OutboundIn = Message
    private var direction: LinkDirection
    private let size: (Message) -> Int
    private let deliver: (Message) -> Void
    private let loop: EmbeddedEventLoop
    /// Stream messages in flight, by arrival time (nondecreasing), and their bytes.
    private var inFlight = CircularBuffer<(arrival: Int64, message: Message, bytes: Int)>()
    private var inFlightBytes = 0
    /// Whether a task is scheduled to deliver the head of `inFlight`.
    private var headScheduled = false
    /// The sending channel, whose writability the window drives.
    private weak var sender: EmbeddedChannel?

    init(direction: LinkDirection, loop: EmbeddedEventLoop, size: @escaping (Message) -> Int, deliver: @escaping (Message) -> Void) {
        self.direction = direction
        self.loop = loop
        self.size = size
        self.deliver = deliver
    }

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        let message = unwrapOutboundIn(data)
        promise?.succeed()
        let now = Int64(loop.now.uptimeNanoseconds)
        let bytes = size(message)
        guard let arrival = direction.arrival(sentAt: now, bytes: bytes) else { return }
        let due = max(arrival, now)
        guard direction.isStream else {
            let deliver = self.deliver
            loop.scheduleTask(deadline: .uptimeNanoseconds(UInt64(due))) { deliver(message) }
            return
        }
        inFlight.append((due, message, bytes))
        inFlightBytes += bytes
        scheduleHead()
        if inFlightBytes >= direction.model.sendWindowBytes, let channel = context.channel as? EmbeddedChannel, channel.isWritable {
            sender = channel
            setWritable(false, channel)
        }
    }

    private func setWritable(_ writable: Bool, _ channel: EmbeddedChannel) {
        channel.isWritable = writable
        channel.pipeline.syncOperations.fireChannelWritabilityChanged()
    }

    private func scheduleHead() {
        guard !headScheduled, let head = inFlight.first else { return }
        headScheduled = true
        loop.scheduleTask(deadline: .uptimeNanoseconds(UInt64(head.arrival))) { [self] in
            headScheduled = false
            let now = Int64(loop.now.uptimeNanoseconds)
            while let next = inFlight.first, next.arrival <= now {
                inFlight.removeFirst()
                inFlightBytes -= next.bytes
                deliver(next.message)
            }
            if let sender, !sender.isWritable, inFlightBytes <= direction.model.sendWindowBytes / 4 {
                setWritable(true, sender)
            }
            scheduleHead()
        }
    }

    func flush(context: ChannelHandlerContext) {}
}

/// Joins two embedded channels on one loop into a simulated connection, each direction with
/// its own seeded draws. `isStream` chooses TCP semantics (bytes, in order) or datagrams.
enum SimulatedLink {
    /// `a` is the room's end, `b` the house's; `queues` are the path's shared network queues,
    /// to the house and to the room.
    static func join(_ a: EmbeddedChannel, _ b: EmbeddedChannel, model: LinkModel, seed: UInt64, isStream: Bool, loop: EmbeddedEventLoop,
                     queues: (toHouse: LinkQueue, toRoom: LinkQueue)) throws {
        if isStream {
            try a.pipeline.syncOperations.addHandler(
                LinkTap<ByteBuffer>(direction: LinkDirection(model: model, isStream: true, toRoom: false, queue: queues.toHouse, seed: seed), loop: loop,
                                    size: { $0.readableBytes }, deliver: { [weak b] in _ = try? b?.writeInbound($0) }), position: .first)
            try b.pipeline.syncOperations.addHandler(
                LinkTap<ByteBuffer>(direction: LinkDirection(model: model, isStream: true, toRoom: true, queue: queues.toRoom, seed: seed ^ 0x5851_F42D_4C95_7F2D),
                                    loop: loop, size: { $0.readableBytes }, deliver: { [weak a] in _ = try? a?.writeInbound($0) }), position: .first)
        } else {
            // Each side sees the other at a fixed address; replies go back the same way.
            let addressOfA = try SocketAddress(ipAddress: "10.0.0.2", port: 40000)
            let addressOfB = try SocketAddress(ipAddress: "10.0.0.1", port: 4953)
            typealias Datagram = AddressedEnvelope<ByteBuffer>
            try a.pipeline.syncOperations.addHandler(
                LinkTap<Datagram>(direction: LinkDirection(model: model, isStream: false, toRoom: false, queue: queues.toHouse, seed: seed ^ 0x1405_7B7E_F767_814F),
                                  loop: loop, size: { $0.data.readableBytes },
                                  deliver: { [weak b] in _ = try? b?.writeInbound(Datagram(remoteAddress: addressOfA, data: $0.data)) }), position: .first)
            try b.pipeline.syncOperations.addHandler(
                LinkTap<Datagram>(direction: LinkDirection(model: model, isStream: false, toRoom: true, queue: queues.toRoom, seed: seed ^ 0x2545_F491_4F6C_DD1D),
                                  loop: loop, size: { $0.data.readableBytes },
                                  deliver: { [weak a] in _ = try? a?.writeInbound(Datagram(remoteAddress: addressOfB, data: $0.data)) }), position: .first)
        }
    }
}
