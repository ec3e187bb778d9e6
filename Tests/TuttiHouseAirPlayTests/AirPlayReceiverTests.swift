import Foundation
import NIOCore
import NIOPosix
import Synchronization
import Testing
import TuttiCore
import TuttiProtocol
import TuttiSimulation
import TuttiTestSupport
@_spi(Testing) @testable import TuttiHouseAirPlay

/// What a receiver's sink was given, in order.
final class CollectingSink: AirPlaySink {
    struct State {
        var began: [AirPlayStreamInfo] = []
        var samples: [Int16] = []
        var timestamps: [UInt32] = []
        /// When each packet's frames were handed on (the monotonic clock), by RTP time.
        var arrivals: [(rtpTime: UInt32, hostTime: Int64)] = []
        var events: [String] = []
        var schedules: [(rtpTime: UInt32, hostTime: Int64, error: Double)] = []
        var volumes: [Double] = []
        var metadata: [AirPlayMetadata] = []
        var flushes = 0
        var ended: [String] = []
    }
    let state = Mutex(State())

    func airPlayBegan(_ stream: AirPlayStreamInfo) { state.withLock { $0.began.append(stream); $0.events.append("began") } }
    func airPlayAudio(_ samples: [Int16], frameCount: Int, rtpTimestamp: UInt32) {
        let now = MonotonicClock().now()
        state.withLock {
            $0.samples += samples
            $0.timestamps.append(rtpTimestamp)
            $0.arrivals.append((rtpTimestamp, now))
            if $0.events.last != "audio" { $0.events.append("audio") }
        }
    }
    func airPlaySchedule(rtpTime: UInt32, hostTime: Int64, errorNanoseconds: Double) {
        state.withLock { $0.schedules.append((rtpTime, hostTime, errorNanoseconds)); $0.events.append("schedule") }
    }
    func airPlayVolume(_ decibels: Double) { state.withLock { $0.volumes.append(decibels); $0.events.append("volume") } }
    func airPlayMetadata(_ metadata: AirPlayMetadata) { state.withLock { $0.metadata.append(metadata); $0.events.append("metadata") } }
    func airPlayFlushed() { state.withLock { $0.flushes += 1; $0.events.append("flushed") } }
    func airPlayEnded(_ reason: String) { state.withLock { $0.ended.append(reason); $0.events.append("ended") } }
}

/// The receiver with real senders: pyatv (`atvremote`, in the venv `make test` makes) streams
/// a file; what the sink is handed is checked sample by sample against the file.
@Suite(.serialized) struct AirPlayReceiverTests {
    static let atvremote = FileManager.default.currentDirectoryPath + "/out/venv-pyatv/bin/atvremote"

    final class Lines: Sendable {
        let all = Mutex<[String]>([])
        func append(_ line: String) { all.withLock { $0.append(line) } }
    }

    /// The TXT properties the receiver's announcement gives: metadata as text, artwork and
    /// progress (md), no AirPlay 1 encryption (et), L16 and ALAC (cn). With the features (ft)
    /// of AirPlay 2 and CoreUtils pairing, pyatv pairs transiently, encrypts the connection and
    /// the audio, and sets the stream up with AirPlay 2's SETUPs; without them it speaks AirPlay 1.
    static func serviceProperties(airPlay2: Bool) -> String {
        ";md=0,1,2;et=0;cn=0,1;tp=UDP" + (airPlay2 ? ";ft=0x400F8200,0x10040" : "")
    }

