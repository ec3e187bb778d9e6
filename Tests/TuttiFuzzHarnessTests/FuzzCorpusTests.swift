import Foundation
import NIOCore
import Testing
import TuttiFuzzHarness
import TuttiMedia
import TuttiProtocol
import TuttiTestSupport

/// The fuzz targets' inputs, replayed through the same harness functions in the normal build:
/// every committed seed (Fuzz/Corpus) and every input that ever crashed a target
/// (Fuzz/FailCases) must pass, so a regression or a harness that no longer compiles against the
/// product's API fails `make test`, not only the next fuzzing run.
@Suite struct FuzzCorpusTests {
    static let fuzzDirectory = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
        .deletingLastPathComponent().deletingLastPathComponent().appendingPathComponent("Fuzz")

    static func files(_ kind: String, _ target: String) -> [URL] {
        let directory = fuzzDirectory.appendingPathComponent(kind).appendingPathComponent(target)
        let names = (try? FileManager.default.contentsOfDirectory(atPath: directory.path)) ?? []
        return names.filter { !$0.hasPrefix(".") }.sorted().map { directory.appendingPathComponent($0) }
    }

    @Test(arguments: FuzzHarness.targets.keys.sorted())
    func everySeedAndFailCasePasses(target: String) throws {
        let harness = try #require(FuzzHarness.targets[target])
        let seeds = Self.files("Corpus", target)
        #expect(!seeds.isEmpty, "no seeds in Fuzz/Corpus/\(target)")
        #expect(FileManager.default.fileExists(atPath: Self.fuzzDirectory.appendingPathComponent("Targets/\(target)/main.swift").path))
        for file in seeds + Self.files("FailCases", target) {
            let bytes = try [UInt8](Data(contentsOf: file))
            // A closure with typed throws through `withUnsafeBytes` crashed swift-frontend 6.3.1
            // (IRGen, signal 6): the result is carried out instead.
            let failure = bytes.withUnsafeBytes { data -> FuzzFailure? in
                do { try harness(data); return nil } catch { return error as? FuzzFailure }
            }
            if let failure { Issue.record("\(target) \(file.lastPathComponent): \(failure)") }
        }
    }

    /// The seeds stay small: libFuzzer's default input limit follows the largest seed.
    @Test func theCorpusIsSmall() {
        var total = 0
        for target in FuzzHarness.targets.keys {
            let seeds = Self.files("Corpus", target)
            #expect(seeds.count <= 40, "\(target): \(seeds.count) seeds")
            for file in seeds {
                let size = (try? FileManager.default.attributesOfItem(atPath: file.path)[.size] as? Int) ?? 0
                #expect(size <= 8192, "\(target)/\(file.lastPathComponent): \(size) bytes")
                total += size
            }
        }
        #expect(total < 512 * 1024)
    }

    /// The harness builds the STREAMINFO the encoder sends (the encoder's own is internal).
    @Test(arguments: [(48000, 2), (44100, 1), (8000, 8), (655340, 3)])
    func theHarnessStreamInfoIsTheEncoders(rate: Int, channels: Int) throws {
        let encoder = try ChunkEncoder(codec: .flac, sampleRate: rate, channelCount: channels)
        #expect(FuzzHarness.streamInfo(sampleRate: rate, channelCount: channels) == encoder.codecHeader)
    }

    /// Mutated FLAC packets with their checksums fixed up decode as far as their frame allows;
    /// an encoder's own packet is unchanged by the fix-up.
    @Test func checksumFixUpKeepsAValidPacket() throws {
        let encoder = try ChunkEncoder(codec: .flac, sampleRate: 44100, channelCount: 2)
        let samples = (0..<512).map { Float(sin(Double($0) * 0.05) * 0.5) }
        let packet = try encoder.encode(samples, frames: 256)
        var fixed = packet
        FuzzHarness.fixFLACChecksums(&fixed)
        #expect(fixed == packet)
    }
}

/// What fuzz-chunkdecoder found (Fuzz/FailCases/fuzz-chunkdecoder/foreign-rate-frame-poisons-next.bin),
/// in the encoder's own packets.
@Suite struct ChunkDecoderRecoveryTests {
    @Test func aRefusedFrameOfAnotherRateDoesNotDisturbTheNext() throws {
        let samples = FuzzSeedWriter.tone(frames: 256, channels: 2)
        // A good packet whose header leaves the sample rate to STREAMINFO (rate code 0).
        var good = try ChunkEncoder(codec: .flac, sampleRate: 48000, channelCount: 2).encode(samples, frames: 256)
        good[2] &= 0xF0
        FuzzHarness.fixFLACChecksums(&good)
        // A valid frame of another stream: 8000 Hz, stated in its header.
        let foreign = try ChunkEncoder(codec: .flac, sampleRate: 8000, channelCount: 2).encode(samples, frames: 256)

        let decoder = try ChunkDecoder(codec: .flac, sampleRate: 48000, channelCount: 2,
                                       codecHeader: FuzzHarness.streamInfo(sampleRate: 48000, channelCount: 2))
        var before: [Float] = []
        #expect(try decoder.decode(good, into: &before) == 256)
        var output: [Float] = []
        #expect(throws: MediaError(.corrupt, input: "flac stream", reason: "packet is 8000 Hz, stream is 48000 Hz")) {
            try decoder.decode(foreign, into: &output)
        }
        var after: [Float] = []
        #expect(try decoder.decode(good, into: &after) == 256)
        #expect(after == before)
    }
}

