import NIOCore
import NIOPosix
import TuttiCore
import TuttiProtocol

/// One AirPlay 1 (RAOP) stream to a receiver, from the sender's side: the RTSP conversation
/// (`OPTIONS`, `ANNOUNCE` with the SDP, `SETUP`, `RECORD`, `SET_PARAMETER`, `TEARDOWN`), audio
/// packets to the receiver's server port, sync packets to its control port, answers to its
/// resend requests, and answers to its timing requests, which read this process's clock.
///
/// Time: the receiver fits our clock from the timing exchanges and plays each frame at the time
/// the sync packets give it on that clock. This session's NTP time is `clock.now()` moved to
/// NTP's era (`ntpEpochNanoseconds`), so it never steps.
///
/// Confined to its event loop: every method is called there (`preconditionInEventLoop`).
final class RAOPSenderSession {
    struct Configuration {
        var host: String
        var port: Int
        var announcement = RAOPAnnouncement(encoding: .appleLossless, sampleRate: 44100, channelCount: 2, bitsPerSample: 16, framesPerPacket: 352)
        /// Packets kept for resend requests: 1 024 is 8 s of 352 frames.
        var resendCapacity = 1024
        /// How long each RTSP request may take.
        var requestTimeout: TimeAmount = .seconds(5)
    }

    struct Ports: Equatable { var audio: Int; var control: Int; var timing: Int }

    enum State: Equatable { case idle, connecting, streaming, ended(String) }

    let configuration: Configuration
    let eventLoop: any EventLoop
    private let clock: any HostClock
    private let log: (String) -> Void
    private(set) var state = State.idle
    private var rtsp: (any Channel)?
    private var control: (any Channel)?
    private var timing: (any Channel)?
    private var receiverPorts: Ports?
    /// The session SETUP's reply named, echoed in every later request (RTSP's `Session`).
    private var rtspSession: String?
    private var receiverAddresses: (audio: SocketAddress, control: SocketAddress)?
    private let encoder: RAOPAudioEncoder
    /// Where this session's clock is on NTP's: its seconds since 1900 (now's, at the start).
    let ntpEpochNanoseconds: Int64
    let ssrc = UInt32.random(in: 1...UInt32.max)
    /// The first packet's sequence number and RTP time: random, as RTP asks.
    let firstSequence = UInt16.random(in: 0...UInt16.max)
    let firstTimestamp = UInt32.random(in: 0...UInt32.max)
    private var nextSequence: UInt16
    private var sentFirstAudio = false
    private var sentFirstSync = false
    /// The last `resendCapacity` packets, by sequence number modulo the capacity.
    private var sent: [RAOPAudioPacket?]
    private(set) var resendsAnswered = 0
    private(set) var resendsMissed = 0
    private(set) var timingRequestsAnswered = 0
    private var streamingSince: Int64?
    private var lastTimingRequest: Int64?
    /// Set when a sync is wanted before the next second's (the receiver has just got our clock).
    var needsSync = false
    private let url: String
    /// Called once, on the loop, when the stream ends for a reason of its own (the receiver
    /// closed the connection or refused a request).
    var onEnd: ((String) -> Void)?

    init(configuration: Configuration, eventLoop: any EventLoop, clock: any HostClock, log: @escaping (String) -> Void) {
        self.configuration = configuration
        self.eventLoop = eventLoop
        self.clock = clock
        self.log = log
        encoder = RAOPAudioEncoder(announcement: configuration.announcement)
        nextSequence = firstSequence
        sent = Array(repeating: nil, count: configuration.resendCapacity)
        // NTP counts seconds from 1900; 2 208 988 800 s to 1970. Only differences between our
        // stamps matter to the receiver, but a stamp near zero reads as "no time" to some.
        ntpEpochNanoseconds = (2_208_988_800 + 56 * 365 * 86_400) * 1_000_000_000 - clock.now()
        url = "rtsp://\(configuration.host)/\(UInt32.random(in: 1...UInt32.max))"
    }

