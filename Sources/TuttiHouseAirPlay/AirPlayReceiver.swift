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
        /// Drops every audio packet whose sequence number is a multiple of this on arrival at the
        /// audio port (0: none), so that tests on a lossless loopback exercise resends.
        @_spi(Testing) public var dropsEveryNthAudioPacket = 0
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
        /// RTSP connections open now.
        var connections = 0
    }

    /// RTSP connections served at once; one more is answered `503 Service Unavailable`.
    public static let maximumConnections = 16
    /// A connection that has not completed a request for this long, and does not hold the
    /// stream, is closed: strangers' idle connections cannot keep the places (trickled bytes do
    /// not count, whole requests do).
    public static let idleTimeout: TimeAmount = .seconds(30)
    /// The stream's connection is closed, and the stream ended, after this long with neither a
    /// request nor an audio datagram: a phone that left the network without a word, or a
    /// stranger that announced and went quiet, does not keep every other sender out (453).
    public static let sessionTimeout: TimeAmount = .seconds(60)

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
            // Requests are read one at a time (`RAOPConnectionHandler` reads on when the last is
            // answered): a sender that never reads its replies cannot queue requests without bound.
            .childChannelOption(.autoRead, value: false)
            .childChannelInitializer { [self] channel in
                channel.eventLoop.makeCompletedFuture {
                    let slot = streaming.value
                    guard slot.connections < Self.maximumConnections else {
                        emit("AirPlay: \(channel.remoteAddress?.ipAddress ?? "?"): refused, \(Self.maximumConnections) connections are open")
                        let refusal = RTSPResponse(status: 503, reason: "Service Unavailable", headers: [("Server", "AirTunes/105.1 (Tutti)")])
                        channel.writeAndFlush(channel.allocator.buffer(bytes: refusal.encoded)).whenComplete { _ in channel.close(promise: nil) }
                        return
                    }
                    slot.connections += 1
                    channel.closeFuture.whenComplete { [self] _ in streaming.value.connections -= 1 }
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
    /// What was read and not yet answered; the next read waits until nothing is left.
    private enum Input {
        case request(RTSPRequest)
        /// A malformed request: answered, then the connection is closed (its framing is lost).
        case refusal(RTSPRequestParser.Refusal)
    }
    private var pending: [Input] = []
    private var answering = false
    /// Set once the connection is gone: work still queued then does nothing.
    private var closed = false
    private var lastRequest = NIODeadline.now()
    private var watch: RepeatedTask?

    init(receiver: AirPlayReceiver) {
        self.receiver = receiver
    }

    private var isOwner: Bool { receiver.streaming.value.owner == ObjectIdentifier(self) }

    func channelActive(context: ChannelHandlerContext) {
        peer = context.remoteAddress?.ipAddress ?? "?"
        lastRequest = .now()
        let bound = NIOLoopBound((self, context), eventLoop: context.eventLoop)
        watch = context.eventLoop.scheduleRepeatedTask(initialDelay: .seconds(5), delay: .seconds(5)) { _ in
            let (handler, context) = bound.value
            handler.checkIdle(context: context)
        }
        context.read()
        context.fireChannelActive()
    }

    /// Closes an idle connection, or the stream's after its session timeout.
    private func checkIdle(context: ChannelHandlerContext) {
        let now = NIODeadline.now()
        if isOwner {
            let active = max(lastRequest, session?.lastAudio ?? lastRequest)
            guard now - active > AirPlayReceiver.sessionTimeout else { return }
            receiver.emit("AirPlay: \(peer): no request and no audio for \(AirPlayReceiver.sessionTimeout.nanoseconds / 1_000_000_000) s; ending its stream")
        } else {
            guard now - lastRequest > AirPlayReceiver.idleTimeout else { return }
            receiver.emit("AirPlay: \(peer): no request for \(AirPlayReceiver.idleTimeout.nanoseconds / 1_000_000_000) s; closing the connection")
        }
        context.close(promise: nil)
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        var buffer = unwrapInboundIn(data)
        if let bytes = buffer.readBytes(length: buffer.readableBytes) { parser.append(bytes) }
        while !closed {
            let request: RTSPRequest?
            do {
                request = try parser.next()
            } catch {
                receiver.emit("AirPlay: \(peer): \(error.message); closing the connection")
                pending.append(.refusal(error))
                closed = true
                break
            }
            guard let request else { break }
            pending.append(.request(request))
        }
        answerNext(context: context)
    }

    func channelReadComplete(context: ChannelHandlerContext) {
        if pending.isEmpty && !answering && !closed { context.read() }
        context.fireChannelReadComplete()
    }

    /// Answers the pending requests in order, one at a time (SETUP binds sockets before the next
    /// is read); reads on when all are answered.
    private func answerNext(context: ChannelHandlerContext) {
        guard !answering else { return }
        guard !pending.isEmpty else {
            if !closed { context.read() }
            return
        }
        let input = pending.removeFirst()
        answering = true
        lastRequest = .now()
        let bound = NIOLoopBound((self, context), eventLoop: context.eventLoop)
        let work: EventLoopFuture<Void>
        switch input {
        case .request(let request):
            work = closed ? context.eventLoop.makeSucceededVoidFuture() : handle(request, context: context)
        case .refusal(let refusal):
            pending.removeAll()
            work = write(RTSPResponse(status: refusal.status, reason: refusal.reason, headers: [("Server", "AirTunes/105.1 (Tutti)")]),
                         context: context, close: true, evenIfClosing: true)
        }
        work.whenComplete { _ in
            let (handler, context) = bound.value
            handler.answering = false
            handler.answerNext(context: context)
        }
    }

    func channelInactive(context: ChannelHandlerContext) {
        closed = true
        pending.removeAll()
        watch?.cancel()
        end("the sender's connection closed")
        context.fireChannelInactive()
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        receiver.emit("AirPlay: \(peer): \(error); closing the connection")
        context.close(promise: nil)
    }

    private func write(_ response: RTSPResponse, context: ChannelHandlerContext, close: Bool = false, evenIfClosing: Bool = false) -> EventLoopFuture<Void> {
        guard !closed || evenIfClosing else { return context.eventLoop.makeSucceededVoidFuture() }
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
                                    sink: receiver.sinkForStreams, clock: receiver.configuration.clock, log: { [receiver] in receiver.emit($0) }, eventLoop: loop,
                                    dropsEveryNthAudioPacket: receiver.configuration.dropsEveryNthAudioPacket)
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
                // A SETUP may be tried again.
                handler.session?.end("its ports could not be opened")
                handler.session = nil
                return handler.write(handler.reply(request, 500, "Internal Server Error"), context: context)
            }
        case "RECORD":
            guard let session else { return refuse(455, "Method Not Valid in This State", "RECORD before SETUP") }
            session.record()
            return answer(200, "OK", headers: [("Audio-Latency", "0")])
        case "FLUSH":
            // `RTP-Info: seq=S;rtptime=T`: packets before S are void, even ones still on their way.
            let info = Self.transportOptions(request[header: "RTP-Info"] ?? "")
            session?.flush(from: info["seq"].flatMap { UInt16($0) })
            return answer(200, "OK")
        case "SET_PARAMETER":
            session?.setParameter(contentType: request[header: "Content-Type"] ?? "", body: request.body)
            return answer(200, "OK")
        case "GET_PARAMETER":
            return answer(200, "OK")
        case "TEARDOWN":
            end("the sender ended the stream", afterPendingReads: true)
            return answer(200, "OK", headers: [("Connection", "close")], close: true)
        case "POST" where request.uri == "/feedback":
            return answer(200, "OK")
        case "GET", "POST":
            return answer(404, "Not Found")
        default:
            return refuse(501, "Not Implemented", "method \(request.method.prefix(32)) is not RAOP's")
        }
    }

    /// `afterPendingReads`: a TEARDOWN follows the sender's last packets, which a busy loop may
    /// not have read yet; the stream ends once what waits on its ports is read.
    private func end(_ reason: String, afterPendingReads: Bool = false) {
        if let session {
            if afterPendingReads { session.endAfterPendingReads(reason) } else { session.end(reason) }
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