/// Writes the seed corpora with the real encoders: `TUTTI_FUZZ_WRITE_SEEDS=1 swift test
/// --filter FuzzSeedWriter` (scripts/fuzz.sh seeds). Replaces Fuzz/Corpus/<target>/ for every
/// target; review the diff before committing.
@Suite(.enabled(if: ProcessInfo.processInfo.environment["TUTTI_FUZZ_WRITE_SEEDS"] != nil))
struct FuzzSeedWriter {
    static func write(_ target: String, _ seeds: [(String, [UInt8])]) throws {
        let directory = FuzzCorpusTests.fuzzDirectory.appendingPathComponent("Corpus").appendingPathComponent(target)
        try? FileManager.default.removeItem(at: directory)
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        for (name, bytes) in seeds {
            try Data(bytes).write(to: directory.appendingPathComponent(name))
        }
    }

    static func frames(_ messages: [WireMessage]) -> [UInt8] {
        var buffer = ByteBuffer()
        for message in messages { message.encode(into: &buffer) }
        return Array(buffer.readableBytesView)
    }

    static func tone(frames: Int, channels: Int, amplitude: Float = 0.5) -> [Float] {
        (0..<frames * channels).map { i in
            let frame = i / channels, channel = i % channels
            return amplitude * Float(sin(Double(frame) * 0.03 * Double(channel + 1)))
        }
    }

    /// pyatv's RTSP session, request by request as it sends them, and the session whole.
    @Test func rtsp() throws {
        let sdp = "v=0\r\no=iTunes 3413821438 0 IN IP4 127.0.0.1\r\ns=iTunes\r\nc=IN IP4 127.0.0.1\r\nt=0 0\r\nm=audio 0 RTP/AVP 96\r\n"
            + "a=rtpmap:96 L16/44100/2\r\na=fmtp:96 352 0 16 40 10 14 2 255 0 0 44100\r\n"
        func request(_ method: String, _ uri: String, _ cseq: Int, _ headers: [(String, String)] = [], body: [UInt8] = []) -> RTSPRequest {
            var all: [(name: String, value: String)] = [("CSeq", "\(cseq)"), ("DACP-ID", "A851074254310A45"), ("Active-Remote", "4019753970"),
                                                        ("Client-Instance", "A851074254310A45"), ("User-Agent", "AirPlay/550.10")]
            all += headers.map { (name: $0.0, value: $0.1) }
            if !body.isEmpty { all.append((name: "Content-Length", value: "\(body.count)")) }
            return RTSPRequest(method: method, uri: uri, headers: all, body: body)
        }
        let dmap = Array("minm".utf8) + [0, 0, 0, 4] + Array("Song".utf8) + Array("asar".utf8) + [0, 0, 0, 6] + Array("Artist".utf8)
        let session: [(String, RTSPRequest)] = [
            ("info", request("GET", "/info", 0)),
            ("announce", request("ANNOUNCE", "rtsp://127.0.0.1/3413821438", 1, [("Content-Type", "application/sdp")], body: Array(sdp.utf8))),
            ("setup", request("SETUP", "rtsp://127.0.0.1/3413821438", 2, [("Transport", "RTP/AVP/UDP;unicast;interleaved=0-1;mode=record;control_port=49152;timing_port=49153")])),
            ("record", request("RECORD", "rtsp://127.0.0.1/3413821438", 3, [("Range", "npt=0-"), ("Session", "1"), ("RTP-Info", "seq=1234;rtptime=5678")])),
            ("volume", request("SET_PARAMETER", "rtsp://127.0.0.1/3413821438", 4, [("Content-Type", "text/parameters")], body: Array("volume: -11.5".utf8))),
            ("metadata", request("SET_PARAMETER", "rtsp://127.0.0.1/3413821438", 5, [("Content-Type", "application/x-dmap-tagged")], body: Array("mlit".utf8) + [0, 0, 0, UInt8(dmap.count)] + dmap)),
            ("progress", request("SET_PARAMETER", "rtsp://127.0.0.1/3413821438", 6, [("Content-Type", "text/parameters")], body: Array("progress: 1000/45100/133300".utf8))),
            ("flush", request("FLUSH", "rtsp://127.0.0.1/3413821438", 7, [("Session", "1"), ("RTP-Info", "seq=1300;rtptime=30000")])),
            ("feedback", request("POST", "/feedback", 8)),
            ("teardown", request("TEARDOWN", "rtsp://127.0.0.1/3413821438", 9, [("Session", "1")])),
        ]
        var seeds = session.map { ("\($0.0).bin", $0.1.encoded) }
        seeds.append(("session.bin", session.flatMap { $0.1.encoded }))
        seeds.append(("alac-announce.bin", request("ANNOUNCE", "rtsp://10.0.0.3/1", 1, [("Content-Type", "application/sdp")],
                                                   body: Array(sdp.replacingOccurrences(of: "L16/44100/2", with: "AppleLossless").utf8)).encoded))
        try Self.write("fuzz-rtsp", seeds)
    }