    @Test(.timeLimit(.minutes(2)), arguments: [false, true])
    func pyatvStreamsAFileBitExact(airPlay2: Bool) async throws {
        try #require(FileManager.default.isExecutableFile(atPath: Self.atvremote), "pyatv's atvremote is not at \(Self.atvremote): run make test (it makes the venv)")
        let directory = try TemporaryDirectory("airplay-pyatv")
        defer { directory.preserveLogs(as: airPlay2 ? "airplay2-pyatv" : "airplay-pyatv"); directory.remove() }
        let music = directory.file("music.wav")
        try TestMedia.ffmpeg(["-f", "lavfi", "-i", "anoisesrc=d=3:c=pink:a=0.3:seed=11", "-af", "pan=stereo|c0=c0|c1=-0.6*c0",
                              "-ar", "44100", "-c:a", "pcm_s16le", "-metadata", "title=Pink Noise", "-metadata", "artist=Tutti Tests", music])
        let sink = CollectingSink()
        let lines = Lines()
        // Every 50th packet is lost on its way: the receiver asks for it again, and pyatv
        // resends it from its backlog.
        var configuration = AirPlayReceiver.Configuration(host: "127.0.0.1", port: 0)
        configuration.dropsEveryNthAudioPacket = 50
        let receiver = AirPlayReceiver(configuration: configuration, sink: sink, log: { lines.append($0) })
        let port = try await receiver.start()
        defer { Task { await receiver.stop() } }

        let sender = try ChildProcess(name: "atvremote", executable: Self.atvremote,
                                      arguments: ["--manual", "--address", "127.0.0.1", "--port", "\(port)", "--protocol", "raop", "--id", "tutti-test",
                                                  "--service-properties", Self.serviceProperties(airPlay2: airPlay2), "--debug", "stream_file=\(music)"],
                                      standardError: directory.file("atvremote.log"))
        #expect(await sender.exit(within: 60) == 0, "atvremote: \((try? String(contentsOfFile: directory.file("atvremote.log"), encoding: .utf8))?.suffix(3000) ?? "")")

        let state = sink.state.withLock { $0 }
        let reference = try TestMedia.run("ffmpeg", ["-nostdin", "-loglevel", "error", "-i", music, "-f", "s16le", "-"]).withUnsafeBytes { Array($0.bindMemory(to: Int16.self)) }
        print("AirPlay from pyatv: \(state.samples.count / 2) frames in \(state.timestamps.count) packets for a file of \(reference.count / 2); "
              + "\(state.schedules.count) schedules, volumes \(state.volumes), metadata \(state.metadata.map { "\($0.title ?? "-")/\($0.artist ?? "-")" }); log: \(lines.all.withLock { $0 })")
        #expect(state.began.count == 1 && state.began.first?.announcement.encoding == .l16)
        // AirPlay 2's SETUP names the sender; AirPlay 1's ANNOUNCE from pyatv does not.
        #expect(state.began.first?.senderName == (airPlay2 ? "pyatv" : nil), "\(state.began)")
        #expect(state.ended.count == 1, "\(state.ended)")
        // Begun first, ended last, whatever pyatv sends before RECORD.
        #expect(state.events.first == "began" && state.events.last == "ended", "\(state.events)")
        let log = lines.all.withLock { $0 }
        let asked = log.first { $0.contains("packets asked for again") } ?? ""
        #expect(asked.contains(" 0 lost for good") && !asked.hasPrefix("AirPlay: 127.0.0.1: 0 packets"), "the lost packets were not all asked for and resent: \(log)")
        // Every frame of the file, in order, from the first packet; then the silence pyatv pads with.
        #expect(state.samples.count >= reference.count)
        let mismatched = zip(state.samples, reference).filter { $0 != $1 }.count
        #expect(mismatched == 0, "\(mismatched) of \(reference.count) samples differ")
        #expect(state.samples.dropFirst(reference.count).allSatisfy { $0 == 0 })
        // Consecutive packets, 352 frames apart.
        #expect(zip(state.timestamps, state.timestamps.dropFirst()).allSatisfy { $1 &- $0 == 352 })
        // The sender's schedule, through the fitted clock: each sync's frame is heard 1 s of host
        // time after the previous one's per 44 100 frames (pyatv's sync time advances with its
        // frames), within the two schedules' own error bounds (the first, on a clock fitted over
        // its first second, said ±3 ms on CI's loaded machine, and was 2.5 ms off) and 1 ms;
        // and about pyatv's latency (66 150 frames, 1.5 s) after that frame arrived.
        #expect(state.schedules.count >= 2)
        for (earlier, later) in zip(state.schedules, state.schedules.dropFirst()) {
            let expected = Double(later.rtpTime &- earlier.rtpTime) / 44100 * 1e9
            #expect(abs(Double(later.hostTime - earlier.hostTime) - expected) < 1e6 + earlier.error + later.error, "schedules \(earlier) → \(later)")
        }
        #expect(state.schedules.last.map { $0.error < 1e6 } == true, "the fit of pyatv's clock still said \(state.schedules.last?.error ?? -1) ns at the end")
        for schedule in state.schedules {
            guard let arrival = state.arrivals.first(where: { Int32(bitPattern: $0.rtpTime &- schedule.rtpTime) > -352 && Int32(bitPattern: $0.rtpTime &- schedule.rtpTime) <= 0 }) else { continue }
            let ahead = Double(schedule.hostTime - arrival.hostTime) / 1e9
            #expect(ahead > 1.0 && ahead < 1.7, "frame \(schedule.rtpTime) arrived \(ahead) s before it is to be heard")
        }
        #expect(state.metadata.contains { $0.title == "Pink Noise" && $0.artist == "Tutti Tests" }, "\(state.metadata)")
        #expect(state.metadata.contains { $0.progress != nil })
        #expect(!state.volumes.isEmpty && state.volumes.allSatisfy { (-30...0).contains($0) }, "\(state.volumes)")
    }

