import NIOCore
import TuttiProtocol
import NIOPosix
import Synchronization
import TuttiCore

/// The house's Snapcast stream port (`tutti server --snapcast`, default 1704): real
/// snapclients connect as they would to snapserver, and each becomes a room of the house
/// (`SnapclientRoom`), listed, grouped and given a volume like Tutti's own.
///
/// The protocol is Snapcast's binary one, version 2 (snapcast 0.26 on). A client's hello is
/// answered with its settings and the codec header (16-bit PCM at the house's rate), its time
/// messages with this server's clock, and its room then sends it audio. A malformed message
/// closes that client's connection with one line saying why; nothing else stops.
public final class SnapcastStreamServer: Sendable {
    public struct Configuration: Sendable {
        /// The house's wire port, which each client's room connects to as a speaker.
        public var houseHost: String
        public var housePort: Int
        public var sampleRate = 48000
        public var channelCount = 2
        public var sendAheadNanoseconds: Int64 = 250_000_000
        /// The house's own identity: each client's room is a speaker with an identity derived
        /// from it, the client's room name and its address (`IdentityKey.derived(for:)`, the same
        /// across restarts), which talks to this house only. It waits to be admitted like any
        /// speaker.
        public var houseIdentity: IdentityKey

        public init(houseHost: String, housePort: Int, houseIdentity: IdentityKey) {
            self.houseHost = houseHost
            self.housePort = housePort
            self.houseIdentity = houseIdentity
        }
    }

    public let configuration: Configuration
    private let clock: any HostClock
    private let group: any EventLoopGroup
    private let log: @Sendable (String) -> Void
    private let channel = Mutex<(any Channel)?>(nil)

    public init(configuration: Configuration, clock: any HostClock, group: any EventLoopGroup = MultiThreadedEventLoopGroup.singleton,
                log: @escaping @Sendable (String) -> Void) {
        self.configuration = configuration
        self.clock = clock
        self.group = group
        self.log = log
    }

    /// Listens on `host:port` (port 0 picks a free one) and returns the port.
    public func start(host: String, port: Int) async throws -> Int {
        let configuration = self.configuration, clock = self.clock, group = self.group, log = self.log
        let channel = try await ServerBootstrap(group: group)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .childChannelOption(.socketOption(.tcp_nodelay), value: 1)
            .childChannelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHandlers([
                        ByteToMessageHandler(SnapcastMessageDecoder(clock: clock)),
                        MessageToByteHandler(SnapcastMessageEncoder(clock: clock)),
                        SnapclientConnectionHandler(configuration: configuration, clock: clock, group: group, log: log),
                    ])
                }
            }
            .bind(host: host, port: port).get()
        self.channel.withLock { $0 = channel }
        return channel.localAddress?.port ?? port
    }

    public func stop() async {
        let channel = self.channel.withLock { $0 }
        try? await channel?.close()
    }
}

/// A message as read, with the time it arrived (for answering time messages).
struct ReceivedSnapcastMessage {
    var message: SnapcastMessage
    var receivedAt: Int64
}

struct SnapcastMessageDecoder: ByteToMessageDecoder {
    typealias InboundOut = ReceivedSnapcastMessage
    let clock: any HostClock

    mutating func decode(context: ChannelHandlerContext, buffer: inout ByteBuffer) throws -> DecodingState {
        guard let message = try SnapcastMessage.read(from: &buffer) else { return .needMoreData }
        context.fireChannelRead(wrapInboundOut(ReceivedSnapcastMessage(message: message, receivedAt: clock.now())))
        return .continue
    }
}

/// Stamps each message with its send time as it is written, as the clock probes need.
struct SnapcastMessageEncoder: MessageToByteEncoder {
    typealias OutboundIn = SnapcastMessage
    let clock: any HostClock

    func encode(data: SnapcastMessage, out: inout ByteBuffer) throws {
        var message = data
        message.sent = .init(nanoseconds: clock.now())
        message.write(to: &out)
    }
}

/// One snapclient's connection: hello, settings and codec header, time answers, and its room.
final class SnapclientConnectionHandler: ChannelInboundHandler, @unchecked Sendable {
    typealias InboundIn = ReceivedSnapcastMessage
    typealias OutboundOut = SnapcastMessage

