import NIOCore
import NIOPosix
import TuttiCore
import TuttiProtocol

/// One sender's stream after SETUP: its three datagram channels (audio in; control: sync
/// packets and resends in, resend requests out; timing: our requests out, the sender's
/// replies in), the reorder buffer, the decoder and the fit of the sender's clock.
///
/// Confined to the receiver's event loop: every handler and timer runs there.
final class RAOPStream {
    struct Ports { var audio: Int; var control: Int; var timing: Int }

    let announcement: RAOPAnnouncement
    let info: AirPlayStreamInfo
    private let sender: SocketAddress
    private let senderControl: SocketAddress?
    private let senderTiming: SocketAddress?
    private let sink: any AirPlaySink
    private let clock: any HostClock
    private let log: @Sendable (String) -> Void
    private let eventLoop: any EventLoop
    private let decoder: RAOPAudioDecoder
    private var reorder = RAOPReorderBuffer()
    private var channels: [any Channel] = []
    private var timingTask: RepeatedTask?
    /// Ticks of the timing task (every 100 ms) so far.
    private var timingTicks = 0
    private var estimator = ClockEstimator()
    /// The sender's NTP seconds at its first timing reply: its stamps are taken from there, so
    /// they stay within the estimator's range (NTP counts from 1900).
    private var senderEpochSeconds: UInt64?
    private var recording = false
    private var ended = false
    private var lastSSRC: UInt32?
    private var undecodable = 0
    private var samples: [Int16] = []
    /// The RTP time of the frame after the last one handed on.
    private var nextTimestamp: UInt32 = 0

    init(announcement: RAOPAnnouncement, sender: SocketAddress, controlPort: Int, timingPort: Int, info: AirPlayStreamInfo,
         sink: any AirPlaySink, clock: any HostClock, log: @escaping @Sendable (String) -> Void, eventLoop: any EventLoop) {
        self.announcement = announcement
        self.info = info
        self.sender = sender
        senderControl = try? SocketAddress(ipAddress: sender.ipAddress ?? "", port: controlPort)
        senderTiming = timingPort == 0 ? nil : try? SocketAddress(ipAddress: sender.ipAddress ?? "", port: timingPort)
        self.sink = sink
        self.clock = clock
        self.log = log
        self.eventLoop = eventLoop
        decoder = RAOPAudioDecoder(announcement: announcement)
    }

    /// Opens the three ports on `host` (the address the sender reached us at).
    func bind(host: String) -> EventLoopFuture<Ports> {
        let bound = NIOLoopBound(self, eventLoop: eventLoop)
        func open(_ kind: RAOPDatagramHandler.Kind) -> EventLoopFuture<any Channel> {
            DatagramBootstrap(group: eventLoop)
                .channelInitializer { channel in
                    channel.eventLoop.makeCompletedFuture {
                        try channel.pipeline.syncOperations.addHandler(RAOPDatagramHandler(kind: kind, stream: bound))
                    }
                }
                .bind(host: host, port: 0)
        }
        return open(.audio).and(open(.control)).and(open(.timing)).map { opened in
            let ((audio, control), timing) = opened
            let stream = bound.value
            stream.channels = [audio, control, timing]
            if stream.ended { stream.closeChannels() }
            stream.startTiming()
            return Ports(audio: audio.localAddress?.port ?? 0, control: control.localAddress?.port ?? 0, timing: timing.localAddress?.port ?? 0)
        }
    }

    func record() {
        guard !recording else { return }
        recording = true
        sink.airPlayBegan(info)
    }

    func flush() {
        reorder.reset()
        sink.airPlayFlushed()
    }

    func end(_ reason: String) {
        guard !ended else { return }
        ended = true
        timingTask?.cancel()
        closeChannels()
        if reorder.givenUp > 0 || reorder.resendsAsked > 0 || undecodable > 0 {
            log("AirPlay: \(info.sender): \(reorder.resendsAsked) packets asked for again, \(reorder.givenUp) lost for good, \(undecodable) not decodable")
        }
        if recording { sink.airPlayEnded(reason) }
    }

    private func closeChannels() {
        for channel in channels { channel.close(promise: nil) }
        channels.removeAll()
    }

    func setParameter(contentType: String, body: [UInt8]) {
        let type = contentType.lowercased()
        if type.hasPrefix("text/parameters") {
            let text = String(decoding: body, as: UTF8.self)
            for line in text.split(whereSeparator: { $0 == "\r" || $0 == "\n" }) {
                let parts = line.split(separator: ":", maxSplits: 1).map { $0.trimmingCharacters(in: " \t") }
                guard parts.count == 2 else { continue }
                switch parts[0].lowercased() {
                case "volume":
                    if let decibels = Double(parts[1]), decibels.isFinite, decibels == -144 || (-30...0).contains(decibels) {
                        sink.airPlayVolume(decibels)
                    } else {
                        log("AirPlay: \(info.sender): volume \"\(parts[1].prefix(16))\" is not AirPlay's −30…0 dB or −144; ignored")
                    }
                case "progress":
                    let values = parts[1].split(separator: "/").compactMap { UInt32($0) }
                    if values.count == 3 {
                        var metadata = AirPlayMetadata()
                        metadata.progress = (values[0], values[1], values[2])
                        sink.airPlayMetadata(metadata)
                    }
                default: continue
                }
            }
        } else if type.hasPrefix("application/x-dmap-tagged") {
            let tags = DMAPTags(body)
            var metadata = AirPlayMetadata()
            metadata.title = tags.title
            metadata.artist = tags.artist
            metadata.album = tags.album
            sink.airPlayMetadata(metadata)
        } else if type.hasPrefix("image/") {
            var metadata = AirPlayMetadata()
            metadata.artwork = body
            metadata.artworkType = String(type.prefix(32))
            sink.airPlayMetadata(metadata)
        }
    }