    /// Pairing with a PIN, as a household pairs a sender: pyatv's `atvremote pair` asks the
    /// receiver for a PIN, which it shows (to this test, as the house shows it in its log), and
    /// it is typed at pyatv's prompt; then pyatv streams with the credentials it was given,
    /// verified on the connection (pair-verify: X25519 and both sides' Ed25519 signatures), and
    /// the sink is handed the file bit-exact. A wrong PIN pairs nobody; credentials that name a
    /// sender never paired are refused, and nothing reaches the sink; with only paired senders
    /// let in, an unpaired one is refused over AirPlay 2 (transient) and AirPlay 1 alike.
    @Test(.timeLimit(.minutes(3)))
    func pyatvPairsWithAPINThenStreamsVerified() async throws {
        try #require(FileManager.default.isExecutableFile(atPath: Self.atvremote), "pyatv's atvremote is not at \(Self.atvremote): run make test (it makes the venv)")
        let directory = try TemporaryDirectory("airplay2-pin")
        defer { directory.preserveLogs(as: "airplay2-pin"); directory.remove() }
        let music = directory.file("music.wav")
        try TestMedia.ffmpeg(["-f", "lavfi", "-i", "anoisesrc=d=2:c=pink:a=0.3:seed=12", "-af", "pan=stereo|c0=c0|c1=-0.5*c0",
                              "-ar", "44100", "-c:a", "pcm_s16le", music])
        let sink = CollectingSink()
        let lines = Lines()
        let shown = Lines()
        let pairings = try AirPlayPairings(path: directory.file("airplay-pairings.json"))
        var configuration = AirPlayReceiver.Configuration(host: "127.0.0.1", port: 0)
        configuration.accessory = AirPlayAccessory(identity: .random(), identifier: Array("02:11:22:33:44:55".utf8), pairings: pairings) { pin, _ in
            shown.append(pin)
        }
        // Paired senders only (`--airplay-access paired`): AirPlay 1 and transient pairing are refused below.
        configuration.onlyPairedSenders = true
        let receiver = AirPlayReceiver(configuration: configuration, sink: sink, log: { lines.append($0) })
        let port = try await receiver.start()
        defer { Task { await receiver.stop() } }
        // No storage: pyatv's file would keep the credentials for the next run.
        let common = ["--manual", "--address", "127.0.0.1", "--port", "\(port)", "--protocol", "raop", "--id", "tutti-pin-test", "--storage", "none",
                      "--service-properties", Self.serviceProperties(airPlay2: true)]

        /// `atvremote pair`, its PIN prompt answered with what `answer` makes of the PIN shown.
        func pair(log: String, _ answer: @escaping (String) -> String) async throws -> (status: Int32, output: [String]) {
            let before = shown.all.withLock { $0.count }
            let pairing = try ChildProcess(name: "atvremote-pair", executable: Self.atvremote, arguments: common + ["pair"],
                                           standardError: directory.file(log), answers: true)
            // Until the receiver shows a PIN (guarded: atvremote asks within seconds).
            let deadline = ContinuousClock.now + .seconds(30)
            while shown.all.withLock({ $0.count }) == before {
                guard ContinuousClock.now < deadline else { pairing.kill(); throw TestFailure("no PIN was shown within 30 s") }
                try await Task.sleep(for: .milliseconds(5))
            }
            pairing.type(answer(shown.all.withLock { $0.last! }))
            return (await pairing.exit(within: 30), pairing.outputLines)
        }
        let wrong = try await pair(log: "pair-wrong.log") { pin in String(pin.dropLast()) + String((Int(String(pin.last!))! + 1) % 10) }
        #expect(wrong.status != 0 && pairings.all.isEmpty, "a wrong PIN: \(wrong)")
        let right = try await pair(log: "pair.log") { $0 }
        let credentials = try #require(right.output.first { $0.hasPrefix("You may now use these credentials: ") }?.split(separator: " ").last.map(String.init),
                                       "pairing: \(right) \((try? String(contentsOfFile: directory.file("pair.log"), encoding: .utf8))?.suffix(2000) ?? "")")
        #expect(right.status == 0 && pairings.all.count == 1, "\(right)")
        // The pairing is in the state file, for the next start.
        #expect(try AirPlayPairings(path: directory.file("airplay-pairings.json")).all == pairings.all)

