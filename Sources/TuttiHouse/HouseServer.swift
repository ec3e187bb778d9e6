import NIOCore
import NIOPosix
import Synchronization
import TuttiCore
import TuttiProtocol
import TuttiEngine

/// The house on the network: TCP (audio and control) and UDP (clock sync) on one port number.
/// Runs everything on one event loop, the house's, but clock sync, which has a thread of its
/// own: a request waiting behind the house's work (pumping a deep buffer to a room that just
/// joined takes tens of milliseconds) would be stamped late on its way in only, an asymmetry
/// that no estimator can tell from clock offset (it put every room 17-50 ms off for a moment
/// after a start on a loaded machine, measured). A malformed message closes only the
/// connection that sent it, with one line in the log naming the peer and the reason.
public final class HouseServer: Sendable {
    public let house: House
    private let group: MultiThreadedEventLoopGroup
    /// Clock sync's own loop: it only stamps and answers datagrams.
    private let clockGroup: MultiThreadedEventLoopGroup
    private let host: String
    private let port: Int
    private let channels = Mutex<[any Channel]>([])

    public init(clock: any HostClock, host: String, port: Int, configuration: House.Configuration,
                log: @escaping @Sendable (String) -> Void) {
        group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        clockGroup = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        self.host = host
        self.port = port
        house = House(configuration: configuration, loop: group.next(), clock: clock, log: log)
    }

    /// Binds TCP and UDP; returns the port (the same number for both).
    public func start() async throws -> Int {
        let house = self.house
        // Before any room can connect: a room that played on while the house was down resumes
        // the stream it holds.
        try await house.loop.submit { house.resumeStoredStreams() }.get()
        let tcp = try await ServerBootstrap(group: group)
            .serverChannelOption(.backlog, value: 64)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .childChannelOption(.socketOption(.tcp_nodelay), value: 1)
            .childChannelOption(.writeBufferWaterMark, value: .init(low: 256 << 10, high: 1 << 20))
            .childChannelInitializer { channel in
                channel.eventLoop.makeCompletedFuture { try house.serve(connection: channel) }
            }
            .bind(host: host, port: port).get()
        let boundPort = tcp.localAddress?.port ?? port
        let clock = house.clock
        let udp = try await DatagramBootstrap(group: clockGroup)
            .channelOption(.socketOption(.so_reuseaddr), value: 1)
            .channelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHandlers([DatagramArrivalStamper(clock: clock), ClockSyncResponder(clock: clock)])
                }
            }
            .bind(host: host, port: boundPort).get()
        channels.withLock { $0 = [tcp, udp] }
        return boundPort
    }

    public func stop() async {
        let open = channels.withLock { $0 }
        for channel in open { try? await channel.close() }
        try? await house.loop.submit { self.house.stop() }.get()
        try? await group.shutdownGracefully()
        try? await clockGroup.shutdownGracefully()
    }
}

extension House {
    /// A request as it arrives on the wire; `reply` gets the JSON to send back (called once, on
    /// the loop). On the loop.
    func control(json: String, reply: @escaping (_ ok: Bool, _ json: String) -> Void) {
        let request: ControlRequest
        do { request = try ControlJSON.decodeRequest(json) } catch {
            return reply(false, ControlJSON.encode(error))
        }
        control(request) { result in
            switch result {
            case .success(let answer): reply(true, ControlJSON.encode(answer))
            case .failure(let refusal): reply(false, ControlJSON.encode(refusal))
            }
        }
    }

    /// Serves one connection (a speaker or a controller) on `channel`, made by the server's
    /// listener or by a simulated link: adds the codec and the house's connection handler.
    /// Call on the channel's event loop, before it is active.
    public func serve(connection channel: any Channel) throws {
        try channel.pipeline.syncOperations.addHandlers([
            ByteToMessageHandler(WireMessageDecoder()),
            FramedChunkWriter(),
            MessageToByteHandler(WireMessageEncoder()),
            HouseConnectionHandler(house: self),
        ])
    }
}

/// The house end of one TCP connection: a speaker or a controller.
///
/// A controller's welcome carries a fresh challenge; the house takes its control requests only
/// after an `authenticate` whose proof shows it holds the controller token
/// (`ControllerToken.accepts(proof:for:)`). A wrong proof, or a request before any, ends the
/// connection with a goodbye that says where the token is kept.
final class HouseConnectionHandler: ChannelInboundHandler {
    typealias InboundIn = WireMessage
    typealias OutboundOut = WireMessage
    private let house: House
    private var clientID: UInt32?
    private var role: WireMessage.Hello.Role?
    /// A controller's challenge until it has answered it; nil after.
    private var challenge: [UInt8]?

