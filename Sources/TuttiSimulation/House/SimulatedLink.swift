import NIOCore
import NIOEmbedded
import TuttiCore

/// One direction of one simulated connection: when each message sent at `now` arrives.
/// TCP keeps order and serializes bytes at the link's bandwidth; datagrams may be lost.
/// Draws come from the link's own `SplitMix64`, so a run is a function of its seed.
struct LinkDirection {
    let model: LinkModel
    let isStream: Bool
    var random: SplitMix64
    /// When the previous stream message finished arriving: TCP never reorders.
    private var lastArrival: Int64 = .min

    init(model: LinkModel, isStream: Bool, seed: UInt64) {
        self.model = model
        self.isStream = isStream
        random = SplitMix64(seed: seed)
    }

    /// Arrival time of a message of `bytes` sent at `now`; nil when it is lost.
    mutating func arrival(sentAt now: Int64, bytes: Int) -> Int64? {
        let jitter = model.jitterNanoseconds > 0 ? Int64(random.next() % UInt64(model.jitterNanoseconds)) : 0
        var departure = now
        if let outage = model.outage(at: now) {
            guard isStream else { return nil }
            departure = outage.upperBound
        }
        if !isStream {
            if model.datagramLoss > 0 && Double(random.next() >> 11) / Double(1 << 53) < model.datagramLoss { return nil }
            return departure + model.baseDelayNanoseconds + jitter
        }
        let serialization = Int64(Double(bytes) / model.bytesPerSecond * 1e9)
        let arrival = max(lastArrival, departure + model.baseDelayNanoseconds + jitter) + serialization
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
    static func join(_ a: EmbeddedChannel, _ b: EmbeddedChannel, model: LinkModel, seed: UInt64, isStream: Bool, loop: EmbeddedEventLoop) throws {
        if isStream {
            try a.pipeline.syncOperations.addHandler(
                LinkTap<ByteBuffer>(direction: LinkDirection(model: model, isStream: true, seed: seed), loop: loop, size: { $0.readableBytes },
                                    deliver: { [weak b] in _ = try? b?.writeInbound($0) }), position: .first)
            try b.pipeline.syncOperations.addHandler(
                LinkTap<ByteBuffer>(direction: LinkDirection(model: model, isStream: true, seed: seed ^ 0x5851_F42D_4C95_7F2D), loop: loop, size: { $0.readableBytes },
                                    deliver: { [weak a] in _ = try? a?.writeInbound($0) }), position: .first)
        } else {
            // Each side sees the other at a fixed address; replies go back the same way.
            let addressOfA = try SocketAddress(ipAddress: "10.0.0.2", port: 40000)
            let addressOfB = try SocketAddress(ipAddress: "10.0.0.1", port: 4953)
            typealias Datagram = AddressedEnvelope<ByteBuffer>
            try a.pipeline.syncOperations.addHandler(
                LinkTap<Datagram>(direction: LinkDirection(model: model, isStream: false, seed: seed ^ 0x1405_7B7E_F767_814F), loop: loop, size: { $0.data.readableBytes },
                                  deliver: { [weak b] in _ = try? b?.writeInbound(Datagram(remoteAddress: addressOfA, data: $0.data)) }), position: .first)
            try b.pipeline.syncOperations.addHandler(
                LinkTap<Datagram>(direction: LinkDirection(model: model, isStream: false, seed: seed ^ 0x2545_F491_4F6C_DD1D), loop: loop, size: { $0.data.readableBytes },
                                  deliver: { [weak a] in _ = try? a?.writeInbound(Datagram(remoteAddress: addressOfB, data: $0.data)) }), position: .first)
        }
    }
}