        let sender = try ChildProcess(name: "atvremote", executable: Self.atvremote,
                                      arguments: common + ["--raop-credentials", credentials, "stream_file=\(music)"], standardError: directory.file("stream.log"))
        #expect(await sender.exit(within: 60) == 0, "atvremote: \((try? String(contentsOfFile: directory.file("stream.log"), encoding: .utf8))?.suffix(3000) ?? "")")
        let state = sink.state.withLock { $0 }
        let reference = try TestMedia.run("ffmpeg", ["-nostdin", "-loglevel", "error", "-i", music, "-f", "s16le", "-"]).withUnsafeBytes { Array($0.bindMemory(to: Int16.self)) }
        #expect(state.began.count == 1 && state.began.first?.senderName == "pyatv", "\(state.began)")
        #expect(state.samples.count >= reference.count && zip(state.samples, reference).allSatisfy { $0 == $1 }, "the stream differs from the file")
        #expect(lines.all.withLock { $0 }.contains { $0.contains("verified as paired sender") }, "\(lines.all.withLock { $0 })")

        // Unpaired: AirPlay 2's transient pairing and AirPlay 1 are refused, and reach nothing.
        for (airPlay2, log) in [(true, "transient.log"), (false, "airplay1.log")] {
            let unpaired = try ChildProcess(name: "atvremote-unpaired", executable: Self.atvremote,
                                            arguments: ["--manual", "--address", "127.0.0.1", "--port", "\(port)", "--protocol", "raop", "--id", "tutti-unpaired",
                                                        "--storage", "none", "--service-properties", Self.serviceProperties(airPlay2: airPlay2), "stream_file=\(music)"],
                                            standardError: directory.file(log))
            #expect(await unpaired.exit(within: 60) != 0, "an unpaired sender over AirPlay \(airPlay2 ? 2 : 1) was played")
        }
        #expect(sink.state.withLock { $0.began.count } == 1)
        let refusals = lines.all.withLock { $0 }
        #expect(refusals.contains { $0.contains("transient pairing refused") } && refusals.contains { $0.contains("an AirPlay 1 sender") }, "\(refusals)")

        // The same credentials with another sender's identifier: never paired, refused.
        var fields = credentials.split(separator: ":").map(String.init)
        fields[3] = Hex.encode(Array("a stranger".utf8))
        let stranger = try ChildProcess(name: "atvremote-stranger", executable: Self.atvremote,
                                        arguments: common + ["--raop-credentials", fields.joined(separator: ":"), "stream_file=\(music)"],
                                        standardError: directory.file("stranger.log"))
        #expect(await stranger.exit(within: 60) != 0)
        #expect(sink.state.withLock { $0.began.count } == 1)
        #expect(lines.all.withLock { $0 }.contains { $0.contains("is not paired") }, "\(lines.all.withLock { $0 })")
    }

    /// A stranger's bytes: a malformed request is answered 400 and its connection closed; an
    /// encrypted announcement 415; the receiver serves the next connection as before.
    @Test(.timeLimit(.minutes(1)))
    func badRequestsAreRefusedAndTheReceiverCarriesOn() async throws {
        let sink = CollectingSink()
        let lines = Lines()
        let receiver = AirPlayReceiver(configuration: .init(host: "127.0.0.1", port: 0), sink: sink, log: { lines.append($0) })
        let port = try await receiver.start()
        defer { Task { await receiver.stop() } }

        func exchange(_ text: String) async throws -> String {
            let channel = try await ClientBootstrap(group: MultiThreadedEventLoopGroup.singleton)
                .connect(host: "127.0.0.1", port: port) { channel in
                    channel.eventLoop.makeCompletedFuture { try NIOAsyncChannel<ByteBuffer, ByteBuffer>(wrappingChannelSynchronously: channel) }
                }
            return try await channel.executeThenClose { inbound, outbound in
                try await outbound.write(ByteBuffer(string: text))
                var reply = ""
                for try await var chunk in inbound {
                    reply += chunk.readString(length: chunk.readableBytes) ?? ""
                    if reply.contains("\r\n\r\n") { break }
                }
                return reply
            }
        }
        #expect(try await exchange("NONSENSE\r\n\r\n").hasPrefix("RTSP/1.0 400 Bad Request\r\n"))
        let encrypted = "v=0\r\nm=audio 0 RTP/AVP 96\r\na=rtpmap:96 AppleLossless\r\na=fmtp:96 352 0 16 40 10 14 2 255 0 0 44100\r\na=rsaaeskey:AAAA\r\na=aesiv:BBBB\r\n"
        let refused = try await exchange("ANNOUNCE rtsp://127.0.0.1/1 RTSP/1.0\r\nCSeq: 5\r\nContent-Type: application/sdp\r\nContent-Length: \(encrypted.utf8.count)\r\n\r\n" + encrypted)
        #expect(refused.hasPrefix("RTSP/1.0 415 Unsupported Media Type\r\n") && refused.contains("CSeq: 5\r\n"), "\(refused)")
        // AirPlay 2: a SETUP on a connection that has not paired, and a pair-setup asking for a PIN.
        let plist = "bplist00"
        let unpaired = try await exchange("SETUP rtsp://127.0.0.1/1 RTSP/1.0\r\nCSeq: 6\r\nContent-Type: application/x-apple-binary-plist\r\nContent-Length: \(plist.utf8.count)\r\n\r\n" + plist)
        #expect(unpaired.hasPrefix("RTSP/1.0 403 Forbidden\r\n") && unpaired.contains("CSeq: 6\r\n"), "\(unpaired)")
        let m1 = TLV8([(.method, [0]), (.state, [1])]).encoded
        let withPIN = try await exchange("POST /pair-setup RTSP/1.0\r\nCSeq: 7\r\nContent-Type: application/octet-stream\r\nContent-Length: \(m1.count)\r\n\r\n"
                                         + String(decoding: m1, as: UTF8.self))
        #expect(withPIN.hasPrefix("RTSP/1.0 200 OK\r\n") && withPIN.contains("Content-Type: application/pairing+tlv8"), "\(withPIN)")
        let options = try await exchange("OPTIONS * RTSP/1.0\r\nCSeq: 9\r\n\r\n")
        #expect(options.hasPrefix("RTSP/1.0 200 OK\r\n") && options.contains("CSeq: 9\r\n") && options.contains("Public: ANNOUNCE"), "\(options)")
        let log = lines.all.withLock { $0 }
        #expect(log.contains { $0.contains("is not METHOD URI VERSION") } && log.contains { $0.contains("the stream is encrypted (rsaaeskey)") }, "\(log)")
        #expect(log.contains { $0.contains("pair-setup with a PIN is not offered") } && log.contains { $0.contains("has not paired") }, "\(log)")
        #expect(sink.state.withLock { $0.began.isEmpty })
    }
}

