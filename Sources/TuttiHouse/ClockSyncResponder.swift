import NIOCore
import Synchronization
import TuttiCore
import TuttiProtocol

/// The server's side of clock sync, behind a `DatagramArrivalStamper`: takes arrival (t2) from
/// the kernel's receive time of the datagram and stamps departure (t3) just before writing it
/// back. It answers only requests of a session it holds (`ClockSyncSessions`: an admitted
/// speaker's connection) that carry the session's tag, and tags its replies, so only the
/// household's speakers are answered and a forged reply cannot pass for one. Bad packets are
/// ignored.
///
/// Each reply is held a random 0 ..< `replyDitherNanoseconds` before it is stamped and sent.
/// A path that delivers on a timer grid (a relay with coarse timers, Wi-Fi beacons) would
/// otherwise see every reply leave at the same phase of its grid, just after a request arrived
/// on it: the way back would never show its true floor, a fixed asymmetry of up to a tick that
/// no estimator can see, and that differs from room to room. Dithered, the replies sample the
/// whole grid, and the lower envelope finds the floor. The hold is not in the measurement
/// (t3 is stamped at the send), only in the round trip. It spans 20 ms, a whole number of
/// periods of every grid a kernel's or a router's timers run on (1, 2, 4, 5 and 10 ms), so
/// every phase of each is held for equally often: a 2 ms hold sampled only half of a 4 ms
/// grid, and rooms behind one were up to 0.97 ms off (`tutti-bench sweep --network
/// coarse-timers-4ms`); a 10 ms hold sampled half of a 4 ms grid's phases three times and the
/// other half twice, and the way back's floor showed less often at the one than the other.
/// A speaker's requests come faster than that (every 2–3 ms while its estimate is young), so
/// replies overtake one another; the speaker takes them in the order their requests left
/// (`ClockEstimator.add`). Holding them shorter at the speaker's request was tried: a 2 ms hold
/// sampled half of a 4 ms grid for those seconds, and its rooms ended up 0.9 ms off for good.
/// A room that has found the grid instead names the time to reply (`AimedExchanges`: so that
/// its reply reaches the relay just before a tick), in up to three requests of four; the rest
/// are dithered as above.
public final class ClockSyncResponder: ChannelInboundHandler, Sendable {
    public typealias InboundIn = StampedDatagram
    public typealias OutboundOut = AddressedEnvelope<ByteBuffer>
    private let clock: any HostClock
    private let sessions: ClockSyncSessions
    public let replyDitherNanoseconds: Int64
    private let random: Mutex<SplitMix64>

    /// - Parameter seed: draws the dither (a simulated house passes its own, to replay).
    public init(clock: any HostClock, sessions: ClockSyncSessions, replyDitherNanoseconds: Int64 = 20_000_000, seed: UInt64? = nil) {
        self.clock = clock
        self.sessions = sessions
        self.replyDitherNanoseconds = replyDitherNanoseconds
        random = Mutex(SplitMix64(seed: seed ?? UInt64(bitPattern: clock.now()) | 1))
    }

    public func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let datagram = Self.unwrapInboundIn(data)
        let arrival = datagram.arrival, envelope = datagram.envelope
        let bytes = envelope.data.readableBytesView
        guard var packet = try? ClockSyncPacket(decoding: bytes), !packet.isReply,
              let key = sessions.key(for: packet.sessionID), ClockSyncPacket.isAuthentic(bytes, key: key) else { return }
        packet.isReply = true
        packet.serverReceive = arrival
        // A request may name when to reply (its t3 field, `AimedExchanges`): held to then if
        // that is still ahead and no further than `maximumRequestedHold` from its arrival;
        // otherwise the dither.
        let requested = packet.serverSend, now = clock.now()
        var hold = replyDitherNanoseconds > 0 ? Int64(nextRandom() % UInt64(replyDitherNanoseconds)) : 0
        // Compared without a subtraction of the request's value: it is an admitted speaker's,
        // but no less a number off the network.
        if requested != 0, requested > now, arrival <= Int64.max - Self.maximumRequestedHold, requested <= arrival + Self.maximumRequestedHold {
            hold = requested - now
        }
        let channel = context.channel, clock = self.clock, address = envelope.remoteAddress, request = packet
        let send: @Sendable () -> Void = {
            var reply = request
            reply.serverSend = clock.now()
            channel.writeAndFlush(AddressedEnvelope(remoteAddress: address, data: channel.allocator.buffer(bytes: reply.encoded(key: key))), promise: nil)
        }
        if hold == 0 { send() } else { context.eventLoop.scheduleTask(in: .nanoseconds(hold), send) }
    }

    /// The longest a room may ask the house to hold its reply, from the request's arrival: a
    /// tick of the longest grid looked for (10 ms) for the request's own, another for the
    /// reply's, and a margin; the same order as the dither.
    public static let maximumRequestedHold: Int64 = 25_000_000

    /// Enough for a dither, and replayable from a seed.
    private func nextRandom() -> UInt64 {
        random.withLock { $0.next() }
    }
}
