import NIOCore
import TuttiCore
import TuttiProtocol

/// The server's side of clock sync: stamps arrival (t2) as early as the event loop sees the
/// datagram and departure (t3) just before writing it back. Bad packets are ignored.
public final class ClockSyncResponder: ChannelInboundHandler, Sendable {
    public typealias InboundIn = AddressedEnvelope<ByteBuffer>
    public typealias OutboundOut = AddressedEnvelope<ByteBuffer>
    private let clock: any HostClock

    public init(clock: any HostClock) { self.clock = clock }

    public func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let arrival = clock.now()
        let envelope = Self.unwrapInboundIn(data)
        guard var packet = try? ClockSyncPacket(decoding: envelope.data.readableBytesView), !packet.isReply else { return }
        packet.isReply = true
        packet.serverReceive = arrival
        packet.serverSend = clock.now()
        let reply = AddressedEnvelope(remoteAddress: envelope.remoteAddress, data: context.channel.allocator.buffer(bytes: packet.encoded()))
        context.writeAndFlush(Self.wrapOutboundOut(reply), promise: nil)
    }
}
