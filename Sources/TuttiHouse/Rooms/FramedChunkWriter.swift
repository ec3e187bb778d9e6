import NIOCore

/// The place in a room's pipeline where audio chunks, framed once for every room, join the
/// bytes the wire encoder makes of every other message.
///
/// Sits between the channel's head and `WireMessageEncoder`, passing the encoder's bytes on
/// untouched. The house writes each chunk's wire message, framed once when it was produced
/// (`ServerChunk.wire`), through this handler's context: every room is then sent the same
/// buffer (NIO writes it from its shared storage), where encoding a `WireMessage` per room
/// copied each chunk once for every room (6 % of a house's time filling 64 rooms). Order is
/// kept: the encoder writes through to here at once, so a chunk written after an anchor
/// leaves after it.
///
/// Thread-safety: the channel's event loop only.
final class FramedChunkWriter: ChannelOutboundHandler, RemovableChannelHandler {
    typealias OutboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer
    private var context: ChannelHandlerContext?

    func handlerAdded(context: ChannelHandlerContext) { self.context = context }
    func handlerRemoved(context: ChannelHandlerContext) { self.context = nil }

    /// Writes an already framed wire message (not flushed).
    func write(framed: ByteBuffer) {
        guard let context else { return }
        context.eventLoop.preconditionInEventLoop()
        context.write(wrapOutboundOut(framed), promise: nil)
    }
}