/// The receiver against a sender written here, datagram by datagram, on real sockets: what a
/// stranger on the LAN can and cannot do to a stream, a resend, a flush, the one-sender slot.
@Suite struct AirPlayRawSenderTests {
    /// A UDP socket on loopback that keeps what it receives.
    final class Socket: Sendable {
        final class Inbox: Sendable { let datagrams = Mutex<[[UInt8]]>([]) }
        final class Collector: ChannelInboundHandler {
            typealias InboundIn = AddressedEnvelope<ByteBuffer>
            let inbox: Inbox
            init(_ inbox: Inbox) { self.inbox = inbox }
            func channelRead(context: ChannelHandlerContext, data: NIOAny) {
                var buffer = unwrapInboundIn(data).data
                let bytes = buffer.readBytes(length: buffer.readableBytes) ?? []
                inbox.datagrams.withLock { $0.append(bytes) }
            }
        }

        let inbox = Inbox()
        let channel: any Channel

        init() async throws {
            let inbox = self.inbox
            channel = try await DatagramBootstrap(group: MultiThreadedEventLoopGroup.singleton)
                .channelInitializer { channel in channel.eventLoop.makeCompletedFuture { try channel.pipeline.syncOperations.addHandler(Collector(inbox)) } }
                .bind(host: "127.0.0.1", port: 0).get()
        }

        var port: Int { channel.localAddress?.port ?? 0 }
        var received: [[UInt8]] { inbox.datagrams.withLock { $0 } }

        func send(_ packet: RAOPPacket, to port: Int) async throws {
            let address = try SocketAddress(ipAddress: "127.0.0.1", port: port)
            try await channel.writeAndFlush(AddressedEnvelope(remoteAddress: address, data: ByteBuffer(bytes: packet.encoded)))
        }
    }

    /// An RTSP connection that sends a request and reads its reply.
    final class Connection: Sendable {
        final class Inbox: Sendable { let text = Mutex("") }
        final class Collector: ChannelInboundHandler {
            typealias InboundIn = ByteBuffer
            let inbox: Inbox
            init(_ inbox: Inbox) { self.inbox = inbox }
            func channelRead(context: ChannelHandlerContext, data: NIOAny) {
                var buffer = unwrapInboundIn(data)
                let text = buffer.readString(length: buffer.readableBytes) ?? ""
                inbox.text.withLock { $0 += text }
            }
        }

        let inbox = Inbox()
        let channel: any Channel

