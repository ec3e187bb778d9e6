import NIOCore
import NIOPosix

/// An AirPlay 2 session's event channel: a TCP port the first SETUP's reply gives, which the
/// sender connects to and encrypts as the RTSP connection (HAP frames, `Events-Salt` keys). A
/// receiver sends RTSP requests there to tell the sender of changes it made (none yet); the
/// sender's own bytes are read and dropped. Only the sender's address is let in, once.
///
/// Confined to the receiver's loop: made, opened and closed there.
final class AirPlayEventChannel {
    private let sender: String
    private let keys: HAPSessionCodec.Keys
    private let eventLoop: any EventLoop
    private let log: @Sendable (String) -> Void
    private var listener: (any Channel)?
    private var connection: (any Channel)?
    private var closed = false

    init(sender: String, keys: HAPSessionCodec.Keys, eventLoop: any EventLoop, log: @escaping @Sendable (String) -> Void) {
        self.sender = sender
        self.keys = keys
        self.eventLoop = eventLoop
        self.log = log
    }

    /// Listens on `host`; gives the port.
    func open(host: String) -> EventLoopFuture<Int> {
        eventLoop.preconditionInEventLoop()
        let bound = NIOLoopBound(self, eventLoop: eventLoop)
        let (sender, keys, log) = (self.sender, self.keys, self.log)
        return ServerBootstrap(group: eventLoop)
            .serverChannelOption(.backlog, value: 1)
            .childChannelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    let events = bound.value
                    guard !events.closed, events.connection == nil, channel.remoteAddress?.ipAddress == sender else {
                        log("AirPlay: \(channel.remoteAddress?.ipAddress ?? "?"): refused on the event channel of \(sender)'s session")
                        channel.close(promise: nil)
                        return
                    }
                    events.connection = channel
                    try channel.pipeline.syncOperations.addHandlers([
                        HAPSessionCodec(keys: keys, onFailure: { log("AirPlay: \(sender): event channel: \($0); closing it") }),
                        Discard(),
                    ])
                }
            }
            .bind(host: host, port: 0)
            .flatMapThrowing { listener in
                let events = bound.value
                // Closed while it was being bound: the session is gone.
                guard !events.closed else {
                    listener.close(promise: nil)
                    throw ChannelError.ioOnClosedChannel
                }
                events.listener = listener
                return listener.localAddress?.port ?? 0
            }
    }

    func close() {
        eventLoop.preconditionInEventLoop()
        closed = true
        listener?.close(promise: nil)
        connection?.close(promise: nil)
        listener = nil
        connection = nil
    }

    /// Reads and drops what the sender writes (its replies to events).
    private final class Discard: ChannelInboundHandler {
        typealias InboundIn = ByteBuffer
        func channelRead(context: ChannelHandlerContext, data: NIOAny) {}
    }
}
