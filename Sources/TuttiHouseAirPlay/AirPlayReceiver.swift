import NIOCore
import NIOPosix
import Synchronization
import TuttiCore
import TuttiProtocol

/// An AirPlay 1 (RAOP) receiver: senders (pyatv, PipeWire's raop sink, iTunes without
/// encryption) connect over RTSP, announce their audio, and stream it over UDP; the receiver
/// puts the packets back in order, asks for the lost ones again, fits the sender's clock from
/// NTP-style timing exchanges, and hands the audio, its schedule, the volume and the metadata
/// to an `AirPlaySink` (docs/AIRPLAY.md).
///
/// One sender streams at a time: another that announces while one streams is answered
/// `453 Not Enough Bandwidth`, and the one streaming is not disturbed.
///
/// Thread-safety: `start` and `stop` from any thread, once each. Every connection and its
/// datagram channels run on the receiver's one event loop, which owns their state.
public final class AirPlayReceiver: Sendable {
    public struct Configuration: Sendable {
        public var host: String
        public var port: Int
        /// The clock the sink's schedule is given in (the house's).
        public var clock: any HostClock
        public init(host: String, port: Int, clock: any HostClock = MonotonicClock()) {
            self.host = host
            self.port = port
            self.clock = clock
        }
    }

    public let configuration: Configuration
    private let sink: any AirPlaySink
    private let log: @Sendable (String) -> Void
    private let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
    private let listener = Mutex<(any Channel)?>(nil)
    /// Which connection streams now, if any (its id).
    let streaming: NIOLoopBoundBox<StreamingSlot>

    final class StreamingSlot {
        var owner: ObjectIdentifier?
    }

    public init(configuration: Configuration, sink: any AirPlaySink, log: @escaping @Sendable (String) -> Void) {
        self.configuration = configuration
        self.sink = sink
        self.log = log
        streaming = NIOLoopBoundBox.makeBoxSendingValue(StreamingSlot(), eventLoop: group.next())
    }

    /// Binds and serves; returns the RTSP port.
    public func start() async throws -> Int {
        let loop = streaming.eventLoop
        let server = try await ServerBootstrap(group: loop)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .childChannelOption(.socketOption(.tcp_nodelay), value: 1)
            .childChannelInitializer { [self] channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHandler(RAOPConnectionHandler(receiver: self))
                }
            }
            .bind(host: configuration.host, port: configuration.port).get()
        listener.withLock { $0 = server }
        return server.localAddress?.port ?? configuration.port
    }

    public func stop() async {
        let server = listener.withLock { channel -> (any Channel)? in defer { channel = nil }; return channel }
        try? await server?.close()
        try? await group.shutdownGracefully()
    }

    func emit(_ line: String) { log(line) }
    var sinkForStreams: any AirPlaySink { sink }
}

/// One sender's RTSP connection, and the stream it sets up. Confined to the receiver's loop.
final class RAOPConnectionHandler: ChannelInboundHandler {
    typealias InboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer

    private let receiver: AirPlayReceiver
    private var parser = RTSPRequestParser()
    private var session: RAOPStream?
    private var announcement: RAOPAnnouncement?
    private var peer = "?"
    /// Requests are answered in order: one that binds sockets (SETUP) finishes before the next.
    private var queue: EventLoopFuture<Void>?

    init(receiver: AirPlayReceiver) {
        self.receiver = receiver
    }

    func channelActive(context: ChannelHandlerContext) {
        peer = context.remoteAddress?.ipAddress ?? "?"
        context.fireChannelActive()
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        var buffer = unwrapInboundIn(data)
        if let bytes = buffer.readBytes(length: buffer.readableBytes) { parser.append(bytes) }
        while true {
            let request: RTSPRequest?
            do {
                request = try parser.next()
            } catch {
                receiver.emit("AirPlay: \(peer): \(error.message); closing the connection")
                let response = RTSPResponse(status: error.status, reason: error.reason, headers: [("Server", "Tutti")])
                let bound = NIOLoopBound((self, context), eventLoop: context.eventLoop)
                enqueue(context) { bound.value.0.write(response, context: bound.value.1, close: true) }
                return
            }
            guard let request else { return }
            let bound = NIOLoopBound((self, context), eventLoop: context.eventLoop)
            enqueue(context) { bound.value.0.handle(request, context: bound.value.1) }
        }
    }

    func channelInactive(context: ChannelHandlerContext) {
        end("the sender's connection closed")
        context.fireChannelInactive()
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        receiver.emit("AirPlay: \(peer): \(error); closing the connection")
        context.close(promise: nil)
    }

    private func enqueue(_ context: ChannelHandlerContext, _ work: @escaping () -> EventLoopFuture<Void>) {
        let loop = context.eventLoop
        let unchecked = NIOLoopBound(work, eventLoop: loop)
        let previous = queue ?? loop.makeSucceededVoidFuture()
        queue = previous.flatMap { unchecked.value() }
    }

    private func write(_ response: RTSPResponse, context: ChannelHandlerContext, close: Bool = false) -> EventLoopFuture<Void> {
        let buffer = context.channel.allocator.buffer(bytes: response.encoded)
        let written = context.writeAndFlush(wrapOutboundOut(buffer))
        if close {
            let channel = context.channel
            return written.flatMap { channel.close() }.recover { _ in }
        }
        return written.recover { _ in }
    }

