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
        /// The receiver's identity and pairings, for AirPlay 2 senders that pair with a PIN and
        /// verify on each connection; without it only transient pairing is offered.
        public var accessory: AirPlayAccessory?
        /// Only senders paired with a PIN (verified on their connection) may stream: AirPlay 1's
        /// ANNOUNCE and AirPlay 2's transient pairing are refused. Needs `accessory`.
        public var onlyPairedSenders = false
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
    /// AirPlay 2: the connection's pairing, and once it is done, the session key that
    /// encrypts the connection (and keys its event channel).
    private var pairing: HAPPairing
    private var sessionKey: [UInt8]?
    /// An AirPlay 2 session, after its first SETUP: the sender's timing port and name, and the
    /// event channel.
    private var airPlay2: (timingPort: Int, name: String?, events: AirPlayEventChannel)?

    init(receiver: AirPlayReceiver) {
        self.receiver = receiver
        pairing = HAPPairing(accessory: receiver.configuration.accessory, allowsTransient: !receiver.configuration.onlyPairedSenders)
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
            // A sender pairing with a PIN waits for its user to read it: not idle till it expires.
            if let until = pairing.awaitingPINUntil, receiver.configuration.clock.now() < until { return }
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
        func answerWithBody(_ status: Int, _ reason: String, contentType: String, body: [UInt8]) -> EventLoopFuture<Void> {
            write(reply(request, status, reason, headers: [("Content-Type", contentType)], body: body), context: context)
        }
        switch request.method {
        case "POST" where request.uri == "/pair-pin-start":
            // pyatv asks for a PIN before a transient pairing too (`X-Apple-HKP: 4`), which needs none.
            if request[header: "X-Apple-HKP"] != "4", let refusal = pairing.startPIN(sender: peer, now: receiver.configuration.clock.now()) {
                receiver.emit("AirPlay: \(peer) asks for a PIN: \(refusal)")
            }
            return answer(200, "OK")
        case "POST" where request.uri == "/pair-setup" || request.uri == "/pair-verify":
            guard sessionKey == nil else { return refuse(455, "Method Not Valid in This State", "pairing again on a paired connection") }
            let outcome = request.uri == "/pair-setup" ? pairing.pairSetup(request.body, now: receiver.configuration.clock.now()) : pairing.pairVerify(request.body)
            switch outcome {
            case .reply(let body):
                return answerWithBody(200, "OK", contentType: "application/pairing+tlv8", body: body)
            case .refused(let body, let reason):
                receiver.emit("AirPlay: \(peer): \(reason)")
                return answerWithBody(200, "OK", contentType: "application/pairing+tlv8", body: body)
            case .paired(let body, let controller):
                receiver.emit("AirPlay: \(peer) paired with a PIN as sender \(controller); it is verified on each connection from now on")
                return answerWithBody(200, "OK", contentType: "application/pairing+tlv8", body: body)
            case .established(let body, let key, let how):
                // Bytes the sender sent before it could have read this reply would be read in the
                // clear after it: a sender that does so does not follow the protocol.
                guard pending.isEmpty, parser.bufferedCount == 0 else {
                    receiver.emit("AirPlay: \(peer): sent more before its pairing's last reply; closing the connection")
                    return write(RTSPResponse(status: 400, reason: "Bad Request"), context: context, close: true)
                }
                let written = answerWithBody(200, "OK", contentType: "application/pairing+tlv8", body: body)
                // The reply went out in the clear; from here on both ways are encrypted.
                sessionKey = key
                let peer = self.peer, receiver = self.receiver
                do {
                    try context.pipeline.syncOperations.addHandler(HAPSessionCodec(keys: .control(key), onFailure: {
                        receiver.emit("AirPlay: \(peer): \($0); closing the connection")
                    }), position: .first)
                } catch {
                    receiver.emit("AirPlay: \(peer): cannot encrypt the connection (\(error)); closing it")
                    context.close(promise: nil)
                }
                receiver.emit("AirPlay: \(peer) \(how); its connection is encrypted from here")
                return written
            }
        case "SETUP" where (request[header: "Content-Type"] ?? "").lowercased().hasPrefix(AirPlay2Setup.contentType):
            return setUpAirPlay2(request, context: context)
        case "OPTIONS":
            return answer(200, "OK", headers: [("Public", "ANNOUNCE, SETUP, RECORD, PAUSE, FLUSH, TEARDOWN, OPTIONS, GET_PARAMETER, SET_PARAMETER, POST, GET")])
        case "ANNOUNCE":
            guard !receiver.configuration.onlyPairedSenders else {
                return refuse(403, "Forbidden", "an AirPlay 1 sender: this receiver plays only senders paired with a PIN (--airplay-access paired)")
            }
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
            return open(stream, host: local, answering: request, context: context) { ports in
                ([("Transport", "RTP/AVP/UDP;unicast;mode=record;server_port=\(ports.audio);control_port=\(ports.control);timing_port=\(ports.timing)"),
                  ("Session", "1"), ("Audio-Jack-Status", "connected; type=analog")], [])
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
        airPlay2?.events.close()
        airPlay2 = nil
    }

    /// AirPlay 2's SETUPs, on a paired (encrypted) connection: the session's (timing, the
    /// event channel), then its audio stream's (realtime, ChaCha20-Poly1305 under `shk`).
    private func setUpAirPlay2(_ request: RTSPRequest, context: ChannelHandlerContext) -> EventLoopFuture<Void> {
        let loop = context.eventLoop
        func refuse(_ status: Int, _ reason: String, _ why: String) -> EventLoopFuture<Void> {
            receiver.emit("AirPlay: \(peer): SETUP refused (\(status) \(reason)): \(why)")
            return write(reply(request, status, reason), context: context)
        }
        guard let key = sessionKey else { return refuse(403, "Forbidden", "an AirPlay 2 SETUP on a connection that has not paired (pair-setup first)") }
        let setup: AirPlay2Setup
        do { setup = try AirPlay2Setup(body: request.body) } catch { return refuse(error.status, error.reason, error.message) }
        guard let local = context.localAddress?.ipAddress, let senderAddress = context.remoteAddress else {
            return refuse(500, "Internal Server Error", "the connection has no addresses")
        }
        let bound = NIOLoopBound((self, context), eventLoop: loop)
        guard let streams = setup.streams else {
            // The session: NTP timing (the sender's port, as AirPlay 1's) and the event channel.
            guard airPlay2 == nil else { return refuse(455, "Method Not Valid in This State", "a second session SETUP") }
            let timing = setup.timingProtocol ?? "NTP"
            guard timing == "NTP" else {
                return refuse(501, "Not Implemented", "timing protocol \(timing.prefix(16)): only NTP is served (PTP needs nqptp, docs/AIRPLAY.md)")
            }
            guard let timingPort = setup.timingPort, (1...65535).contains(timingPort) else { return refuse(400, "Bad Request", "no timing port") }
            let slot = receiver.streaming.value
            if let owner = slot.owner, owner != ObjectIdentifier(self) {
                return refuse(453, "Not Enough Bandwidth", "another sender is streaming")
            }
            slot.owner = ObjectIdentifier(self)
            let name = setup.name.map { String($0.prefix(64)) }
            // The session is this connection's from here: `end` closes its event channel.
            let events = AirPlayEventChannel(sender: peer, keys: .events(key), eventLoop: loop, log: { [receiver] in receiver.emit($0) })
            airPlay2 = (timingPort, name, events)
            return events.open(host: local)
                .flatMap { eventPort in
                    let (handler, context) = bound.value
                    handler.receiver.emit("AirPlay: \(handler.peer) (\(name ?? "unnamed"), AirPlay 2) set up a session: NTP timing, events on port \(eventPort)")
                    return handler.write(handler.reply(request, 200, "OK", headers: [("Content-Type", AirPlay2Setup.contentType)],
                                                       body: AirPlay2SetupReply(eventPort: eventPort, timingPort: 0).encoded), context: context)
                }.flatMapError { error in
                    let (handler, context) = bound.value
                    handler.end("its event channel could not be opened")
                    handler.receiver.emit("AirPlay: \(handler.peer): cannot open an event channel: \(error)")
                    return handler.write(handler.reply(request, 500, "Internal Server Error"), context: context)
                }
        }
        guard let airPlay2 else { return refuse(455, "Method Not Valid in This State", "a stream SETUP before the session's") }
        guard session == nil else { return refuse(455, "Method Not Valid in This State", "a second stream") }
        guard streams.count == 1, let stream = streams.first else { return refuse(400, "Bad Request", "\(streams.count) streams; one audio stream is taken") }
        let announcement: RAOPAnnouncement
        do { announcement = try AirPlay2Setup.announcement(for: stream) } catch { return refuse(error.status, error.reason, error.message) }
        guard let shk = stream.shk, let cipher = AirPlay2AudioCipher(key: shk) else {
            return refuse(400, "Bad Request", "no 32-byte audio key (shk)")
        }
        guard let controlPort = stream.controlPort, (1...65535).contains(controlPort) else { return refuse(400, "Bad Request", "no control port") }
        self.announcement = announcement
        receiver.emit("AirPlay: \(peer) streams \(announcement.encoding.rawValue) at \(announcement.sampleRate) Hz, \(announcement.channelCount) channels, "
                      + "\(announcement.framesPerPacket) frames a packet, encrypted (AirPlay 2 realtime)")
        let audio = RAOPStream(announcement: announcement, sender: senderAddress, controlPort: controlPort, timingPort: airPlay2.timingPort,
                               info: AirPlayStreamInfo(announcement: announcement, sender: peer, senderName: airPlay2.name),
                               sink: receiver.sinkForStreams, clock: receiver.configuration.clock, log: { [receiver] in receiver.emit($0) }, eventLoop: loop,
                               cipher: cipher, dropsEveryNthAudioPacket: receiver.configuration.dropsEveryNthAudioPacket)
        session = audio
        return open(audio, host: local, answering: request, context: context) { ports in
            ([("Content-Type", AirPlay2Setup.contentType)], AirPlay2SetupReply(streams: [.init(type: 96, dataPort: ports.audio, controlPort: ports.control)]).encoded)
        }
    }

    /// Opens `stream`'s ports and answers `request` 200 with what `answer` makes of them; if they
    /// cannot be opened, the stream is dropped (a SETUP may be tried again) and the answer is 500.
    private func open(_ stream: RAOPStream, host: String, answering request: RTSPRequest, context: ChannelHandlerContext,
                      with answer: @escaping @Sendable (RAOPStream.Ports) -> (headers: [(name: String, value: String)], body: [UInt8])) -> EventLoopFuture<Void> {
        let bound = NIOLoopBound((self, context), eventLoop: context.eventLoop)
        return stream.bind(host: host).flatMap { ports in
            let (handler, context) = bound.value
            let (headers, body) = answer(ports)
            return handler.write(handler.reply(request, 200, "OK", headers: headers, body: body), context: context)
        }.flatMapError { error in
            let (handler, context) = bound.value
            handler.receiver.emit("AirPlay: \(handler.peer): cannot open the stream's ports: \(error)")
            handler.session?.end("its ports could not be opened")
            handler.session = nil
            return handler.write(handler.reply(request, 500, "Internal Server Error"), context: context)
        }
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