    // MARK: Datagrams

    func received(_ bytes: [UInt8], on kind: RAOPDatagramHandler.Kind, from address: SocketAddress) {
        guard !ended, address.ipAddress == sender.ipAddress, let packet = RAOPPacket(bytes) else { return }
        switch (kind, packet) {
        case (.audio, .audio(let audio)), (.control, .audio(let audio)):
            receiveAudio(audio)
        case (.control, .sync(let sync)):
            receiveSync(sync)
        case (.timing, .timingReply(let reply)):
            receiveTiming(reply)
        default:
            return
        }
    }

    private func receiveAudio(_ packet: RAOPAudioPacket) {
        guard recording else { return }
        let output = reorder.receive(packet)
        for request in output.resend {
            send(RAOPPacket.resendRequest(sequence: request.sequence, count: request.count).encoded, to: senderControl, on: 1)
        }
        for (_, released) in output.released {
            samples.removeAll(keepingCapacity: true)
            guard let released else {
                // Lost for good: its frames of silence keep what follows in place.
                let frames = announcement.framesPerPacket
                samples = [Int16](repeating: 0, count: frames * announcement.channelCount)
                sink.airPlayAudio(samples, frameCount: frames, rtpTimestamp: nextTimestamp)
                nextTimestamp &+= UInt32(frames)
                continue
            }
            do {
                let frames = try decoder.decode(released.payload, into: &samples)
                sink.airPlayAudio(samples, frameCount: frames, rtpTimestamp: released.timestamp)
                nextTimestamp = released.timestamp &+ UInt32(frames)
            } catch {
                undecodable += 1
                if undecodable == 1 { log("AirPlay: \(info.sender): packet \(released.sequence) cannot be decoded (\(error)); playing silence for it") }
                let frames = announcement.framesPerPacket
                sink.airPlayAudio([Int16](repeating: 0, count: frames * announcement.channelCount), frameCount: frames, rtpTimestamp: released.timestamp)
                nextTimestamp = released.timestamp &+ UInt32(frames)
            }
        }
    }

    private func receiveSync(_ sync: RAOPSync) {
        guard let mapping = estimator.mapping, let epoch = senderEpochSeconds else { return }
        let senderNanoseconds = NTPTimestamp(sync.ntpTime.rawValue &- (epoch << 32)).nanoseconds
        let hostTime = mapping.localTime(atServer: senderNanoseconds)
        sink.airPlaySchedule(rtpTime: sync.rtpTimeWithoutLatency, hostTime: hostTime, errorNanoseconds: mapping.bound(atLocal: hostTime))
    }

    private func receiveTiming(_ reply: RAOPTimingReply) {
        let now = clock.now()
        if senderEpochSeconds == nil { senderEpochSeconds = reply.receive.rawValue >> 32 }
        let epoch = senderEpochSeconds! << 32
        // A reply from before the epoch (a sender's clock stepped back) tells nothing usable.
        guard reply.receive.rawValue >= epoch, reply.transmit.rawValue >= epoch else { return }
        estimator.add(ClockSample(clientSend: reply.originate.nanoseconds, serverReceive: NTPTimestamp(reply.receive.rawValue - epoch).nanoseconds,
                                  serverSend: NTPTimestamp(reply.transmit.rawValue - epoch).nanoseconds, clientReceive: now))
    }

    /// Timing requests: 10 a second for the first second (so the first sync packet finds a
    /// clock), then 2 a second.
    private func startTiming() {
        guard senderTiming != nil else { return }
        let bound = NIOLoopBound(self, eventLoop: eventLoop)
        timingTask = eventLoop.scheduleRepeatedTask(initialDelay: .zero, delay: .milliseconds(100)) { _ in
            let stream = bound.value
            stream.timingTicks += 1
            guard stream.timingTicks <= 10 || stream.timingTicks % 5 == 0 else { return }
            stream.send(RAOPPacket.timingRequest(sendTime: NTPTimestamp(nanoseconds: stream.clock.now())).encoded, to: stream.senderTiming, on: 2)
        }
    }

    private func send(_ bytes: [UInt8], to address: SocketAddress?, on index: Int) {
        guard let address, index < channels.count else { return }
        let channel = channels[index]
        channel.writeAndFlush(AddressedEnvelope(remoteAddress: address, data: channel.allocator.buffer(bytes: bytes)), promise: nil)
    }
}

final class RAOPDatagramHandler: ChannelInboundHandler {
    typealias InboundIn = AddressedEnvelope<ByteBuffer>
    enum Kind { case audio, control, timing }

    private let kind: Kind
    private let stream: NIOLoopBound<RAOPStream>

    init(kind: Kind, stream: NIOLoopBound<RAOPStream>) {
        self.kind = kind
        self.stream = stream
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let envelope = unwrapInboundIn(data)
        var buffer = envelope.data
        guard let bytes = buffer.readBytes(length: buffer.readableBytes) else { return }
        stream.value.received(bytes, on: kind, from: envelope.remoteAddress)
    }
}

extension Substring {
    func trimmingCharacters(in set: String) -> String {
        var slice = self
        while let first = slice.first, set.contains(first) { slice.removeFirst() }
        while let last = slice.last, set.contains(last) { slice.removeLast() }
        return String(slice)
    }
}