        init(port: Int) async throws {
            let inbox = self.inbox
            channel = try await ClientBootstrap(group: MultiThreadedEventLoopGroup.singleton)
                .channelInitializer { channel in channel.eventLoop.makeCompletedFuture { try channel.pipeline.syncOperations.addHandler(Collector(inbox)) } }
                .connect(host: "127.0.0.1", port: port).get()
        }

        /// Sends `request` and returns the reply's head (what the receiver sends, up to its blank line).
        func exchange(_ request: RTSPRequest) async throws -> String {
            try await channel.writeAndFlush(ByteBuffer(bytes: request.encoded))
            let deadline = ContinuousClock.now + .seconds(10)
            while true {
                let reply = inbox.text.withLock { text -> String? in
                    guard let end = text.range(of: "\r\n\r\n") else { return nil }
                    defer { text = String(text[end.upperBound...]) }
                    return String(text[..<end.upperBound])
                }
                if let reply { return reply }
                guard ContinuousClock.now < deadline else { throw TestFailure("no reply to \(request.method) within 10 s") }
                try await Task.sleep(for: .milliseconds(2))
            }
        }

        func close() async { try? await channel.close() }
    }

    func waitFor(_ what: String, _ condition: () -> Bool) async throws {
        let deadline = ContinuousClock.now + .seconds(10)
        while !condition() {
            guard ContinuousClock.now < deadline else { throw TestFailure("\(what) did not happen within 10 s") }
            try await Task.sleep(for: .milliseconds(5))
        }
    }

    func audio(_ sequence: UInt16, ssrc: UInt32 = 7) -> RAOPPacket {
        // Each packet's 4 frames hold its sequence number, so the order shows in the samples.
        let value = UInt8(truncatingIfNeeded: sequence)
        return .audio(RAOPAudioPacket(sequence: sequence, timestamp: UInt32(sequence) * 4, ssrc: ssrc, payload: [UInt8](repeating: 0, count: 16).enumerated().map { $0.offset % 2 == 1 ? value : 0 }))
    }

