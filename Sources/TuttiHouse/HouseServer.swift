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
    /// The wire port's connections.
    public let budget: ConnectionBudget

    public init(clock: any HostClock, host: String, port: Int, configuration: House.Configuration,
                log: @escaping @Sendable (String) -> Void) {
        group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        clockGroup = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        self.host = host
        self.port = port
        house = House(configuration: configuration, loop: group.next(), clock: clock, log: log)
        budget = ConnectionBudget(limits: configuration.wireConnectionLimits, what: "the house's port", log: log)
    }

    /// Binds TCP and UDP; returns the port (the same number for both).
    public func start() async throws -> Int {
        let house = self.house, budget = self.budget
        // Before any room can connect: a room that played on while the house was down resumes
        // the stream it holds.
        try await house.loop.submit { house.resumeStoredStreams() }.get()
        let tcp = try await ServerBootstrap(group: group)
            // A deep accept queue: in a burst of connections (a flood of strangers, 64 rooms
            // reconnecting after a restart) a full queue drops a newcomer's SYN, which it sends
            // again only a second later (measured: a controller's command took 1.2 s instead of
            // 3 ms among 1500 strangers' connects with a queue of 64). The kernel caps it at
            // net.core.somaxconn (4096 on Debian 12).
            .serverChannelOption(.backlog, value: House.acceptBacklog)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .childChannelOption(.socketOption(.tcp_nodelay), value: 1)
            .childChannelOption(.writeBufferWaterMark, value: .init(low: 256 << 10, high: 1 << 20))
            .childChannelInitializer { channel in
                channel.eventLoop.makeCompletedFuture { try house.serve(connection: channel, budget: budget) }
            }
            .bind(host: host, port: port).get()
        let boundPort = tcp.localAddress?.port ?? port
        let clock = house.clock
        let udp = try await DatagramBootstrap(group: clockGroup)
            .channelOption(.socketOption(.so_reuseaddr), value: 1)
            .channelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHandlers([DatagramArrivalStamper(clock: clock),
                                                                     ClockSyncResponder(clock: clock, sessions: house.clockSessions)])
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
    /// The accept queue of the house's listening ports (the wire's and HTTP's).
    public static let acceptBacklog: Int32 = 4096

    /// The largest frame a peer may send the house: a command's JSON, as HTTP's largest body.
    public static let maximumInboundPayload = 1 << 20
    /// The largest a peer that has proved nothing may send (a hello, a proof, a waiting
    /// speaker's status): 64 strangers hold a few hundred KiB of the house, not 64 MiB.
    public static let maximumOpeningPayload = 4096

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
    /// listener (with its port's `budget`) or by a simulated link: adds the codec and the
    /// house's connection handler. Call on the channel's event loop, before it is active.
    public func serve(connection channel: any Channel, budget: ConnectionBudget? = nil) throws {
        try channel.pipeline.syncOperations.addHandlers([
            // Every connection is sealed: the house proves its identity, a speaker its own.
            SecureChannelHandler(side: .house(configuration.identity), maximumPlaintext: House.maximumInboundPayload + WireProtocol.headerSize,
                                 openingPlaintext: House.maximumOpeningPayload + WireProtocol.headerSize),
            // What reaches the house is small: a hello, statuses, a command's JSON (a play of a
            // few thousand paths). The first two frames, before a peer has proved anything, must
            // be a few KiB at most.
            ByteToMessageHandler(WireMessageDecoder(maximumPayload: House.maximumInboundPayload, openingFrames: 2, openingMaximumPayload: House.maximumOpeningPayload)),
            FramedChunkWriter(),
            MessageToByteHandler(WireMessageEncoder()),
            HouseConnectionHandler(house: self, budget: budget),
        ])
    }
}

extension Channel {
    /// Turns reading on or off, on the channel's loop.
    fileprivate func setAutoRead(_ on: Bool) {
        do { try syncOptions?.setOption(.autoRead, value: on) } catch {
            // Only a closed channel refuses; it reads nothing more anyway.
        }
        if on { read() }
    }
}