    /// This session's NTP time at local time `nanoseconds`.
    func ntpTime(atLocal nanoseconds: Int64) -> NTPTimestamp { NTPTimestamp(nanoseconds: nanoseconds + ntpEpochNanoseconds) }

    /// The RTP time of stream frame `frame` (frame 0 is the first packet's first frame).
    func rtpTime(ofFrame frame: Int64) -> UInt32 { firstTimestamp &+ UInt32(truncatingIfNeeded: frame) }

    // MARK: The conversation

    /// Connects and sets the stream up: the returned future succeeds once `RECORD` is answered
    /// and audio may flow, and fails with the reason otherwise (everything opened is closed).
    func start() -> EventLoopFuture<Void> {
        eventLoop.preconditionInEventLoop()
        precondition(state == .idle, "a session starts once")
        state = .connecting
        let bound = NIOLoopBound(self, eventLoop: eventLoop)
        let connected = ClientBootstrap(group: eventLoop)
            .channelOption(.socketOption(.tcp_nodelay), value: 1)
            .connectTimeout(.seconds(5))
            .channelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    let handler = RTSPClientHandler()
                    handler.onClose = { reason in bound.value.end("the receiver's connection: \(reason)") }
                    try channel.pipeline.syncOperations.addHandler(handler)
                }
            }
            .connect(host: configuration.host, port: configuration.port)
        // Each channel joins the session as it opens, so that `end`, whenever it comes (a
        // failure, `stop` meanwhile), closes it; one that opens after the end is closed at once.
        // The datagram ports open once the connection is up, in its address family (a host name
        // may resolve to IPv6, and audio from an IPv4 socket would never get there).
        return connected.flatMap { rtsp in
            let session = bound.value
            session.adopt(rtsp) { $0.rtsp = $1 }
            let family = rtsp.remoteAddress?.protocol == .inet6 ? "::" : "0.0.0.0"
            let control = session.openDatagram(kind: .control, host: family, bound: bound)
            let timing = session.openDatagram(kind: .timing, host: family, bound: bound)
            control.whenSuccess { bound.value.adopt($0) { $0.control = $1 } }
            timing.whenSuccess { bound.value.adopt($0) { $0.timing = $1 } }
            return control.and(timing)
        }.flatMap { _ in
            let session = bound.value
            guard session.state == .connecting else { return session.eventLoop.makeFailedFuture(RTSPClientHandler.Failure(description: "stopped while connecting")) }
            return session.converse()
        }.flatMapErrorThrowing { error in
            bound.value.end("\(error)")
            throw error
        }
    }

    /// Keeps `channel` (through `assign`), or closes it if the session has ended.
    private func adopt(_ channel: any Channel, _ assign: (RAOPSenderSession, any Channel) -> Void) {
        if case .ended = state {
            channel.close(promise: nil)
        } else {
            assign(self, channel)
        }
    }

    private func openDatagram(kind: RAOPSenderDatagramHandler.Kind, host: String, bound: NIOLoopBound<RAOPSenderSession>) -> EventLoopFuture<any Channel> {
        DatagramBootstrap(group: eventLoop)
            .channelInitializer { channel in
                channel.eventLoop.makeCompletedFuture { try channel.pipeline.syncOperations.addHandler(RAOPSenderDatagramHandler(kind: kind, session: bound)) }
            }
            .bind(host: host, port: 0)
    }

    private func request(_ method: String, headers: [(name: String, value: String)] = [], body: [UInt8] = [], contentType: String? = nil) -> EventLoopFuture<RTSPResponse> {
        guard let rtsp else { return eventLoop.makeFailedFuture(RTSPClientHandler.Failure(description: "not connected")) }
        var all = headers
        all.append(("User-Agent", "Tutti/1.0"))
        all.append(("DACP-ID", String(ssrc, radix: 16, uppercase: true)))
        all.append(("Client-Instance", String(ssrc, radix: 16, uppercase: true)))
        if let rtspSession { all.append(("Session", rtspSession)) }
        if let contentType { all.append(("Content-Type", contentType)) }
        if !body.isEmpty { all.append(("Content-Length", "\(body.count)")) }
        let reply = RTSPClientHandler.send(RTSPRequest(method: method, uri: method == "OPTIONS" ? "*" : url, headers: all, body: body), on: rtsp)
        let guarded = eventLoop.makePromise(of: RTSPResponse.self)
        let seconds = configuration.requestTimeout.nanoseconds / 1_000_000_000
        let timer = eventLoop.scheduleTask(in: configuration.requestTimeout) {
            guarded.fail(RTSPClientHandler.Failure(description: "\(method) had no reply in \(seconds) s"))
        }
        reply.whenComplete { result in
            timer.cancel()
            guarded.completeWith(result)
        }
        return guarded.futureResult.flatMapThrowing { response in
            guard response.status == 200 else {
                // shairport-sync says "Unauthorized" for every refusal; 453 is AirPlay's "busy".
                let reason = response.status == 453 ? "busy: another sender plays to it" : String(response.reason.prefix(60))
                throw RTSPClientHandler.Failure(description: "\(method) was refused: \(response.status) \(reason)")
            }
            return response
        }
    }

    private func converse() -> EventLoopFuture<Void> {
        let bound = NIOLoopBound(self, eventLoop: eventLoop)
        return request("OPTIONS").flatMap { _ in
            let session = bound.value
            return session.request("ANNOUNCE", body: Array(session.sdp.utf8), contentType: "application/sdp")
        }.flatMap { _ in
            let session = bound.value
            let controlPort = session.control?.localAddress?.port ?? 0, timingPort = session.timing?.localAddress?.port ?? 0
            return session.request("SETUP", headers: [("Transport", "RTP/AVP/UDP;unicast;interleaved=0-1;mode=record;control_port=\(controlPort);timing_port=\(timingPort)")])
        }.flatMapThrowing { response in
            let session = bound.value
            let options = Self.transportOptions(response[header: "Transport"] ?? "")
            guard let audio = options["server_port"].flatMap(Int.init), let control = options["control_port"].flatMap(Int.init) else {
                throw RTSPClientHandler.Failure(description: "SETUP's reply gave no server_port and control_port (\(response[header: "Transport"]?.prefix(80) ?? "no Transport"))")
            }
            let ports = Ports(audio: audio, control: control, timing: options["timing_port"].flatMap(Int.init) ?? 0)
            // `Session: 1;timeout=60`: the identifier is what comes before any parameter.
            session.rtspSession = response[header: "Session"].map { String($0.prefix { $0 != ";" }) }.flatMap { $0.isEmpty ? nil : $0 }
            session.receiverPorts = ports
            guard let address = session.rtsp?.remoteAddress?.ipAddress else { throw RTSPClientHandler.Failure(description: "the connection has no peer address") }
            session.receiverAddresses = (try SocketAddress(ipAddress: address, port: audio), try SocketAddress(ipAddress: address, port: control))
        }.flatMap {
            let session = bound.value
            return session.request("RECORD", headers: [("Range", "npt=0-"), ("RTP-Info", "seq=\(session.firstSequence);rtptime=\(session.firstTimestamp)")])
        }.flatMap { _ in
            // The room's volume is applied before the samples are sent: the receiver plays them
            // at full scale, untouched.
            bound.value.setVolume(decibels: 0)
        }.flatMapThrowing {
            let session = bound.value
            guard session.state == .connecting else { throw RTSPClientHandler.Failure(description: "stopped while connecting") }
            session.state = .streaming
            session.streamingSince = session.clock.now()
            // shairport-sync's player applies its last volume (−18 dB at its start)
            // asynchronously after RECORD, over a volume set at once: set it again once that
            // has happened.
            session.eventLoop.scheduleTask(in: .milliseconds(500)) {
                let session = bound.value
                if session.state == .streaming { session.setVolume(decibels: 0).whenFailure { _ in } }
            }
        }
    }

    /// The SDP of an unencrypted stream.
    private var sdp: String {
        let a = configuration.announcement
        let local = rtsp?.localAddress?.ipAddress ?? "0.0.0.0"
        let remote = rtsp?.remoteAddress?.ipAddress ?? configuration.host
        let family = local.contains(":") ? "IP6" : "IP4"
        let format: String
        switch a.encoding {
        case .appleLossless:
            format = "a=rtpmap:96 AppleLossless\r\na=fmtp:96 \(a.framesPerPacket) 0 \(a.bitsPerSample) 40 10 14 \(a.channelCount) 255 0 0 \(a.sampleRate)\r\n"
        case .l16:
            format = "a=rtpmap:96 L16/\(a.sampleRate)/\(a.channelCount)\r\n"
        }
        return "v=0\r\no=Tutti \(ssrc) 0 IN \(family) \(local)\r\ns=Tutti\r\nc=IN \(family) \(remote)\r\nt=0 0\r\nm=audio 0 RTP/AVP 96\r\n" + format
    }

    func setVolume(decibels: Double) -> EventLoopFuture<Void> {
        request("SET_PARAMETER", body: Array("volume: \(decibels)\r\n".utf8), contentType: "text/parameters").map { _ in }
    }

    /// Ends the stream: `TEARDOWN` (not waited for), then everything closes.
    func stop() {
        eventLoop.preconditionInEventLoop()
        guard case .streaming = state else { return end("stopped", notify: false) }
        let bound = NIOLoopBound(self, eventLoop: eventLoop)
        request("TEARDOWN").whenComplete { _ in bound.value.end("stopped", notify: false) }
    }

    private func end(_ reason: String, notify: Bool = true) {
        if case .ended = state { return }
        let wasStarted = state == .streaming
        state = .ended(reason)
        for channel in [rtsp, control, timing].compactMap({ $0 }) { channel.close(promise: nil) }
        let onEnd = self.onEnd
        self.onEnd = nil
        if notify && wasStarted { onEnd?(reason) }
    }

    static func transportOptions(_ header: String) -> [String: String] {
        var options: [String: String] = [:]
        for part in header.split(separator: ";") {
            let pieces = part.split(separator: "=", maxSplits: 1)
            if pieces.count == 2 { options[String(pieces[0].filter { $0 != " " }).lowercased()] = String(pieces[1]) }
        }
        return options
    }

    // MARK: Audio

    /// Sends one packet of `frames` frames (at most the announcement's) of interleaved samples,
    /// stream frame `frame` first.
    func sendAudio(_ samples: UnsafeBufferPointer<Int16>, frames: Int, frame: Int64) {
        eventLoop.preconditionInEventLoop()
        guard state == .streaming, let audio = receiverAddresses?.audio, let control else { return }
        let packet = RAOPAudioPacket(sequence: nextSequence, timestamp: rtpTime(ofFrame: frame), ssrc: ssrc, marker: !sentFirstAudio,
                                     payload: encoder.encode(samples, frames: frames))
        sentFirstAudio = true
        sent[Int(nextSequence) % sent.count] = packet
        nextSequence &+= 1
        write(RAOPPacket.audio(packet).encoded, to: audio, on: control)
    }

    /// Tells the receiver that stream frame `frame` is heard at local time `time`, and that the
    /// sender runs `latencyFrames` ahead of what is heard.
    /// Returns whether it was sent: not while not streaming, nor when the frame sent then has
    /// RTP time 0, which a receiver reads as "no reference" (the next one will do).
    @discardableResult
    func sendSync(frame: Int64, heardAt time: Int64, latencyFrames: Int64) -> Bool {
        eventLoop.preconditionInEventLoop()
        guard state == .streaming, let address = receiverAddresses?.control, let control, rtpTime(ofFrame: frame + latencyFrames) != 0 else { return false }
        let sync = RAOPSync(rtpTimeWithoutLatency: rtpTime(ofFrame: frame), ntpTime: ntpTime(atLocal: time), rtpTime: rtpTime(ofFrame: frame + latencyFrames),
                            isFirst: !sentFirstSync)
        sentFirstSync = true
        write(RAOPPacket.sync(sync).encoded, to: address, on: control)
        return true
    }

    /// Packets that will not be sent (the sender fell behind and skipped them): their sequence
    /// numbers are spent, so the receiver sees them lost and plays their frames as silence,
    /// rather than the next packet at once.
    func skipPackets(_ count: Int) {
        eventLoop.preconditionInEventLoop()
        nextSequence &+= UInt16(truncatingIfNeeded: count)
    }

    /// How long the receiver has not asked for our time (its timing requests come every few
    /// seconds while it plays; a receiver that lost power or the network sends none, and no
    /// TCP reset either), in nanoseconds since streaming began or its last request.
    func silence(at now: Int64) -> Int64 {
        now - max(streamingSince ?? now, lastTimingRequest ?? .min)
    }

    /// Ends the stream for a reason of the room's (a receiver that stopped asking for time).
    func fail(_ reason: String) {
        eventLoop.preconditionInEventLoop()
        end(reason)
    }

    private func write(_ bytes: [UInt8], to address: SocketAddress, on channel: any Channel) {
        channel.writeAndFlush(AddressedEnvelope(remoteAddress: address, data: channel.allocator.buffer(bytes: bytes)), promise: nil)
    }

    // MARK: The receiver's datagrams

    func received(_ bytes: [UInt8], on kind: RAOPSenderDatagramHandler.Kind, from address: SocketAddress) {
        let now = clock.now()
        // Only the receiver's own host is answered.
        guard address.ipAddress == rtsp?.remoteAddress?.ipAddress, let packet = RAOPPacket(bytes) else { return }
        switch (kind, packet) {
        case (.timing, .timingRequest(let sendTime)):
            guard let timing else { return }
            let stamp = ntpTime(atLocal: now)
            let reply = RAOPTimingReply(originate: sendTime, receive: stamp, transmit: ntpTime(atLocal: clock.now()))
            timingRequestsAnswered += 1
            lastTimingRequest = now
            // The receiver ignores syncs until it has our clock: the first sync after its
            // first exchange tells it when the stream's frames are heard at once.
            if timingRequestsAnswered == 1 { needsSync = true }
            write(RAOPPacket.timingReply(reply).encoded, to: address, on: timing)
        case (.control, .resendRequest(let sequence, let count)):
            guard let control else { return }
            // At most what is kept; a request for more is a confused or hostile peer.
            for offset in 0..<min(Int(count), sent.count) {
                let wanted = sequence &+ UInt16(offset)
                if var packet = sent[Int(wanted) % sent.count], packet.sequence == wanted {
                    packet.resent = true
                    resendsAnswered += 1
                    write(RAOPPacket.audio(packet).encoded, to: address, on: control)
                } else {
                    resendsMissed += 1
                }
            }
        default:
            return
        }
    }
}

final class RAOPSenderDatagramHandler: ChannelInboundHandler {
    typealias InboundIn = AddressedEnvelope<ByteBuffer>
    enum Kind { case control, timing }

    private let kind: Kind
    private let session: NIOLoopBound<RAOPSenderSession>

    init(kind: Kind, session: NIOLoopBound<RAOPSenderSession>) {
        self.kind = kind
        self.session = session
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let envelope = unwrapInboundIn(data)
        var buffer = envelope.data
        guard let bytes = buffer.readBytes(length: buffer.readableBytes) else { return }
        session.value.received(bytes, on: kind, from: envelope.remoteAddress)
    }
}