    @Test(.timeLimit(.minutes(1)))
    func aStrangerCannotTakeOrDisturbTheStream() async throws {
        let sink = CollectingSink()
        let lines = AirPlayReceiverTests.Lines()
        let receiver = AirPlayReceiver(configuration: .init(host: "127.0.0.1", port: 0), sink: sink, log: { lines.append($0) })
        let port = try await receiver.start()
        defer { Task { await receiver.stop() } }
        let (audioOut, control, timing, stranger) = (try await Socket(), try await Socket(), try await Socket(), try await Socket())

        let sender = try await Connection(port: port)
        // L16 in packets of 4 frames.
        let body = Array(AirPlayParsingTestsSDP.l16.replacingOccurrences(of: "352 0 16", with: "4 0 16").utf8)
        let sdp = RTSPRequest(method: "ANNOUNCE", uri: "rtsp://127.0.0.1/1", headers: [("CSeq", "1"), ("Content-Type", "application/sdp"), ("Content-Length", "\(body.count)")], body: body)
        #expect(try await sender.exchange(sdp).hasPrefix("RTSP/1.0 200 OK"))
        // A second sender is refused while the first holds the stream.
        let other = try await Connection(port: port)
        #expect(try await other.exchange(sdp).hasPrefix("RTSP/1.0 453 Not Enough Bandwidth"))
        let setup = try await sender.exchange(RTSPRequest(method: "SETUP", uri: "rtsp://127.0.0.1/1", headers: [("CSeq", "2"),
            ("Transport", "RTP/AVP/UDP;unicast;interleaved=0-1;mode=record;control_port=\(control.port);timing_port=\(timing.port)")]))
        let transport = setup.split(separator: "\r\n").first { $0.hasPrefix("Transport: ") }.map { AirPlayReceiverTestsTransport.options(String($0.dropFirst(11))) } ?? [:]
        let (serverPort, controlPort) = (try #require(transport["server_port"].flatMap(Int.init)), try #require(transport["control_port"].flatMap(Int.init)))
        #expect(try await sender.exchange(RTSPRequest(method: "RECORD", uri: "rtsp://127.0.0.1/1", headers: [("CSeq", "3")])).hasPrefix("RTSP/1.0 200 OK"))

        // 0, 1, 3: 2 is asked for at the sender's control port, once; resent from there, it takes its place.
        for sequence: UInt16 in [0, 1, 3] { try await audioOut.send(audio(sequence), to: serverPort) }
        try await waitFor("a resend request") { !control.received.isEmpty }
        #expect(control.received.compactMap(RAOPPacket.init) == [.resendRequest(sequence: 2, count: 1)])
        guard case .audio(let two) = audio(2) else { return }
        var resent = two
        resent.resent = true
        try await control.send(.audio(resent), to: controlPort)
        try await waitFor("four packets") { sink.state.withLock { $0.timestamps.count } == 4 }

        // A stranger with the sender's address but its own port: its audio (even with the
        // stream's SSRC), its resent audio and its sync are all dropped.
        try await stranger.send(audio(4), to: serverPort)
        try await stranger.send(.audio(RAOPAudioPacket(sequence: 5, timestamp: 20, ssrc: 7, payload: [UInt8](repeating: 9, count: 16), resent: true)), to: controlPort)
        try await stranger.send(.sync(RAOPSync(rtpTimeWithoutLatency: 0, ntpTime: NTPTimestamp(1 << 40), rtpTime: 100)), to: controlPort)
        // The sender's own audio with another SSRC is a stranger's too.
        try await audioOut.send(audio(4, ssrc: 8), to: serverPort)
        try await audioOut.send(audio(4), to: serverPort)
        try await waitFor("packet 4") { sink.state.withLock { $0.timestamps.count } == 5 }

        // A flush from 20: packet 5, late, is void; 20 plays.
        #expect(try await sender.exchange(RTSPRequest(method: "FLUSH", uri: "rtsp://127.0.0.1/1", headers: [("CSeq", "4"), ("RTP-Info", "seq=20;rtptime=80")])).hasPrefix("RTSP/1.0 200 OK"))
        try await audioOut.send(audio(5), to: serverPort)
        try await audioOut.send(audio(20), to: serverPort)
        try await waitFor("packet 20") { sink.state.withLock { $0.timestamps.count } == 6 }
        let state = sink.state.withLock { $0 }
        #expect(state.timestamps == [0, 4, 8, 12, 16, 80], "\(state.timestamps)")
        #expect(stride(from: 1, to: state.samples.count, by: 8).map { state.samples[$0] } == [0, 1, 2, 3, 4, 20].map { Int16($0) }, "\(state.samples)")
        #expect(state.schedules.isEmpty && state.flushes == 1)

        // The sender goes: the stream ends, and the next sender may announce.
        await sender.close()
        try await waitFor("the stream's end") { sink.state.withLock { $0.ended.count } == 1 }
        #expect(try await other.exchange(sdp).hasPrefix("RTSP/1.0 200 OK"))
        await other.close()
        let log = lines.all.withLock { $0 }
        #expect(log.contains { $0.contains("another sender is streaming") } && log.contains { $0.contains("audio from another source") }, "\(log)")
        for socket in [audioOut, control, timing, stranger] { try? await socket.channel.close() }
    }
}

extension AirPlayRawSenderTests {
    /// Compressed ALAC, as senders with an encoder send it: FFmpeg's encoder makes the frames
    /// (4096 to a packet: its fixed frame size; AirPlay's are 352, the decoder takes either from
    /// the fmtp), a sender written here sends them, and the receiver's libavcodec decoder gives
    /// back every sample of the file, bit for bit.
    @Test(.timeLimit(.minutes(1)))
    func compressedALACIsDecodedBitExact() async throws {
        let directory = try TemporaryDirectory("airplay-alac")
        defer { directory.remove() }
        let wav = directory.file("in.wav"), m4a = directory.file("alac.m4a"), raw = directory.file("alac.bin")
        try TestMedia.ffmpeg(["-f", "lavfi", "-i", "anoisesrc=d=2:c=pink:a=0.3:seed=5", "-af", "pan=stereo|c0=c0|c1=-0.6*c0",
                              "-ar", "44100", "-c:a", "pcm_s16le", wav])
        try TestMedia.ffmpeg(["-i", wav, "-c:a", "alac", m4a])
        try TestMedia.ffmpeg(["-i", m4a, "-map", "0:a", "-c", "copy", "-f", "data", raw])
        let sizes = String(decoding: try TestMedia.run("ffprobe", ["-v", "error", "-select_streams", "a", "-show_entries", "packet=size", "-of", "csv=p=0", m4a]), as: UTF8.self)
            .split(separator: "\n").compactMap { Int($0.trimmingCharacters(in: .whitespaces)) }
        let bytes = [UInt8](try Data(contentsOf: URL(fileURLWithPath: raw)))
        #expect(sizes.reduce(0, +) == bytes.count)
        var packets: [[UInt8]] = [], offset = 0
        for size in sizes {
            packets.append(Array(bytes[offset..<(offset + size)]))
            offset += size
        }
        let reference = try TestMedia.run("ffmpeg", ["-nostdin", "-loglevel", "error", "-i", wav, "-f", "s16le", "-"]).withUnsafeBytes { Array($0.bindMemory(to: Int16.self)) }

        let sink = CollectingSink()
        let lines = AirPlayReceiverTests.Lines()
        let receiver = AirPlayReceiver(configuration: .init(host: "127.0.0.1", port: 0), sink: sink, log: { lines.append($0) })
        let port = try await receiver.start()
        defer { Task { await receiver.stop() } }
        let (audioOut, control, timing) = (try await Socket(), try await Socket(), try await Socket())
        let sender = try await Connection(port: port)
        let body = Array(("v=0\r\no=iTunes 1 0 IN IP4 127.0.0.1\r\ns=iTunes\r\nc=IN IP4 127.0.0.1\r\nt=0 0\r\nm=audio 0 RTP/AVP 96\r\n"
                          + "a=rtpmap:96 AppleLossless\r\na=fmtp:96 4096 0 16 40 10 14 2 255 0 0 44100\r\n").utf8)
        let sdp = RTSPRequest(method: "ANNOUNCE", uri: "rtsp://127.0.0.1/1", headers: [("CSeq", "1"), ("Content-Type", "application/sdp"), ("Content-Length", "\(body.count)")], body: body)
        #expect(try await sender.exchange(sdp).hasPrefix("RTSP/1.0 200 OK"))
        let setup = try await sender.exchange(RTSPRequest(method: "SETUP", uri: "rtsp://127.0.0.1/1", headers: [("CSeq", "2"),
            ("Transport", "RTP/AVP/UDP;unicast;interleaved=0-1;mode=record;control_port=\(control.port);timing_port=\(timing.port)")]))
        let transport = setup.split(separator: "\r\n").first { $0.hasPrefix("Transport: ") }.map { AirPlayReceiverTestsTransport.options(String($0.dropFirst(11))) } ?? [:]
        let serverPort = try #require(transport["server_port"].flatMap(Int.init))
        #expect(try await sender.exchange(RTSPRequest(method: "RECORD", uri: "rtsp://127.0.0.1/1", headers: [("CSeq", "3")])).hasPrefix("RTSP/1.0 200 OK"))
        // One at a time, each once the one before was handed on: a burst of 12 KB datagrams
        // could overflow a socket's buffer, which would be the test's loss, not the receiver's.
        for (index, packet) in packets.enumerated() {
            try await audioOut.send(.audio(RAOPAudioPacket(sequence: UInt16(index), timestamp: UInt32(index) * 4096, ssrc: 7, payload: packet)), to: serverPort)
            try await waitFor("packet \(index)") { sink.state.withLock { $0.timestamps.count } == index + 1 }
        }
        let state = sink.state.withLock { $0 }
        #expect(state.samples.count == reference.count, "\(state.samples.count) samples for a file of \(reference.count)")
        let differing = zip(state.samples, reference).filter { $0 != $1 }.count
        #expect(differing == 0, "\(differing) of \(reference.count) samples differ")
        #expect(!lines.all.withLock { $0 }.contains { $0.contains("cannot be decoded") }, "\(lines.all.withLock { $0 })")
        await sender.close()
        for socket in [audioOut, control, timing] { try? await socket.channel.close() }
    }
}

enum AirPlayParsingTestsSDP {
    static let l16 = "v=0\r\no=iTunes 1 0 IN IP4 127.0.0.1\r\ns=iTunes\r\nc=IN IP4 127.0.0.1\r\nt=0 0\r\nm=audio 0 RTP/AVP 96\r\n"
        + "a=rtpmap:96 L16/44100/2\r\na=fmtp:96 352 0 16 40 10 14 2 255 0 0 44100\r\n"
}

enum AirPlayReceiverTestsTransport {
    static func options(_ header: String) -> [String: String] { RAOPConnectionHandler.transportOptions(header) }
}

/// The sender's volume as the group's: the level heard is the level sent (the rooms' scale is
/// 0.6 dB a percent below 100 %).
@Suite struct GroupAirPlaySinkTests {
    @Test func aSendersDecibelsAreTheGroupsPercentAtTheSameLevel() {
        #expect(GroupAirPlaySink.percent(decibels: 0) == 100)
        #expect(GroupAirPlaySink.percent(decibels: -15) == 75)
        #expect(GroupAirPlaySink.percent(decibels: -20) == 67)
        #expect(GroupAirPlaySink.percent(decibels: -30) == 50)
        #expect(GroupAirPlaySink.percent(decibels: -144) == 0)
        #expect(GroupAirPlaySink.percent(decibels: 3) == 100)
        for percent in 50...100 {
            let decibels = Double(percent - 100) * 0.6
            #expect(GroupAirPlaySink.percent(decibels: decibels) == percent)
        }
    }
}
