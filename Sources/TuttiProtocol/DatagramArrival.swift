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
/// minus how long ago, by CLOCK_REALTIME, it was taken (both advance at the same rate; a step
/// of the wall clock in between makes the age implausible, and the stamp is not used). A
/// channel without a socket (a simulated link) has no kernel stamp: its datagrams are stamped
/// `now`.
public final class DatagramArrivalStamper: ChannelInboundHandler, Sendable {
    public typealias InboundIn = AddressedEnvelope<ByteBuffer>
    public typealias InboundOut = StampedDatagram

    /// The longest a datagram may have waited for its reader and still be stamped by the
    /// kernel: an age beyond it is a wall-clock step, not a wait.
    static let maximumAgeNanoseconds: Int64 = 1_000_000_000

    private let clock: any HostClock

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
        // The socket's last stamp is this datagram's: NIO hands each one on before it reads the next.
        let age = try? context.pipeline.syncOperations.withUnsafeTransportIfAvailable(of: NIOBSDSocket.Handle.self) { socket -> Int64? in
            var realtime: Int64 = 0, age: Int64 = 0
            return tutti_last_receive_time(socket, &realtime, &age) == 0 ? age : nil
        }
        let now = clock.now()
        var arrival = now
        if let age = age ?? nil, age >= 0, age < Self.maximumAgeNanoseconds { arrival = now - age }
        context.fireChannelRead(Self.wrapInboundOut(StampedDatagram(envelope: Self.unwrapInboundIn(data), arrival: arrival)))
    }

    /// The first request turns the kernel's stamps on for the socket (and fails: no datagram yet).
    private func enableStamps(_ context: ChannelHandlerContext) {
        _ = try? context.pipeline.syncOperations.withUnsafeTransportIfAvailable(of: NIOBSDSocket.Handle.self) { socket in
            var realtime: Int64 = 0, age: Int64 = 0
            _ = tutti_last_receive_time(socket, &realtime, &age)
        }
    }
}