    init(house: House) { self.house = house }

    /// A peer that has not said hello within this long is closed: a thousand idle or
    /// slow-dripping connections would otherwise hold the house's descriptors forever. A
    /// controller must also have proved its token by then.
    static let helloTimeoutNanoseconds: Int64 = 10_000_000_000

    func channelActive(context: ChannelHandlerContext) {
        let bound = NIOLoopBound((self, context), eventLoop: context.eventLoop)
        context.eventLoop.scheduleTask(in: .nanoseconds(Self.helloTimeoutNanoseconds)) {
            let (handler, context) = bound.value
            guard context.channel.isActive else { return }
            if handler.role == nil { handler.reject(context, "no hello within \(Self.helloTimeoutNanoseconds / 1_000_000_000) s") }
            else if handler.challenge != nil { handler.reject(context, "no controller token proved within \(Self.helloTimeoutNanoseconds / 1_000_000_000) s") }
        }
        context.fireChannelActive()
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let message = Self.unwrapInboundIn(data)
        guard let role else {
            guard case .hello(let hello) = message else {
                reject(context, "expected hello, got \(message.kindName)")
                return
            }
            guard hello.protocolVersion == WireProtocol.version else {
                reject(context, "protocol version \(hello.protocolVersion) not supported (this server speaks \(WireProtocol.version))")
                return
            }
            if hello.role == .speaker && !hello.codecs.contains(house.configuration.codec.wireName) {
                reject(context, "speaker \(hello.name) does not decode \(house.configuration.codec.wireName)")
                return
            }
            self.role = hello.role
            let id = house.core.value.connect(channel: context.channel, hello: hello)
            clientID = id
            var welcome = WireMessage.Welcome(serverName: house.configuration.name, clientID: id)
            if hello.role == .controller {
                challenge = ControllerToken.challenge()
                welcome.challenge = challenge!
            }
            context.writeAndFlush(Self.wrapOutboundOut(.welcome(welcome)), promise: nil)
            if hello.role == .speaker { house.core.value.startSending(toConnection: id) }
            return
        }
        switch (role, message) {
        case (.speaker, .speakerStatus(let status)):
            house.core.value.received(status: status, fromConnection: clientID!)
        case (.controller, .authenticate(let proof)):
            guard let challenge else { return reject(context, "authenticated twice") }
            guard house.configuration.controllerToken.accepts(proof: proof, for: challenge) else {
                return reject(context, "the controller token does not match this house's" + tokenHint)
            }
            self.challenge = nil
        case (.controller, .controlRequest(let request)):
            guard challenge == nil else { return reject(context, "a control request before the controller token was proved" + tokenHint) }
            house.control(json: request.json) { ok, json in
                context.writeAndFlush(Self.wrapOutboundOut(.controlResponse(.init(requestID: request.requestID, ok: ok, json: json))), promise: nil)
            }
        case (_, .goodbye):
            context.close(promise: nil)
        default:
            reject(context, "unexpected \(message.kindName) from a \(role)")
        }
    }

    /// Where a controller finds the token, for the refusal.
    private var tokenHint: String {
        guard let path = house.configuration.controllerTokenPath else { return "" }
        return " (on the house's machine it is in \(path); give it to tutti ctl with --token-file FILE or TUTTI_TOKEN)"
    }

    func channelWritabilityChanged(context: ChannelHandlerContext) {
        if context.channel.isWritable, role == .speaker, let id = clientID { house.core.value.writable(connection: id) }
        context.fireChannelWritabilityChanged()
    }

    func channelInactive(context: ChannelHandlerContext) {
        if role == .speaker, let id = clientID { house.core.value.disconnect(connectionID: id) }
        context.fireChannelInactive()
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        reject(context, "\(error)")
    }

    private func reject(_ context: ChannelHandlerContext, _ reason: String) {
        house.core.value.logRejection("\(context.channel.remoteAddress.map { "\($0)" } ?? "peer"): \(reason); connection closed")
        context.writeAndFlush(Self.wrapOutboundOut(.goodbye(reason: reason)), promise: nil)
        context.close(promise: nil)
    }
}