/// The house end of one TCP connection: a speaker or a controller, behind the secure channel
/// (`SecureChannelHandler`), which has proved the house's identity to the peer, and a
/// speaker's to the house, before the first message arrives here.
///
/// A speaker the house has admitted is let in at its hello. One it does not know waits
/// (`HouseCore.knock`): it is sent its welcome and `admission(waiting)`, nothing else, and what it
/// sends is ignored, until a controller admits it.
///
/// A controller's welcome carries a fresh challenge; the house takes its control requests only
/// after an `authenticate` whose proof shows it holds the controller token, bound to this
/// channel (`ControllerToken.accepts(proof:for:binding:)`). A wrong proof, or a request before
/// any, ends the connection with a goodbye that says where the token is kept.
final class HouseConnectionHandler: ChannelInboundHandler {
    typealias InboundIn = WireMessage
    typealias OutboundOut = WireMessage
    private let house: House
    private let budget: ConnectionBudget?
    private var clientID: UInt32?
    private var role: WireMessage.Hello.Role?
    /// A controller's challenge until it has answered it; nil after.
    private var challenge: [UInt8]?
    /// What the secure channel established: the peer's identity and the channel's keys.
    private var session: SecureHandshake.Session?
    /// A speaker's hello while it waits to be admitted; nil once admitted (or never waiting).
    private var waitingHello: WireMessage.Hello?

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if let session = event as? SecureHandshake.Session { self.session = session }
        context.fireUserInboundEventTriggered(event)
    }

    init(house: House, budget: ConnectionBudget?) {
        self.house = house
        self.budget = budget
    }

    /// A peer that has not said hello within this long is closed: a thousand idle or
    /// slow-dripping connections would otherwise hold the house's descriptors forever. A
    /// controller must also have proved its token by then. With a budget (the server's port),
    /// the budget's timeout does it, and makes room for newer connections too.
    static let helloTimeoutNanoseconds: Int64 = 10_000_000_000

    func channelActive(context: ChannelHandlerContext) {
        let bound = NIOLoopBound((self, context), eventLoop: context.eventLoop)
        if let budget {
            let loop = context.eventLoop
            // Told once per 10 s by the budget, not per connection: a flood is thousands.
            budget.enter(context.channel) { reason in
                loop.execute {
                    let (handler, context) = bound.value
                    if context.channel.isActive { handler.reject(context, reason, logged: false) }
                }
            }
        } else {
            context.eventLoop.scheduleTask(in: .nanoseconds(Self.helloTimeoutNanoseconds)) {
                let (handler, context) = bound.value
                guard context.channel.isActive else { return }
                if handler.role == nil { handler.reject(context, "no hello within \(Self.helloTimeoutNanoseconds / 1_000_000_000) s") }
                else if handler.challenge != nil { handler.reject(context, "no controller token proved within \(Self.helloTimeoutNanoseconds / 1_000_000_000) s") }
            }
        }
        context.fireChannelActive()
    }

    /// The connection proved it belongs to the household; false (and refused) when the port
    /// already holds all it may. `evenIfFull` (an admitted speaker, a controller that proved the
    /// token) is also let send records of full size.
    private func trust(_ context: ChannelHandlerContext, evenIfFull: Bool = false) -> Bool {
        if evenIfFull { raiseRecordLimit(context) }
        guard let budget else { return true }
        switch budget.trust(context.channel, evenIfFull: evenIfFull) {
        case .trusted: return true
        case .gone: return false
        case .full:
            reject(context, "the house already holds \(budget.limits.maximumTrusted) rooms and controllers on this port (tutti server --max-connections)")
            return false
        }
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
            // The secure channel fires its session before it passes on a byte.
            guard let session else { preconditionFailure("a hello before the secure channel opened: serve(connection:) puts it first") }
            guard session.role == hello.role else {
                return reject(context, "a \(hello.role)'s hello on a \(session.role)'s channel")
            }
            self.role = hello.role
            switch hello.role {
            case .controller:
                // Trusted once it has proved the token.
                challenge = ControllerToken.challenge()
                clientID = house.core.value.connect(channel: context.channel, hello: hello)
                let welcome = WireMessage.Welcome(serverName: house.configuration.name, clientID: clientID!, challenge: challenge!)
                context.writeAndFlush(Self.wrapOutboundOut(.welcome(welcome)), promise: nil)
            case .speaker:
                guard let key = session.speakerKey else { preconditionFailure("a speaker's channel without its key") }
                if house.core.value.isAdmitted(key) {
                    // The household's own: let in past the cap, as a controller that proved the token.
                    guard trust(context, evenIfFull: true) else { return }
                    context.write(Self.wrapOutboundOut(.welcome(.init(serverName: house.configuration.name, clientID: 0))), promise: nil)
                    letIn(context, hello: hello, key: key, session: session)
                } else {
                    // A stranger's waiting speakers count against the cap (and at most
                    // `SpeakerAdmission.maximumWaiting` wait).
                    guard trust(context) else { return }
                    waitingHello = hello
                    context.write(Self.wrapOutboundOut(.welcome(.init(serverName: house.configuration.name, clientID: 0))), promise: nil)
                    let bound = NIOLoopBound((self, context), eventLoop: context.eventLoop)
                    let code = session.admissionCode
                    house.core.value.knock(channel: context.channel, name: hello.name, key: key, code: code) {
                        let (handler, context) = bound.value
                        guard context.channel.isActive, let hello = handler.waitingHello else { return }
                        handler.letIn(context, hello: hello, key: key, session: session)
                    }
                    context.writeAndFlush(Self.wrapOutboundOut(.admission(.init(isAdmitted: false, code: code))), promise: nil)
                }
            }
            return
        }
        switch (role, message) {
        case (.speaker, .speakerStatus(let status)):
            // A waiting speaker's status changes nothing.
            guard waitingHello == nil, let clientID else { return }
            house.core.value.received(status: status, fromConnection: clientID)
        case (.controller, .authenticate(let proof)):
            guard let challenge, let session else { return reject(context, "authenticated twice") }
            guard house.configuration.controllerToken.accepts(proof: proof, for: challenge, binding: session.binding) else {
                return reject(context, "the controller token does not match this house's" + tokenHint)
            }
            // A controller that holds the token is the household: let in past the cap.
            guard trust(context, evenIfFull: true) else { return }
            self.challenge = nil
        case (.controller, .controlRequest(let request)):
            guard challenge == nil else { return reject(context, "a control request before the controller token was proved" + tokenHint) }
            waitingRequests.append(request)
            // Backpressure: a controller far ahead of its answers is not read until they catch up.
            if waitingRequests.count >= Self.maximumWaitingRequests { context.channel.setAutoRead(false) }
            if !answering {
                answering = true
                answerNext(context)
            }
        case (_, .goodbye):
            context.close(promise: nil)
        default:
            reject(context, "unexpected \(message.kindName) from a \(role)")
        }
    }

    /// A controller's requests not answered yet, in order.
    private var waitingRequests: [WireMessage.ControlRequest] = []
    /// Whether `answerNext` is on its way.
    private var answering = false
    /// Requests read ahead of their answers before the connection is no longer read.
    static let maximumWaitingRequests = 256

    private func raiseRecordLimit(_ context: ChannelHandlerContext) {
        // `serve(connection:)` built the pipeline: a connection without the channel is a bug.
        guard let secure = try? context.pipeline.syncOperations.handler(type: SecureChannelHandler.self) else {
            preconditionFailure("a house connection's pipeline has no SecureChannelHandler: serve(connection:) builds it")
        }
        secure.trusted()
    }

    /// An admitted speaker becomes its room: told it is admitted, its clock sync answered, sent
    /// its settings and its group's stream.
    private func letIn(_ context: ChannelHandlerContext, hello: WireMessage.Hello, key: PeerKey, session: SecureHandshake.Session) {
        waitingHello = nil
        raiseRecordLimit(context)
        house.clockSessions.register(session.clock)
        let id = house.core.value.connect(channel: context.channel, hello: hello, speakerKey: key)
        clientID = id
        context.writeAndFlush(Self.wrapOutboundOut(.admission(.init(isAdmitted: true))), promise: nil)
        house.core.value.startSending(toConnection: id)
    }

    /// Answers a controller's next request, one per turn of the loop, so that one controller's
    /// burst of thousands cannot keep the house's loop from everyone else (measured: 20 000
    /// status requests answered in one go held another controller's answer for 0.94 s). A
    /// controller that sends without reading its replies would grow the house's output to it
    /// without end: past the connection's high-water mark (1 MiB unsent), it is closed.
    private func answerNext(_ context: ChannelHandlerContext) {
        guard context.channel.isActive, !waitingRequests.isEmpty else {
            answering = false
            return
        }
        guard context.channel.isWritable else {
            // Over 1 MiB of replies unsent: answer nothing more until they leave (a large
            // queue's reply is that big, for a controller that reads); one that leaves them
            // unread for `unreadRepliesTimeoutNanoseconds` is closed.
            answering = false
            waitForReader(context)
            return
        }
        let request = waitingRequests.removeFirst()
        if waitingRequests.count == Self.maximumWaitingRequests / 4 { context.channel.setAutoRead(true) }
        house.control(json: request.json) { ok, json in
            context.writeAndFlush(Self.wrapOutboundOut(.controlResponse(.init(requestID: request.requestID, ok: ok, json: json))), promise: nil)
        }
        // Not `execute`: NIO runs every task queued, those queued meanwhile too, before it looks
        // at its sockets again, so a chain of them would hold the loop as surely as a loop.
        // A task due a little later lets the loop serve its sockets first.
        let bound = NIOLoopBound((self, context), eventLoop: context.eventLoop)
        context.eventLoop.scheduleTask(in: .microseconds(20)) {
            let (handler, context) = bound.value
            handler.answerNext(context)
        }
    }

    /// How long a controller may leave over 1 MiB of replies unread before it is closed.
    static let unreadRepliesTimeoutNanoseconds: Int64 = 10_000_000_000
    /// Set while the replies wait for the controller to read them.
    private var waitingForReader = false

    private func waitForReader(_ context: ChannelHandlerContext) {
        guard !waitingForReader else { return }
        waitingForReader = true
        let bound = NIOLoopBound((self, context), eventLoop: context.eventLoop)
        context.eventLoop.scheduleTask(in: .nanoseconds(Self.unreadRepliesTimeoutNanoseconds)) {
            let (handler, context) = bound.value
            guard handler.waitingForReader, context.channel.isActive, !context.channel.isWritable else { return }
            handler.reject(context, "a controller that does not read its replies (over 1 MiB of them unread for \(Self.unreadRepliesTimeoutNanoseconds / 1_000_000_000) s)")
        }
    }

    /// Where a controller finds the token, for the refusal: the file's name, not its path, which
    /// would tell a stranger the house's user and directories.
    private var tokenHint: String {
        guard house.configuration.controllerTokenPath != nil else { return "" }
        return " (it is the file \(ControllerTokenFile.fileName) in the house's state directory; give it to tutti ctl with --token-file FILE or TUTTI_TOKEN)"
    }

    func channelWritabilityChanged(context: ChannelHandlerContext) {
        if context.channel.isWritable, role == .speaker, let id = clientID { house.core.value.writable(connection: id) }
        if context.channel.isWritable, role == .controller, waitingForReader {
            // The controller read its replies: answer on.
            waitingForReader = false
            if !answering && !waitingRequests.isEmpty {
                answering = true
                answerNext(context)
            }
        }
        context.fireChannelWritabilityChanged()
    }

    func channelInactive(context: ChannelHandlerContext) {
        budget?.leave(context.channel)
        if waitingHello != nil { house.core.value.leaveWaiting(channel: context.channel) }
        if role == .speaker, let session { house.clockSessions.remove(sessionID: session.clock.sessionID) }
        if role == .speaker, let id = clientID { house.core.value.disconnect(connectionID: id) }
        context.fireChannelInactive()
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        reject(context, "\(error)")
    }

    private func reject(_ context: ChannelHandlerContext, _ reason: String, logged: Bool = true) {
        if logged { house.core.value.logRejection("\(context.channel.remoteAddress.map { "\($0)" } ?? "peer"): \(reason); connection closed") }
        context.writeAndFlush(Self.wrapOutboundOut(.goodbye(reason: reason)), promise: nil)
        context.close(promise: nil)
    }
}
