import CReceiveTime
import NIOCore
import TuttiCore

/// A datagram and when it arrived, by the kernel's stamp (`DatagramArrivalStamper`).
public struct StampedDatagram: Sendable {
    public var envelope: AddressedEnvelope<ByteBuffer>
    /// The arrival time, on the stamper's clock.
    public var arrival: Int64

    public init(envelope: AddressedEnvelope<ByteBuffer>, arrival: Int64) {
        self.envelope = envelope
        self.arrival = arrival
    }
}

/// Stamps each datagram its channel reads with when it arrived, by the kernel's stamp, and
/// passes it on as a `StampedDatagram`: the first handler of a clock-sync pipeline.
///
/// A clock-sync stamp taken when the handler runs includes however long the thread took to
/// wake and reach it: tens of microseconds on an idle virtual machine, milliseconds on a busy
/// one, and never the same at the house and at the room. That difference is path asymmetry no
/// two-way exchange can see; it moved rooms' clock estimates tens of microseconds apart, and it
/// widens the round trip the clock bound is half of. The kernel stamps each datagram as it
/// arrives (SIOCGSTAMPNS, the stamp chrony and ptp4l's software mode use), so the stamp no
/// longer depends on the reader's scheduling.
///
/// The kernel's stamp is in CLOCK_REALTIME; it is carried to `clock` by its age: `clock.now()`
/// minus how long ago, by CLOCK_REALTIME, it was taken (both advance at the same rate). A stamp
/// that cannot be trusted is not used, and the datagram is stamped `now`, which is only ever
/// late (safe for the clock bound, which a late arrival only widens):
/// - the wall clock stepped since the last datagram (CLOCK_REALTIME − CLOCK_MONOTONIC moved);
/// - the stamp did not change since the last datagram (the kernel stops updating it if some
///   code sets SO_TIMESTAMP on the socket), or it is older than a second or in the future;
/// - the channel has no socket (a simulated link).
///
/// NIO hands on each datagram it reads before it reads the next (one `recvmsg` at a time; vector
/// reads, which would read several, are never set on a clock-sync channel), so the socket's last
/// stamp is this datagram's.
///
/// Thread-safety: a channel handler of one channel, on its loop.
public final class DatagramArrivalStamper: ChannelInboundHandler {
    public typealias InboundIn = AddressedEnvelope<ByteBuffer>
    public typealias InboundOut = StampedDatagram

    /// The longest a datagram may have waited for its reader and still be stamped by the
    /// kernel.
    static let maximumAgeNanoseconds: Int64 = 1_000_000_000
    /// A move of CLOCK_REALTIME against CLOCK_MONOTONIC beyond this is a step of the wall clock
    /// (a slew moves them together).
    static let stepNanoseconds: Int64 = 100_000

    private let clock: any HostClock
    private var lastStamp: Int64?
    private var lastWallOffset: Int64?

    public init(clock: any HostClock) {
        self.clock = clock
    }

    public func handlerAdded(context: ChannelHandlerContext) {
        if context.channel.isActive { enableStamps(context) }
    }

    public func channelActive(context: ChannelHandlerContext) {
        enableStamps(context)
        context.fireChannelActive()
    }

    public func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let reading = try? context.pipeline.syncOperations.withUnsafeTransportIfAvailable(of: NIOBSDSocket.Handle.self) { socket in
            var stamp: Int64 = 0, realtime: Int64 = 0, monotonic: Int64 = 0
            return tutti_last_receive_time(socket, &stamp, &realtime, &monotonic) == 0 ? (stamp, realtime, monotonic) : nil
        }
        let now = clock.now()
        var arrival = now
        if let (stamp, realtime, monotonic) = reading ?? nil {
            let wallOffset = realtime - monotonic
            let stepped = lastWallOffset.map { abs(wallOffset - $0) > Self.stepNanoseconds } ?? false
            let stale = stamp == lastStamp
            let age = realtime - stamp
            if !stepped && !stale && age >= 0 && age < Self.maximumAgeNanoseconds { arrival = now - age }
            lastWallOffset = wallOffset
            lastStamp = stamp
        }
        context.fireChannelRead(Self.wrapInboundOut(StampedDatagram(envelope: Self.unwrapInboundIn(data), arrival: arrival)))
    }

    /// The first request turns the kernel's stamps on for the socket (and fails: no datagram yet).
    private func enableStamps(_ context: ChannelHandlerContext) {
        _ = try? context.pipeline.syncOperations.withUnsafeTransportIfAvailable(of: NIOBSDSocket.Handle.self) { socket in
            var stamp: Int64 = 0, realtime: Int64 = 0, monotonic: Int64 = 0
            _ = tutti_last_receive_time(socket, &stamp, &realtime, &monotonic)
        }
    }
}
