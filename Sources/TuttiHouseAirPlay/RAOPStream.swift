import NIOCore
import NIOPosix
import TuttiCore
import TuttiMedia
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
    /// Compressed ALAC (iTunes' and most senders that have an encoder): libavcodec's decoder,
    /// made at the first such frame from the announcement's magic cookie. The frames senders
    /// without an encoder send (escaped, verbatim) are read by `decoder`.
    private var alacDecoder: ParsedPacketDecoder?
    private var decoded: [Float] = []
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
    /// The audio's source, taken from its first packet: its address and port, and SSRC.
    private var audioSource: (address: SocketAddress, ssrc: UInt32)?
    /// When the last audio datagram of the stream came (the session's liveness).
    private(set) var lastAudio: NIODeadline?
    private var began = false
    /// Our last timing requests' stamps: a reply counts only if it echoes one of them.
    private var sentStamps: [UInt64] = []
    private var staleSyncs = 0
    private var undecodable = 0
    private var foreignSSRC = 0
    private var samples: [Int16] = []
    private let dropsEveryNthAudioPacket: Int
    /// AirPlay 2's audio encryption (nil for AirPlay 1's clear audio).
    private let cipher: AirPlay2AudioCipher?
    /// Audio packets that did not open with the stream's key.
    private var unopened = 0
    /// The RTP time of the frame after the last one handed on.
    private var nextTimestamp: UInt32 = 0

    init(announcement: RAOPAnnouncement, sender: SocketAddress, controlPort: Int, timingPort: Int, info: AirPlayStreamInfo,
         sink: any AirPlaySink, clock: any HostClock, log: @escaping @Sendable (String) -> Void, eventLoop: any EventLoop,
         cipher: AirPlay2AudioCipher? = nil, dropsEveryNthAudioPacket: Int = 0) {
        self.dropsEveryNthAudioPacket = dropsEveryNthAudioPacket
        self.cipher = cipher
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
        // A datagram is read into a buffer of this size, and what does not fit is cut off
        // (NIO's default is 2048 bytes): room for the largest packet the announcement allows
        // (up to 4096 frames of 16-bit samples; a compressed or escaped ALAC frame is at most a
        // few bytes more than its samples), resent audio's extra header, and more.
        let datagramCapacity = max(2048, announcement.framesPerPacket * announcement.channelCount * 2 + 256)
        func open(_ kind: RAOPDatagramHandler.Kind) -> EventLoopFuture<any Channel> {
            DatagramBootstrap(group: eventLoop)
                .channelOption(.recvAllocator, value: FixedSizeRecvByteBufferAllocator(capacity: datagramCapacity))
                // A loop that fell behind catches up in one turn (NIO reads 4 by default).
                .channelOption(.maxMessagesPerRead, value: 64)
                .channelInitializer { channel in
                    channel.eventLoop.makeCompletedFuture {
                        try channel.pipeline.syncOperations.addHandler(RAOPDatagramHandler(kind: kind, stream: bound))
                    }
                }
                .bind(host: host, port: 0)
        }
        let opened = [open(.audio), open(.control), open(.timing)]
        // If one fails, the others that opened are closed: nothing is left bound.
        return EventLoopFuture.whenAllComplete(opened, on: eventLoop).flatMapThrowing { results in
            let stream = bound.value
            let channels = results.compactMap { try? $0.get() }
            guard channels.count == 3 else {
                for channel in channels { channel.close(promise: nil) }
                for case .failure(let error) in results { throw error }
                throw ChannelError.ioOnClosedChannel
            }
            stream.channels = channels
            guard !stream.ended else {
                stream.closeChannels()
                throw ChannelError.ioOnClosedChannel
            }
            stream.startTiming()
            stream.began = true
            stream.sink.airPlayBegan(stream.info)
            return Ports(audio: channels[0].localAddress?.port ?? 0, control: channels[1].localAddress?.port ?? 0, timing: channels[2].localAddress?.port ?? 0)
        }
    }

    func record() {
        recording = true
    }

    /// A flush: what was held is dropped, and packets before `sequence` (when given) are void.
    func flush(from sequence: UInt16?) {
        reorder.reset(next: sequence)
        if began { sink.airPlayFlushed() }
    }

    /// Ends the stream after this turn of the loop, whose reads come first: the datagrams a
    /// sender sent before its TEARDOWN and that wait on the ports (under load, CI saw 0.8 s of
    /// them cut off) are handed on before the end.
    func endAfterPendingReads(_ reason: String) {
        let bound = NIOLoopBound(self, eventLoop: eventLoop)
        eventLoop.execute { bound.value.end(reason) }
    }

    func end(_ reason: String) {
        guard !ended else { return }
        ended = true
        timingTask?.cancel()
        closeChannels()
        if reorder.givenUp > 0 || reorder.resendsAsked > 0 || undecodable > 0 || reorder.farAhead > 0 || foreignSSRC > 0 || staleSyncs > 0 || unopened > 0 {
            log("AirPlay: \(info.sender): \(reorder.resendsAsked) packets asked for again, \(reorder.givenUp) lost for good, \(undecodable) not decodable, "
                + "\(reorder.farAhead) far ahead of the order (\(reorder.jumps) jumps), \(foreignSSRC) from another source, \(staleSyncs) syncs before its clock's epoch"
                + (cipher == nil ? "" : ", \(unopened) that did not open with its key"))
        }
        if began { sink.airPlayEnded(reason) }
    }

    private func closeChannels() {
        for channel in channels { channel.close(promise: nil) }
        channels.removeAll()
    }

    func setParameter(contentType: String, body: [UInt8]) {
        let type = contentType.lowercased()
        if type.hasPrefix("text/parameters") {
            for parts in RTSPRequest.textParameters(body).map({ [$0.name, $0.value] }) {
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

    /// Each port takes only what its peer sends: audio from the source its first packet came
    /// from; sync and resent audio from the sender's control port, timing replies from its
    /// timing port (the ports it gave in SETUP). A stranger's datagram with the sender's address
    /// but another port is dropped.
    func received(_ bytes: [UInt8], on kind: RAOPDatagramHandler.Kind, from address: SocketAddress) {
        guard !ended, address.ipAddress == sender.ipAddress, let packet = RAOPPacket(bytes) else { return }
        switch (kind, packet) {
        case (.audio, .audio(let audio)):
            if let source = audioSource?.address, source != address { return foreign(audio) }
            if dropsEveryNthAudioPacket > 0, audioSource != nil, Int(audio.sequence) % dropsEveryNthAudioPacket == 0 { return }
            guard let opened = open(audio) else { return }
            receiveAudio(opened, from: address)
        case (.control, .audio(let audio)) where address == senderControl:
            guard let opened = open(audio) else { return }
            receiveAudio(opened, from: nil)
        case (.control, .sync(let sync)) where address == senderControl:
            receiveSync(sync)
        case (.timing, .timingReply(let reply)) where address == senderTiming:
            receiveTiming(reply)
        default:
            return
        }
    }

    /// The packet's audio in the clear: AirPlay 2's decrypted, nil if it does not open.
    private func open(_ packet: RAOPAudioPacket) -> RAOPAudioPacket? {
        guard let cipher else { return packet }
        guard let opened = cipher.open(packet) else {
            unopened += 1
            if unopened == 1 { log("AirPlay: \(info.sender): audio packet \(packet.sequence) does not open with the stream's key (forged or corrupted); dropped, and any more") }
            return nil
        }
        return opened
    }

    private func foreign(_ packet: RAOPAudioPacket) {
        foreignSSRC += 1
        if foreignSSRC == 1 { log("AirPlay: \(info.sender): audio from another source than the stream's (SSRC \(packet.ssrc)); dropped, and any more") }
    }

    /// `source`: the datagram's, for audio on the audio port (nil for a resend on the control
    /// port, whose source was checked there).
    private func receiveAudio(_ packet: RAOPAudioPacket, from source: SocketAddress?) {
        guard recording else { return }
        // The stream's source is its first packet's, address, port and SSRC: anything else is a
        // stranger's (AirPlay 1 without encryption has no other integrity; docs/AIRPLAY.md).
        if let known = audioSource {
            guard known.ssrc == packet.ssrc else { return foreign(packet) }
        } else if let source {
            audioSource = (source, packet.ssrc)
        } else {
            return
        }
        lastAudio = .now()
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
                let frames: Int
                do { frames = try decoder.decode(released.payload, into: &samples) } catch .compressedALAC {
                    frames = try decodeCompressedALAC(released.payload)
                }
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

    /// A compressed ALAC frame through libavcodec, into `samples`; returns its frames.
    private func decodeCompressedALAC(_ payload: [UInt8]) throws(RAOPAudioDecoder.Failure) -> Int {
        if alacDecoder == nil {
            do {
                alacDecoder = try ParsedPacketDecoder(codecName: "alac", sampleRate: announcement.sampleRate, channelCount: announcement.channelCount,
                                                      decoderConfiguration: announcement.alacMagicCookie)
            } catch {
                throw .malformedALAC("libavcodec's ALAC decoder cannot be opened for this stream: \(error)")
            }
        }
        decoded.removeAll(keepingCapacity: true)
        let frames = alacDecoder!.decode(payload, appendingTo: &decoded)
        guard frames > 0 else { throw RAOPAudioDecoder.Failure.malformedALAC("libavcodec's ALAC decoder took nothing from the frame") }
        // 16-bit samples come out as n / 32768, so this gives them back exactly.
        samples = decoded.map { Int16(clamping: Int(($0 * 32768).rounded())) }
        return frames
    }

    private func receiveSync(_ sync: RAOPSync) {
        guard let mapping = estimator.mapping, let epoch = senderEpochSeconds else { return }
        guard sync.ntpTime.rawValue >= epoch << 32 else {
            staleSyncs += 1
            if staleSyncs == 1 { log("AirPlay: \(info.sender): a sync packet from before its clock's first timing reply; ignored") }
            return
        }
        let senderNanoseconds = NTPTimestamp(sync.ntpTime.rawValue - (epoch << 32)).nanoseconds
        let hostTime = mapping.localTime(atServer: senderNanoseconds)
        sink.airPlaySchedule(rtpTime: sync.rtpTimeWithoutLatency, hostTime: hostTime, errorNanoseconds: mapping.bound(atLocal: hostTime))
    }

    private func receiveTiming(_ reply: RAOPTimingReply) {
        let now = clock.now()
        // Only a reply to a request of ours (its stamp echoed) is an exchange.
        guard let index = sentStamps.firstIndex(of: reply.originate.rawValue) else { return }
        sentStamps.remove(at: index)
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
            let stamp = NTPTimestamp(nanoseconds: stream.clock.now())
            if stream.sentStamps.count == 16 { stream.sentStamps.removeFirst() }
            stream.sentStamps.append(stamp.rawValue)
            stream.send(RAOPPacket.timingRequest(sendTime: stamp).encoded, to: stream.senderTiming, on: 2)
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
