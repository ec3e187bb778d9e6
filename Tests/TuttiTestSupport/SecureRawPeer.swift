import NIOCore
import NIOPosix
import Synchronization
import TuttiProtocol

/// A client of a house's wire port that runs the real secure channel (`SecureChannelHandler`)
/// and then sends whatever bytes a test gives it, sealed: raw frames, malformed ones, a
/// controller's pipelined requests. It records the plain bytes the house sends back, and
/// `sendUnsealed` writes past the channel, as a forger on the wire would.
public final class SecureRawPeer: ChannelInboundHandler, @unchecked Sendable {
    public typealias InboundIn = ByteBuffer
    private let received = Mutex<[UInt8]>([])
    private let sessionBox = Mutex<SecureHandshake.Session?>(nil)
    /// Completes once the secure channel is open.
    public let opened: EventLoopPromise<Void>
    /// Completes when the house closes the connection (or after 30 s, failing: a guard).
    public let closed: EventLoopPromise<Void>
    private let settled = Mutex((opened: false, closed: false))
    private let head = RawHead()
    public private(set) var channel: (any Channel)!

    private init(loop: any EventLoop) {
        opened = loop.makePromise()
        closed = loop.makePromise()
        loop.scheduleTask(in: .seconds(30)) { [self] in
            settleOpened(.failure(TestFailure("the secure channel did not open within 30 s")))
            settleClosed(.failure(TestFailure("the house did not close the connection within 30 s")))
        }
    }

    /// Connects as a `role` (a speaker with `identity`) and waits for the channel to open.
    public static func connect(port: Int, role: WireMessage.Hello.Role, identity: IdentityKey? = nil,
                               group: any EventLoopGroup = MultiThreadedEventLoopGroup.singleton) async throws -> SecureRawPeer {
        let peer = SecureRawPeer(loop: group.next())
        let head = peer.head
        peer.channel = try await ClientBootstrap(group: group)
            .channelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHandlers([
                        head, SecureChannelHandler(side: .client(role: role, identity: identity, acceptHouse: { _ in nil })), peer,
                    ])
                }
            }
            .connect(host: "127.0.0.1", port: port).get()
        try await peer.opened.futureResult.get()
        return peer
    }

    /// The secure channel's session (its binding, for a controller's proof).
    public var session: SecureHandshake.Session { sessionBox.withLock { $0! } }

    /// The plain bytes received so far.
    public var bytes: [UInt8] { received.withLock { $0 } }

    /// The messages received so far, and a goodbye's reason as `goodbye: REASON`.
    public func messages() throws -> [String] {
        var buffer = ByteBuffer(bytes: bytes)
        var kinds: [String] = []
        while let message = try WireMessage.decode(from: &buffer) {
            if case .goodbye(let reason) = message { kinds.append("goodbye: " + reason) } else { kinds.append(message.kindName) }
        }
        return kinds
    }

    /// Sends `frames` sealed, in one record.
    public func send(_ frames: ByteBuffer) async throws {
        try await channel.writeAndFlush(frames)
    }

    /// Writes `bytes` to the socket as they are, not sealed.
    public func sendUnsealed(_ bytes: ByteBuffer) async throws {
        let head = self.head
        try await channel.eventLoop.flatSubmit { head.write(bytes) }.get()
    }

    public func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if let session = event as? SecureHandshake.Session { sessionBox.withLock { $0 = session } }
    }

    public func channelActive(context: ChannelHandlerContext) { settleOpened(.success(())) }

    public func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let buffer = Self.unwrapInboundIn(data)
        received.withLock { $0 += buffer.readableBytesView }
    }

    public func channelInactive(context: ChannelHandlerContext) {
        settleOpened(.failure(TestFailure("the connection closed before the secure channel opened")))
        settleClosed(.success(()))
    }

    public func errorCaught(context: ChannelHandlerContext, error: any Error) {
        context.close(promise: nil)
    }

    private func settleOpened(_ result: Result<Void, any Error>) {
        guard settled.withLock({ state in defer { state.opened = true }; return !state.opened }) else { return }
        opened.completeWith(result)
    }

    private func settleClosed(_ result: Result<Void, any Error>) {
        guard settled.withLock({ state in defer { state.closed = true }; return !state.closed }) else { return }
        closed.completeWith(result)
    }

    /// Next to the socket: writes what it is given unsealed.
    final class RawHead: ChannelOutboundHandler, @unchecked Sendable {
        typealias OutboundIn = ByteBuffer
        typealias OutboundOut = ByteBuffer
        private var context: ChannelHandlerContext?
        func handlerAdded(context: ChannelHandlerContext) { self.context = context }
        func write(_ bytes: ByteBuffer) -> EventLoopFuture<Void> {
            guard let context else { preconditionFailure("RawHead written before it was added") }
            return context.writeAndFlush(wrapOutboundOut(bytes))
        }
    }
}