    let configuration: SnapcastStreamServer.Configuration
    let clock: any HostClock
    let group: any EventLoopGroup
    let log: @Sendable (String) -> Void
    private var room: SnapclientRoom?
    private var peer = "?"
    private var reportedClientInfo = false
    private var clockMirror = SnapclientClockMirror()

    init(configuration: SnapcastStreamServer.Configuration, clock: any HostClock, group: any EventLoopGroup, log: @escaping @Sendable (String) -> Void) {
        self.configuration = configuration
        self.clock = clock
        self.group = group
        self.log = log
    }

    func channelActive(context: ChannelHandlerContext) {
        peer = context.remoteAddress.map { "\($0)" } ?? "?"
        context.fireChannelActive()
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let received = unwrapInboundIn(data)
        let message = received.message
        switch message.payload {
        case .time:
            // Snapcast's probe: the answer carries this side's receive time less the client's
            // send time; its header, the time it is sent.
            clockMirror.add(sentByClient: message.sent.nanoseconds, receivedAt: received.receivedAt)
            let latency = received.receivedAt - message.sent.nanoseconds
            context.writeAndFlush(wrapOutboundOut(SnapcastMessage(refersTo: message.id, payload: .time(latency: .init(nanoseconds: latency)))), promise: nil)
        case .hello(let hello):
            guard room == nil else { return }
            let settings = SnapcastServerSettings(bufferMs: 1000)
            context.write(wrapOutboundOut(SnapcastMessage(refersTo: message.id, payload: .serverSettings(settings))), promise: nil)
            let header = SnapcastMessage.pcmHeader(sampleRate: configuration.sampleRate, channelCount: configuration.channelCount)
            context.writeAndFlush(wrapOutboundOut(SnapcastMessage(payload: .codecHeader(codec: "pcm", header: header))), promise: nil)
            var roomConfiguration = SnapclientRoom.Configuration(houseHost: configuration.houseHost, housePort: configuration.housePort, name: hello.roomName)
            roomConfiguration.format = AudioFormat(sampleRate: configuration.sampleRate, channelCount: configuration.channelCount, sampleFormat: .int16)
            roomConfiguration.sendAheadNanoseconds = configuration.sendAheadNanoseconds
            roomConfiguration.bufferMilliseconds = settings.bufferMs
            // Its name is the client's word, so the identity is also bound to its address: a
            // stranger who says an admitted snapclient's name from elsewhere is a new speaker,
            // and waits (a snapclient whose address changes waits to be admitted again).
            let address = context.remoteAddress?.ipAddress ?? "?"
            roomConfiguration.identity = configuration.houseIdentity.derived(for: "snapclient room \(hello.roomName) at \(address)")
            roomConfiguration.houseKey = configuration.houseIdentity.publicKey
            do {
                let room = try SnapclientRoom(configuration: roomConfiguration, channel: context.channel, clock: clock, log: log)
                self.room = room
                room.clientClockError = { [unowned self] time in clockMirror.estimateError(at: time) }
                room.clientClockDrift = { [unowned self] in clockMirror.drift }
                room.start(group: group)
                log("snapclient \(hello.roomName) (\(hello.clientName ?? "?") \(hello.version ?? "?"), \(hello.os ?? "?")) connected from \(peer); it plays room \(hello.roomName)")
            } catch {
                log("snapclient \(hello.roomName) from \(peer): cannot reach the house at \(configuration.houseHost):\(configuration.housePort) (\(error)); closing")
                context.close(promise: nil)
            }
        case .clientInfo(let volume, let muted):
            // Its own mixer moved: the house's volume rules, and is applied before it sends.
            if !reportedClientInfo {
                reportedClientInfo = true
                log("snapclient \(room?.configuration.name ?? peer) set its own volume to \(volume)\(muted ? ", muted" : ""); the house's room volume applies on top")
            }
        default:
            break
        }
    }

    func channelInactive(context: ChannelHandlerContext) {
        if let room {
            room.stop()
            log("snapclient \(room.configuration.name) disconnected; its room leaves the house")
        }
        room = nil
        context.fireChannelInactive()
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        let reason = (error as? SnapcastMessageError)?.description ?? "\(error)"
        log("snapclient \(room?.configuration.name ?? peer): \(reason); closing its connection")
        context.close(promise: nil)
    }
}