    /// A receiver's datagrams from pyatv: audio (L16, and an uncompressed ALAC frame), a
    /// resend, sync and timing, each with its 16-bit length, and a run of them out of order.
    @Test func raop() throws {
        func framed(_ packets: [RAOPPacket]) -> [UInt8] {
            packets.flatMap { packet -> [UInt8] in let bytes = packet.encoded; return [UInt8(bytes.count >> 8), UInt8(bytes.count & 0xFF)] + bytes }
        }
        let l16 = (0..<352 * 2).flatMap { i -> [UInt8] in let value = UInt16(bitPattern: Int16(truncatingIfNeeded: i * 37)); return [UInt8(value >> 8), UInt8(value & 0xFF)] }
        // CPE (001), tag 0, 12 unused bits, no size, no shift, the escape bit; the samples; END.
        var bits: [Bool] = [false, false, true] + [Bool](repeating: false, count: 4 + 12 + 1 + 2) + [true]
        for sample in 0..<(352 * 2) { for bit in (0..<16).reversed() { bits.append((UInt16(bitPattern: Int16(truncatingIfNeeded: sample * 91)) >> UInt16(bit)) & 1 == 1) } }
        bits += [true, true, true]
        while bits.count % 8 != 0 { bits.append(false) }
        let alac = stride(from: 0, to: bits.count, by: 8).map { start in bits[start..<start + 8].reduce(UInt8(0)) { $0 << 1 | ($1 ? 1 : 0) } }
        let short = Array(l16.prefix(16 * 4))
        func audio(_ sequence: UInt16, _ payload: [UInt8], resent: Bool = false) -> RAOPPacket {
            .audio(RAOPAudioPacket(sequence: sequence, timestamp: UInt32(sequence) &* 352, ssrc: 0x0BAD_CAFE, marker: sequence == 65534, payload: payload, resent: resent))
        }
        let sync = RAOPPacket.sync(RAOPSync(rtpTimeWithoutLatency: 1_000, ntpTime: NTPTimestamp(0xE8F0_0000_4000_0000), rtpTime: 67_150, isFirst: true))
        let timing = RAOPPacket.timingReply(RAOPTimingReply(originate: NTPTimestamp(0x1234_0000_0000), receive: NTPTimestamp(0xE8F0_0000_0000_0000), transmit: NTPTimestamp(0xE8F0_0000_0001_0000)))
        try Self.write("fuzz-raop", [
            ("audio-l16.bin", framed([audio(7, l16)])),
            ("audio-alac.bin", framed([audio(8, alac)])),
            ("resent.bin", framed([audio(9, l16, resent: true)])),
            ("sync.bin", framed([sync])),
            ("timing.bin", framed([timing, .timingRequest(sendTime: NTPTimestamp(99))])),
            ("resend-request.bin", framed([.resendRequest(sequence: 65535, count: 2)])),
            // Short payloads (16 frames), so the run stays within the corpus's 8 KiB a seed.
            ("out-of-order.bin", framed([audio(65534, short), audio(1, short), sync, audio(65535, short, resent: true), audio(2, short), audio(0, short), audio(2, short)])),
        ])
    }

    /// What pyatv sends before its AirPlay 2 audio: its transient pair-setup (M1, M3) and its
    /// two SETUP bodies.
    @Test func airPlay2() throws {
        func plist(_ object: Any) throws -> [UInt8] {
            Array(try PropertyListSerialization.data(fromPropertyList: object, format: .binary, options: 0))
        }
        try Self.write("fuzz-airplay2", [
            ("pair-setup-m1.bin", TLV8([(.method, [0]), (.state, [1]), (.flags, [0x10])]).encoded),
            ("pair-setup-m3.bin", TLV8([(.state, [3]), (.publicKey, (0..<384).map { UInt8(truncatingIfNeeded: $0 * 13) }), (.proof, Array(repeating: 0x5A, count: 64))]).encoded),
            ("setup-session.bin", try plist(["deviceID": "AA:BB:CC:DD:EE:FF", "sessionUUID": "B0D7", "timingPort": 6002, "timingProtocol": "NTP",
                                             "isMultiSelectAirPlay": true, "model": "iPhone14,3", "name": "pyatv"])),
            ("setup-stream.bin", try plist(["streams": [["audioFormat": 0x800, "audioMode": "default", "controlPort": 6001, "ct": 1, "isMedia": true,
                                                         "latencyMax": 88200, "latencyMin": 11025, "shk": Data(repeating: 7, count: 32), "spf": 352,
                                                         "sr": 44100, "type": 96, "supportsDynamicStreamID": false, "streamConnectionID": 1_234_567]]])),
        ])
    }

