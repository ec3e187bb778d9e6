import NIOCore
import NIOPosix

/// Sends one control command to a house and returns its reply (`tutti ctl`, tests, benchmarks).
public enum ControlClient {
    /// The house could not be asked: unreachable, closed, silent. One line.
    public struct Failure: Error, CustomStringConvertible {
        public let description: String
    }

    /// Connects to `host:port`, proves it holds `token` (the house's controller token), sends
    /// `command` and returns the house's reply.
    /// - Throws: `ControlRefusal` when the house refuses the command (its one-line reason),
    ///   `Failure` when the house cannot be reached, refuses the token or does not answer in time.
    public static func send(_ command: ControlCommand, host: String, port: Int, token: ControllerToken, group: any EventLoopGroup,
                            timeoutNanoseconds: Int64 = 10_000_000_000) async throws -> ControlReply {
        try await send(ControlRequest(command), host: host, port: port, token: token, group: group, timeoutNanoseconds: timeoutNanoseconds)
    }

    /// The same, for a command addressed to a group of the house (`ControlRequest.group`).
    public static func send(_ request: ControlRequest, host: String, port: Int, token: ControllerToken, group: any EventLoopGroup,
                            timeoutNanoseconds: Int64 = 10_000_000_000) async throws -> ControlReply {
        let reply = try await sendJSON(ControlJSON.encode(request), host: host, port: port, token: token, group: group, timeoutNanoseconds: timeoutNanoseconds)
        guard reply.ok else { throw ControlJSON.decodeRefusal(reply.json) }
        return try ControlJSON.decodeReply(reply.json, to: request.command)
    }

    /// Sends raw request text (tests of malformed requests use it) and returns the raw reply.
    /// Throws `Failure` with one line for an unreachable server, a refused token or a timeout.
    public static func sendJSON(_ json: String, host: String, port: Int, token: ControllerToken, group: any EventLoopGroup,
                                timeoutNanoseconds: Int64 = 10_000_000_000) async throws -> (ok: Bool, json: String) {
        let reply = group.next().makePromise(of: WireMessage.ControlResponse.self)
        let channel: any Channel
        do {
            // The hello as the secure channel opens, then the proof and the request as the
            // welcome arrives, go out on the connection's event loop, not when this task next
            // runs: a house closes a connection that has not said hello within 10 s, and a task
            // on a busy cooperative pool can wait that long.
            channel = try await ClientBootstrap(group: group)
                .connectTimeout(.seconds(5))
                .channelInitializer { channel in
                    channel.eventLoop.makeCompletedFuture {
                        try channel.pipeline.syncOperations.addHandlers([
                            // A controller takes any house's identity: its proof of the token is
                            // bound to this channel, so a house that is not the one it meant to
                            // reach can relay nothing with it.
                            SecureChannelHandler(side: .client(role: .controller, identity: nil, acceptHouse: { _ in nil })),
                            ByteToMessageHandler(WireMessageDecoder()),
                            MessageToByteHandler(WireMessageEncoder()),
                            ReplyHandler(reply: reply, token: token, json: json),
                        ])
                    }
                }
                .connect(host: host, port: port)
                .get()
        } catch {
            reply.fail(error)
            throw Failure(description: "cannot reach the server at \(host):\(port) (\(error))")
        }
        let timeout = channel.eventLoop.scheduleTask(in: .nanoseconds(timeoutNanoseconds)) {
            reply.fail(Failure(description: "the server at \(host):\(port) did not answer in \(timeoutNanoseconds / 1_000_000_000) s"))
        }
        defer {
            timeout.cancel()
            channel.close(promise: nil)
        }
        let response = try await reply.futureResult.get()
        return (response.ok, response.json)
    }

    private final class ReplyHandler: ChannelInboundHandler {
        typealias InboundIn = WireMessage
        typealias OutboundOut = WireMessage
        let reply: EventLoopPromise<WireMessage.ControlResponse>
        let token: ControllerToken
        let json: String
        /// The secure channel's transcript, which the proof is bound to.
        private var binding: [UInt8]?

        func channelActive(context: ChannelHandlerContext) {
            context.writeAndFlush(Self.wrapOutboundOut(.hello(.init(role: .controller, name: "tutti ctl"))), promise: nil)
            context.fireChannelActive()
        }

        func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
            if let session = event as? SecureHandshake.Session { binding = session.binding }
            context.fireUserInboundEventTriggered(event)
        }

        init(reply: EventLoopPromise<WireMessage.ControlResponse>, token: ControllerToken, json: String) {
            self.reply = reply
            self.token = token
            self.json = json
        }

        func channelRead(context: ChannelHandlerContext, data: NIOAny) {
            switch Self.unwrapInboundIn(data) {
            case .welcome(let welcome):
                // A house's challenge is 32 random bytes; a peer that asks to sign anything
                // else is no house of ours.
                guard welcome.challenge.count == ControllerToken.challengeByteCount else {
                    reply.fail(Failure(description: "the server's welcome has no controller challenge: not a Tutti house of protocol \(WireProtocol.version)"))
                    context.close(promise: nil)
                    return
                }
                guard let binding else { preconditionFailure("a welcome before the secure channel opened") }
                context.write(Self.wrapOutboundOut(.authenticate(proof: token.proof(for: welcome.challenge, binding: binding))), promise: nil)
                context.writeAndFlush(Self.wrapOutboundOut(.controlRequest(.init(requestID: 1, json: json))), promise: nil)
            case .controlResponse(let response): reply.succeed(response)
            case .goodbye(let reason): reply.fail(Failure(description: "the server refused: \(reason)"))
            default: break
            }
        }

        func channelInactive(context: ChannelHandlerContext) {
            reply.fail(Failure(description: "the server closed the connection"))
        }

        func errorCaught(context: ChannelHandlerContext, error: any Error) {
            reply.fail(Failure(description: "bad reply from the server: \(error)"))
            context.close(promise: nil)
        }
    }
}