    private func reply(_ request: RTSPRequest, _ status: Int, _ reason: String, headers: [(name: String, value: String)] = [], body: [UInt8] = []) -> RTSPResponse {
        var all: [(name: String, value: String)] = [("Server", "AirTunes/105.1 (Tutti)")]
        if let sequence = request.sequence { all.append(("CSeq", sequence)) }
        all += headers
        return RTSPResponse(status: status, reason: reason, version: request.version.hasPrefix("HTTP") ? request.version : "RTSP/1.0", headers: all, body: body)
    }

    private func handle(_ request: RTSPRequest, context: ChannelHandlerContext) -> EventLoopFuture<Void> {
        let loop = context.eventLoop
        func answer(_ status: Int, _ reason: String, headers: [(name: String, value: String)] = [], close: Bool = false) -> EventLoopFuture<Void> {
            write(reply(request, status, reason, headers: headers), context: context, close: close)
        }
        func refuse(_ status: Int, _ reason: String, _ why: String) -> EventLoopFuture<Void> {
            receiver.emit("AirPlay: \(peer): \(request.method) refused (\(status) \(reason)): \(why)")
            return answer(status, reason)
        }
        switch request.method {
        case "OPTIONS":
            return answer(200, "OK", headers: [("Public", "ANNOUNCE, SETUP, RECORD, PAUSE, FLUSH, TEARDOWN, OPTIONS, GET_PARAMETER, SET_PARAMETER, POST, GET")])
        case "ANNOUNCE":
            do {
                let parsed = try RAOPAnnouncement(sdp: request.body)
                let slot = receiver.streaming.value
                if let owner = slot.owner, owner != ObjectIdentifier(self) {
                    return refuse(453, "Not Enough Bandwidth", "another sender is streaming")
                }
                slot.owner = ObjectIdentifier(self)
                announcement = parsed
                receiver.emit("AirPlay: \(peer) announces \(parsed.encoding.rawValue) at \(parsed.sampleRate) Hz, \(parsed.channelCount) channels, \(parsed.framesPerPacket) frames a packet")
                return answer(200, "OK")
            } catch {
                return refuse(error.status, error.status == 415 ? "Unsupported Media Type" : "Bad Request", error.message)
            }
        case "SETUP":
            guard let announcement, receiver.streaming.value.owner == ObjectIdentifier(self) else {
                return refuse(455, "Method Not Valid in This State", "SETUP before ANNOUNCE")
            }
            guard session == nil else { return refuse(455, "Method Not Valid in This State", "a second SETUP") }
            let transport = Self.transportOptions(request[header: "Transport"] ?? "")
            guard let controlPort = transport["control_port"].flatMap(Int.init), (1...65535).contains(controlPort),
                  let timingPort = transport["timing_port"].flatMap(Int.init), (0...65535).contains(timingPort),
                  let senderAddress = context.remoteAddress, let local = context.localAddress?.ipAddress else {
                return refuse(461, "Unsupported Transport", "Transport \"\((request[header: "Transport"] ?? "").prefix(96))\" gives no control and timing ports")
            }
            let stream = RAOPStream(announcement: announcement, sender: senderAddress, controlPort: controlPort, timingPort: timingPort,
                                    info: AirPlayStreamInfo(announcement: announcement, sender: peer, senderName: request[header: "X-Apple-Client-Name"]),
                                    sink: receiver.sinkForStreams, clock: receiver.configuration.clock, log: { [receiver] in receiver.emit($0) }, eventLoop: loop)
            session = stream
            let bound = NIOLoopBound((self, context), eventLoop: loop)
            return stream.bind(host: local).flatMap { ports in
                let (handler, context) = bound.value
                return handler.write(handler.reply(request, 200, "OK", headers: [
                    ("Transport", "RTP/AVP/UDP;unicast;mode=record;server_port=\(ports.audio);control_port=\(ports.control);timing_port=\(ports.timing)"),
                    ("Session", "1"), ("Audio-Jack-Status", "connected; type=analog"),
                ]), context: context)
            }.flatMapError { error in
                let (handler, context) = bound.value
                handler.receiver.emit("AirPlay: \(handler.peer): cannot open the stream's ports: \(error)")
                return handler.write(handler.reply(request, 500, "Internal Server Error"), context: context)
            }
        case "RECORD":
            guard let session else { return refuse(455, "Method Not Valid in This State", "RECORD before SETUP") }
            session.record()
            return answer(200, "OK", headers: [("Audio-Latency", "0")])
        case "FLUSH":
            session?.flush()
            return answer(200, "OK")
        case "SET_PARAMETER":
            session?.setParameter(contentType: request[header: "Content-Type"] ?? "", body: request.body)
            return answer(200, "OK")
        case "GET_PARAMETER":
            return answer(200, "OK")
        case "TEARDOWN":
            end("the sender ended the stream")
            return answer(200, "OK", headers: [("Connection", "close")], close: true)
        case "POST" where request.uri == "/feedback":
            return answer(200, "OK")
        case "GET", "POST":
            return answer(404, "Not Found")
        default:
            return refuse(501, "Not Implemented", "method \(request.method.prefix(32)) is not RAOP's")
        }
    }

    private func end(_ reason: String) {
        if let session {
            session.end(reason)
            self.session = nil
        }
        let slot = receiver.streaming.value
        if slot.owner == ObjectIdentifier(self) { slot.owner = nil }
        announcement = nil
    }

    /// `RTP/AVP/UDP;unicast;mode=record;control_port=6001;timing_port=6002` as key → value.
    static func transportOptions(_ header: String) -> [String: String] {
        var options: [String: String] = [:]
        for part in header.split(separator: ";") {
            let pieces = part.split(separator: "=", maxSplits: 1)
            if pieces.count == 2 { options[String(pieces[0]).lowercased()] = String(pieces[1]) }
        }
        return options
    }
}