    @Test func wire() throws {
        let flac = try ChunkEncoder(codec: .flac, sampleRate: 48000, channelCount: 2)
        let chunk = try flac.encode(Self.tone(frames: 64, channels: 2), frames: 64)
        let start = WireMessage.streamStart(.init(streamID: 7, codec: "flac", sampleRate: 48000, channelCount: 2, codecHeader: flac.codecHeader, epoch: 2))
        let messages: [(String, WireMessage)] = [
            ("hello-speaker", .hello(.init(role: .speaker, name: "kitchen", codecs: ["flac", "pcm-f32le"], latencyNanoseconds: 2_500_000,
                                           outputLeadNanoseconds: 95_000_000))),
            ("hello-resume", .hello(.init(role: .speaker, name: "hall", codecs: ["flac"], latencyNanoseconds: 0,
                                          resume: .init(streamID: 7, epoch: 3, held: [0..<4096, 8192..<16384, 20000..<20001])))),
            ("hello-controller", .hello(.init(role: .controller, name: "ctl"))),
            ("welcome", .welcome(.init(serverName: "house", clientID: 42, challenge: Array(0..<32)))),
            ("authenticate", .authenticate(proof: Array(32..<64))),
            ("admission-waiting", .admission(.init(isAdmitted: false, code: "372 737"))),
            ("admission-admitted", .admission(.init(isAdmitted: true))),
            ("stream-start-flac", start),
            ("stream-start-pcm", .streamStart(.init(streamID: 8, codec: "pcm-f32le", sampleRate: 44100, channelCount: 1, codecHeader: []))),
            ("audio-chunk", .audioChunk(.init(streamID: 7, firstFrame: 96000, frameCount: 64, payload: chunk))),
            ("anchor-playing", .anchor(.init(streamID: 7, timelineFrame: 0, serverTime: 1_700_000_000_000_000_000, isPlaying: true))),
            ("anchor-paused", .anchor(.init(streamID: 7, timelineFrame: 123_456, serverTime: -5, isPlaying: false))),
            ("flush-all", .flush(.init(streamID: 7, fromFrame: .min, epoch: 4))),
            ("stream-end", .streamEnd(.init(streamID: 7, endFrame: 4_800_000))),
            ("volume", .volume(.init(level: 0.75, rampNanoseconds: 50_000_000))),
            ("room-settings", .roomSettings(.init(name: "Küche links", latencyNanoseconds: 80_000_000))),
            ("room-settings-right", .roomSettings(.init(name: "Küche rechts", latencyNanoseconds: 0, channelMode: .right))),
            ("speaker-status", .speakerStatus(.init(state: .playing, streamID: 7, playheadFrame: 4800, bufferedUntilFrame: 96000,
                                                    syncErrorNanoseconds: -1200, clockErrorNanoseconds: 300, underruns: 1,
                                                    fillRate: 3.5, problem: "chunk 12: CRC mismatch"))),
            ("control-request", .controlRequest(.init(requestID: 1, json: ControlJSON.encode(ControlCommand.volume(room: "kitchen", percent: 40))))),
            ("control-response", .controlResponse(.init(requestID: 1, ok: false, json: ControlJSON.encode(ControlRefusal("no room \"x\""))))),
            ("goodbye", .goodbye(reason: "server shutting down")),
        ]
        var seeds = messages.map { ("\($0.0).bin", Self.frames([$0.1])) }
        let conversation = Self.frames([start, .audioChunk(.init(streamID: 7, firstFrame: 0, frameCount: 64, payload: chunk)),
                                        .anchor(.init(streamID: 7, timelineFrame: 0, serverTime: 10, isPlaying: true)),
                                        .volume(.init(level: 1, rampNanoseconds: 0)), .streamEnd(.init(streamID: 7, endFrame: 64))])
        seeds.append(("conversation.bin", conversation))
        seeds.append(("conversation-cut.bin", Array(conversation.prefix(conversation.count - 5))))
        try Self.write("fuzz-wire", seeds)
    }

    /// What snapclient 0.26 sends the house (hello, time probes, client info) and what the
    /// house sends it, one message per seed, and a session.
    @Test func snapcast() throws {
        func bytes(_ messages: [SnapcastMessage]) -> [UInt8] {
            var buffer = ByteBuffer()
            for message in messages { message.write(to: &buffer) }
            return Array(buffer.readableBytesView)
        }
        var hello = SnapcastHello(hostName: "kitchen-pi", id: "00:11:22:33:44:55", mac: "00:11:22:33:44:55")
        hello.arch = "x86_64"
        hello.os = "Debian GNU/Linux 12 (bookworm)"
        hello.version = "0.26.0"
        let sent = SnapcastMessage.Time(seconds: 1_700_000, microseconds: 123_456)
        let messages: [(String, SnapcastMessage)] = [
            ("hello", SnapcastMessage(id: 1, sent: sent, payload: .hello(hello))),
            ("hello-host-id", SnapcastMessage(id: 1, sent: sent, payload: .hello(SnapcastHello(hostName: "pi", id: "Küche", instance: 2)))),
            ("time", SnapcastMessage(id: 2, sent: sent, payload: .time(latency: .init(seconds: 0, microseconds: 0)))),
            ("time-reply", SnapcastMessage(id: 3, refersTo: 2, sent: sent, received: sent, payload: .time(latency: .init(seconds: -1, microseconds: 999_000)))),
            ("client-info", SnapcastMessage(id: 4, payload: .clientInfo(volume: 35, muted: true))),
            ("server-settings", SnapcastMessage(id: 5, payload: .serverSettings(.init(bufferMs: 1000, latency: 20, muted: false, volume: 80)))),
            ("codec-header-pcm", SnapcastMessage(payload: .codecHeader(codec: "pcm", header: SnapcastMessage.pcmHeader(sampleRate: 48000, channelCount: 2)))),
            ("wire-chunk", SnapcastMessage(payload: .wireChunk(timestamp: sent, data: (0..<64).map { UInt8($0 * 5 & 0xFF) }))),
            ("stream-tags", SnapcastMessage(payload: .other(kind: 6, bytes: Array("{\"TITLE\":\"x\"}".utf8)))),
        ]
        var seeds = messages.map { ("\($0.0).bin", bytes([$0.1])) }
        let session = bytes(messages.map(\.1))
        seeds.append(("session.bin", session))
        seeds.append(("session-cut.bin", Array(session.prefix(session.count - 7))))
        try Self.write("fuzz-snapcast", seeds)
    }

    /// What Snapcast's controllers send (Home Assistant's library, Snapweb): each method with
    /// its params, a notification, a batch, and broken ones.
    @Test func jsonRPC() throws {
        func text(_ string: String) -> [UInt8] { Array(string.utf8) }
        try Self.write("fuzz-jsonrpc", [
            ("get-status.json", text(#"{"id":1,"jsonrpc":"2.0","method":"Server.GetStatus"}"#)),
            ("rpc-version.json", text(#"{"id":"a","jsonrpc":"2.0","method":"Server.GetRPCVersion"}"#)),
            ("client-volume.json", text(#"{"id":8,"jsonrpc":"2.0","method":"Client.SetVolume","params":{"id":"00:21:6a:7d:74:fc#2","volume":{"muted":false,"percent":74}}}"#)),
            ("client-latency.json", text(#"{"id":7,"jsonrpc":"2.0","method":"Client.SetLatency","params":{"id":"kitchen","latency":10}}"#)),
            ("client-name.json", text(#"{"id":6,"jsonrpc":"2.0","method":"Client.SetName","params":{"id":"kitchen","name":"Küche"}}"#)),
            ("group-mute.json", text(#"{"id":5,"jsonrpc":"2.0","method":"Group.SetMute","params":{"id":"4dcc4e3b-c699-a04b-7f0c-8260d23c43e1","mute":true}}"#)),
            ("group-stream.json", text(#"{"id":4,"jsonrpc":"2.0","method":"Group.SetStream","params":{"id":"4dcc4e3b","stream_id":"stream 1"}}"#)),
            ("group-clients.json", text(#"{"id":3,"jsonrpc":"2.0","method":"Group.SetClients","params":{"clients":["a","b"],"id":"4dcc4e3b"}}"#)),
            ("stream-control.json", text(#"{"id":2,"jsonrpc":"2.0","method":"Stream.Control","params":{"command":"seek","id":"default","params":{"offset":-10.5}}}"#)),
            ("stream-property.json", text(#"{"id":9,"jsonrpc":"2.0","method":"Stream.SetProperty","params":{"id":"default","property":"volume","value":50}}"#)),
            ("notification.json", text(#"{"jsonrpc":"2.0","method":"Client.SetName","params":{"id":"x","name":"y"}}"#)),
            ("batch.json", text(#"[{"id":1,"jsonrpc":"2.0","method":"Server.GetStatus"},{"id":2,"jsonrpc":"2.0","method":"Group.GetStatus","params":{"id":"g"}},1,{"jsonrpc":"2.0"}]"#)),
            ("empty-batch.json", text("[]")),
            ("cut.json", text(#"{"id":1,"jsonrpc":"2.0","method":"Server.Get"#)),
            ("numbers.json", text(#"{"id":1e2,"jsonrpc":"2.0","method":"Client.SetLatency","params":{"id":"k","latency":-0.0}}"#)),
        ])
    }

    /// HTTP API bodies: byte 0 picks the route's command (`FuzzHarness.routeCommands`), byte 1
    /// the path's fields, the rest is the body.
    @Test func httpBody() throws {
        func seed(_ command: String?, _ fields: UInt8, _ body: String) -> [UInt8] {
            [UInt8(FuzzHarness.routeCommands.firstIndex(of: command)!), fields] + Array(body.utf8)
        }
        try Self.write("fuzz-httpbody", [
            ("control-play.bin", seed(nil, 0, #"{"command":"play","files":["/music/a.flac","http://radio.example/stream"],"rooms":["kitchen"]}"#)),
            ("control-group.bin", seed(nil, 0, #"{"command":"pause","group":"Radio"}"#)),
            ("play.bin", seed("play", 0, #"{"files":["/music/b.flac"]}"#)),
            ("volume-room.bin", seed("volume", 1, #"{"percent":40}"#)),
            ("seek.bin", seed("seek", 0, #"{"seconds":12.5}"#)),
            ("admit-code.bin", seed("admit", 0, #"{"code":"372 737","speaker":"hall"}"#)),
            ("queue-move.bin", seed("queue-move", 0, #"{"from":1,"to":0}"#)),
            ("queue-play-index.bin", seed("queue-play", 2, "")),
            ("group-create.bin", seed("group-create", 3, "{}")),
            ("library-search.bin", seed("library-search", 0, #"{"query":"bach","limit":20}"#)),
            ("play-modes.bin", seed("play-modes", 0, #"{"repeat":true,"random":false,"single":"oneshot"}"#)),
            ("not-an-object.bin", seed("stop", 0, "[1,2]")),
            ("empty-body.bin", seed("status", 0, "")),
        ])
    }

    @Test func lines() throws {
        // Byte 0: the longest line less one; byte 1: the piece size.
        try Self.write("fuzz-lines", [
            ("mpd-session.bin", [63, 3] + Array("status\ncommand_list_begin\nadd \"a b.flac\"\ncommand_list_end\nidle player\nnoidle\n".utf8)),
            ("snapcast-crlf.bin", [255, 7] + Array("{\"id\":1,\"jsonrpc\":\"2.0\",\"method\":\"Server.GetStatus\"}\r\n".utf8)),
            ("too-long.bin", [3, 0] + Array("abcd\nef\n".utf8)),
            ("unended.bin", [15, 1] + Array("ping\npartial".utf8)),
            ("empty-lines.bin", [0, 2] + Array("\n\n\n".utf8)),
        ])
    }

    @Test func icy() throws {
        func block(_ text: String) -> [UInt8] {
            let bytes = Array(text.utf8)
            let padded = bytes + [UInt8](repeating: 0, count: (16 - bytes.count % 16) % 16)
            return [UInt8(padded.count / 16)] + padded
        }
        let audio = (0..<16).map { UInt8($0) }
        // Bytes 0-1: the interval less one (16 here); byte 2: the pieces' seed.
        try Self.write("fuzz-icy", [
            ("title.bin", [0, 15, 7] + audio + block("StreamTitle='Artist - It's Here';StreamUrl='';") + audio + [0] + audio),
            ("empty-blocks.bin", [0, 15, 1] + audio + [0] + audio + [0] + audio),
            ("cut-in-block.bin", [0, 15, 3] + audio + block("StreamTitle='Cut';").prefix(9)),
            ("no-title.bin", [0, 15, 9] + audio + block("StreamUrl='http://example.com/';") + audio),
        ])
    }

    @Test func secure() throws {
        // Byte 0: the pieces' size. A client hello: "TTSC", version 1, role, an X25519 key (the
        // curve's base point, 9) and a commitment.
        func hello(_ role: UInt8) -> [UInt8] {
            Array("TTSC".utf8) + [1, role] + [9] + [UInt8](repeating: 0, count: 31) + (0..<32).map { UInt8($0 * 7 & 0xFF) }
        }
        let record: [UInt8] = [0, 0, 0, 16] + [UInt8](repeating: 0xA5, count: 16)
        try Self.write("fuzz-secure", [
            ("speaker-hello.bin", [7] + hello(1)),
            ("controller-hello-record.bin", [13] + hello(2) + record),
            ("old-client.bin", [0] + Array("TT".utf8) + [6, 1] + [UInt8](repeating: 0, count: 66)),
            ("oversized-record.bin", [3] + hello(1) + [0x7F, 0xFF, 0xFF, 0xFF]),
            ("two-records.bin", [63] + hello(1) + record + record),
        ])
    }

    @Test func mpd() throws {
        try Self.write("fuzz-mpd", [
            ("bare.txt", Array("setvol 50".utf8)),
            ("quoted.txt", Array(#"find "(artist == \"AC/DC\")" sort Album"#.utf8)),
            ("escapes.txt", Array(#"add "dir with \"quotes\" and \\ back\\slash/a.flac""#.utf8)),
            ("tabs.txt", Array("playid\t\t3".utf8)),
            ("empty-quoted.txt", Array(#"save """#.utf8)),
            ("unclosed.txt", Array(#"add "a.flac"#.utf8)),
            ("no-space.txt", Array(#"add "a"b"#.utf8)),
            ("unicode.txt", Array("find title \"Für Elise 🎹\"".utf8)),
        ])
    }

    @Test func clockSync() throws {
        try Self.write("fuzz-clocksync", [
            ("request.bin", ClockSyncPacket(isReply: false, sequence: 1, clientSend: 1_000_000).encoded(key: FuzzHarness.clockSyncSeedKey)),
            ("reply.bin", ClockSyncPacket(isReply: true, sequence: 1, clientSend: 1_000_000, serverReceive: 5_000_123, serverSend: 5_000_456)
                .encoded(key: FuzzHarness.clockSyncSeedKey)),
            ("reply-extremes.bin", ClockSyncPacket(isReply: true, sequence: .max, clientSend: .min, serverReceive: .max, serverSend: -1)
                .encoded(key: FuzzHarness.clockSyncSeedKey)),
            ("untagged.bin", ClockSyncPacket(isReply: false, sequence: 7, clientSend: 9).encoded()),
        ])
    }

    @Test func control() throws {
        let commands: [ControlCommand] = [
            .play(files: ["/music/a.flac", "http://radio.invalid/stream.m3u8"], rooms: ["kitchen", "hall"]), .play(files: ["-"]),
            .pause, .resume, .seek(seconds: 12.5), .next, .rooms, .join(room: "kitchen"), .leave(room: "hall"),
            .volume(room: "kitchen", percent: 40), .queue, .queueAdd(file: "/music/b.mp3", at: 1), .queueAdd(file: "c.opus"),
            .queueRemove(index: 2), .queueMove(from: 0, to: 3), .status,
        ]
        var seeds = commands.enumerated().map { ("\($0.offset)-\($0.element.name).json", Array(ControlJSON.encode($0.element).utf8)) }
        // Refused shapes: a wrong type, a missing field, an unknown command, not an object.
        for (name, text) in [("wrong-type", #"{"command":"seek","seconds":"ten"}"#), ("missing-field", #"{"command":"volume","room":"x"}"#),
                             ("unknown-command", #"{"command":"dance"}"#), ("not-an-object", #"["play"]"#),
                             ("escapes", #"{"command":"join","room":"k\u00fcche \"2\" \ud83d\udd0a"}"#)] {
            seeds.append(("refused-\(name).json", Array(text.utf8)))
        }
        try Self.write("fuzz-control", seeds)
    }

    @Test func streamParser() throws {
        let work = FileManager.default.temporaryDirectory.appendingPathComponent("tutti-fuzz-seeds-\(getpid())")
        try FileManager.default.createDirectory(at: work, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: work) }
        // (name, ffmpeg output arguments, seconds, rate, channels, control byte): small streams,
        // headers and the first frames; the control byte picks the hint and the push pieces.
        let media: [(String, [String], Double, Int, Int, UInt8)] = [
            ("s16.wav", ["-c:a", "pcm_s16le"], 0.05, 8000, 1, 0x00),
            ("f32-stereo.wav", ["-c:a", "pcm_f32le"], 0.01, 16000, 2, 0x08 | 5),
            ("s24.wav", ["-c:a", "pcm_s24le"], 0.02, 8000, 2, 0x10),
            ("u8.wav", ["-c:a", "pcm_u8"], 0.1, 8000, 1, 0x18),
            ("rf64.wav", ["-c:a", "pcm_s16le", "-rf64", "always"], 0.02, 8000, 1, 0x20),
            ("extensible-6ch.wav", ["-c:a", "pcm_s16le", "-ac", "6"], 0.01, 8000, 6, 0x28),
            ("s16.flac", ["-c:a", "flac", "-frame_size", "256"], 0.1, 8000, 1, 0x00),
            ("s24-stereo.flac", ["-c:a", "flac", "-sample_fmt", "s32", "-frame_size", "128"], 0.05, 11025, 2, 0x30 | 3),
            ("cbr.mp3", ["-c:a", "libmp3lame", "-b:a", "32k", "-id3v2_version", "0", "-write_xing", "0"], 0.3, 8000, 1, 0x00),
            ("vbr-id3-xing.mp3", ["-c:a", "libmp3lame", "-q:a", "7", "-metadata", "title=Fuzz"], 0.3, 16000, 1, 0x38),
            ("mp2.mp2", ["-c:a", "mp2", "-b:a", "32k"], 0.2, 16000, 1, 0x40),
            ("aac.adts", ["-c:a", "aac", "-b:a", "16k", "-f", "adts"], 0.2, 8000, 1, 0x00),
            ("aac-hinted.adts", ["-c:a", "aac", "-b:a", "16k", "-f", "adts"], 0.1, 16000, 2, 0x48 | 2),
            ("opus.ogg", ["-c:a", "libopus", "-b:a", "8k", "-f", "ogg"], 0.1, 48000, 1, 0x00),
            ("opus-stereo.opus", ["-c:a", "libopus", "-b:a", "12k", "-f", "ogg"], 0.06, 48000, 2, 0x50 | 4),
            ("vorbis.ogg", ["-c:a", "libvorbis", "-q:a", "0", "-f", "ogg"], 0.1, 8000, 1, 0x58),
        ]
        var seeds: [(String, [UInt8])] = []
        for (name, arguments, seconds, rate, channels, control) in media {
            let path = work.appendingPathComponent(name).path
            try TestMedia.ffmpeg(["-f", "lavfi", "-i", "sine=frequency=440:sample_rate=\(rate):duration=\(seconds)", "-ac", "\(channels)",
                                  "-map_metadata", "-1", "-fflags", "+bitexact", "-flags:a", "+bitexact"] + arguments + [path])
            let bytes = try [UInt8](Data(contentsOf: URL(fileURLWithPath: path)))
            seeds.append((name, [control] + bytes.prefix(6144)))
        }
        // Garbage before an MP3 stream, and a stream cut inside its first frame.
        if let mp3 = seeds.first(where: { $0.0 == "cbr.mp3" })?.1 {
            seeds.append(("garbage-then.mp3", [0x60] + [UInt8](repeating: 0x5A, count: 37) + mp3.dropFirst()))
            seeds.append(("cut.mp3", Array(mp3.prefix(60))))
        }
        try Self.write("fuzz-streamparser", seeds)
    }

    @Test func chunkDecoder() throws {
        func input(flags: UInt8, channels: Int, rateIndex: UInt8, header: [UInt8]? = nil, packets: [[UInt8]]) -> [UInt8] {
            var bytes: [UInt8] = [flags, UInt8(channels - 1), rateIndex] + (header ?? [])
            for packet in packets { bytes += [UInt8(packet.count >> 8), UInt8(packet.count & 0xFF)] + packet }
            return bytes
        }
        var seeds: [(String, [UInt8])] = []
        // (rate index into the harness table, rate, channels, frames per chunk)
        for (index, rate, channels, frames) in [(UInt8(0), 48000, 2, 64), (1, 44100, 1, 256), (4, 8000, 8, 16), (6, 16000, 2, 15), (2, 96000, 1, 1)] {
            let flac = try ChunkEncoder(codec: .flac, sampleRate: rate, channelCount: channels)
            let loud = try flac.encode(Self.tone(frames: frames, channels: channels, amplitude: 0.9), frames: frames)
            let silent = try flac.encode([Float](repeating: 0, count: frames * channels), frames: frames)
            let noise = try flac.encode((0..<frames * channels).map { Float(($0 * 7919) % 2001 - 1000) / 1000 }, frames: frames)
            seeds.append(("flac-\(rate)-\(channels)ch-\(frames).bin", input(flags: 0, channels: channels, rateIndex: index, packets: [loud, silent])))
            seeds.append(("flac-\(rate)-\(channels)ch-\(frames)-fixcrc-reencode.bin", input(flags: 4 | 8, channels: channels, rateIndex: index, packets: [noise, loud])))
            seeds.append(("flac-\(rate)-\(channels)ch-\(frames)-raw-header.bin",
                          input(flags: 2, channels: channels, rateIndex: index, header: flac.codecHeader, packets: [silent])))
            let pcm = try ChunkEncoder(codec: .pcm, sampleRate: rate, channelCount: channels)
            let samples = Self.tone(frames: min(frames, 32), channels: channels)
            seeds.append(("pcm-\(rate)-\(channels)ch.bin", input(flags: 1, channels: channels, rateIndex: index,
                                                                   packets: [try pcm.encode(samples, frames: min(frames, 32))])))
        }
        // A corrupt packet between good ones: the decoder must recover.
        let flac = try ChunkEncoder(codec: .flac, sampleRate: 48000, channelCount: 2)
        let good = try flac.encode(Self.tone(frames: 128, channels: 2), frames: 128)
        var bad = good
        bad[bad.count / 2] ^= 0x40
        seeds.append(("flac-corrupt-between.bin", input(flags: 0, channels: 2, rateIndex: 0, packets: [good, bad, Array(good.prefix(20)), good])))
        let odd = try ChunkEncoder(codec: .pcm, sampleRate: 48000, channelCount: 1)
        seeds.append(("pcm-special-values.bin", input(flags: 1, channels: 1, rateIndex: 0,
                                                        packets: [try odd.encode([.nan, -0.0, 2, .infinity, -.greatestFiniteMagnitude, .leastNonzeroMagnitude], frames: 6)])))
        try Self.write("fuzz-chunkdecoder", seeds)
    }

    @Test func hls() throws {
        let work = FileManager.default.temporaryDirectory.appendingPathComponent("tutti-fuzz-hls-\(getpid())")
        try FileManager.default.createDirectory(at: work, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: work) }
        var seeds: [(String, [UInt8])] = []
        // Playlists as ffmpeg's HLS muxer writes them: MPEG-TS, fMP4 (EXT-X-MAP), byte ranges of one file, live.
        let variants: [(String, [String])] = [
            ("ts-vod.m3u8", ["-c:a", "aac", "-b:a", "16k", "-hls_time", "1", "-hls_playlist_type", "vod"]),
            ("fmp4-vod.m3u8", ["-c:a", "aac", "-b:a", "16k", "-hls_time", "1", "-hls_segment_type", "fmp4", "-hls_playlist_type", "vod"]),
            ("byterange.m3u8", ["-c:a", "aac", "-b:a", "16k", "-hls_time", "1", "-hls_flags", "single_file", "-hls_playlist_type", "vod"]),
            ("live-event.m3u8", ["-c:a", "aac", "-b:a", "16k", "-hls_time", "1", "-hls_playlist_type", "event", "-start_number", "41"]),
            ("fmp4-byterange.m3u8", ["-c:a", "aac", "-b:a", "16k", "-hls_time", "1", "-hls_segment_type", "fmp4", "-hls_flags", "single_file+discont_start"]),
        ]
        for (name, arguments) in variants {
            let directory = work.appendingPathComponent(name + ".d")
            try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
            let path = directory.appendingPathComponent("index.m3u8").path
            try TestMedia.ffmpeg(["-f", "lavfi", "-i", "sine=frequency=440:sample_rate=8000:duration=3.5", "-ac", "1"] + arguments + ["-f", "hls", path])
            seeds.append((name, try [UInt8](Data(contentsOf: URL(fileURLWithPath: path)))))
        }
        let master = work.appendingPathComponent("master.d")
        try FileManager.default.createDirectory(at: master, withIntermediateDirectories: true)
        try TestMedia.ffmpeg(["-f", "lavfi", "-i", "sine=frequency=440:sample_rate=8000:duration=2", "-map", "0:a", "-map", "0:a",
                              "-c:a", "aac", "-b:a:0", "16k", "-b:a:1", "32k", "-var_stream_map", "a:0 a:1", "-master_pl_name", "master.m3u8",
                              "-hls_time", "1", "-f", "hls", master.appendingPathComponent("v%v.m3u8").path])
        seeds.append(("ffmpeg-master.m3u8", try [UInt8](Data(contentsOf: master.appendingPathComponent("master.m3u8")))))
        // What ffmpeg does not write: quoted attribute lists with commas, relative and absolute
        // URIs, keys, discontinuities, a byte range continuing the previous one, a BOM and CRLF.
        let handWritten: [(String, String)] = [
            ("master-attributes.m3u8", """
             #EXTM3U
             #EXT-X-VERSION:6
             #EXT-X-STREAM-INF:BANDWIDTH=52800,AVERAGE-BANDWIDTH=48000,CODECS="mp4a.40.2"
             v0/index.m3u8
             #EXT-X-STREAM-INF:CODECS="mp4a.40.5,mp4a.40.2",BANDWIDTH=105600,NAME="a, b"
             ../other/index.m3u8?token=x
             #EXT-X-STREAM-INF:BANDWIDTH=320000
             https://cdn.invalid:8443/hi/index.m3u8

             """),
            ("media-tags.m3u8", """
             #EXTM3U
             #EXT-X-TARGETDURATION:6
             #EXT-X-MEDIA-SEQUENCE:1000
             #EXT-X-KEY:METHOD=NONE
             #EXT-X-MAP:URI="init.mp4",BYTERANGE="720@0"
             #EXTINF:5.005333,title
             #EXT-X-BYTERANGE:1000@720
             seg.m4s
             #EXTINF:4.9,
             #EXT-X-BYTERANGE:2000
             seg.m4s
             #EXT-X-DISCONTINUITY
             #EXTINF:.5
             /abs/seg2.aac
             #EXT-X-ENDLIST

             """),
            ("bom-crlf.m3u8", "\u{FEFF}#EXTM3U\r\n#EXT-X-PLAYLIST-TYPE:VOD\r\n#EXTINF:10,\r\nhttp://h.invalid/a.ts\r\n#EXT-X-ENDLIST\r\n"),
            ("key-aes.m3u8", "#EXTM3U\n#EXT-X-KEY:METHOD=AES-128,URI=\"k\"\n#EXTINF:1,\na.ts\n"),
        ]
        for (name, text) in handWritten { seeds.append((name, Array(text.utf8))) }
        try Self.write("fuzz-hls", seeds)
    }
}
