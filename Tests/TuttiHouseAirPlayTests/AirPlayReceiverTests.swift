import Foundation
import NIOCore
import NIOPosix
import Synchronization
import Testing
import TuttiProtocol
import TuttiSimulation
import TuttiTestSupport
@testable import TuttiHouseAirPlay

/// What a receiver's sink was given, in order.
final class CollectingSink: AirPlaySink {
    struct State {
        var began: [AirPlayStreamInfo] = []
        var samples: [Int16] = []
        var timestamps: [UInt32] = []
        var schedules: [(rtpTime: UInt32, hostTime: Int64, error: Double)] = []
        var volumes: [Double] = []
        var metadata: [AirPlayMetadata] = []
        var flushes = 0
        var ended: [String] = []
    }
    let state = Mutex(State())

    func airPlayBegan(_ stream: AirPlayStreamInfo) { state.withLock { $0.began.append(stream) } }
    func airPlayAudio(_ samples: [Int16], frameCount: Int, rtpTimestamp: UInt32) {
        state.withLock { $0.samples += samples; $0.timestamps.append(rtpTimestamp) }
    }
    func airPlaySchedule(rtpTime: UInt32, hostTime: Int64, errorNanoseconds: Double) {
        state.withLock { $0.schedules.append((rtpTime, hostTime, errorNanoseconds)) }
    }
    func airPlayVolume(_ decibels: Double) { state.withLock { $0.volumes.append(decibels) } }
    func airPlayMetadata(_ metadata: AirPlayMetadata) { state.withLock { $0.metadata.append(metadata) } }
    func airPlayFlushed() { state.withLock { $0.flushes += 1 } }
    func airPlayEnded(_ reason: String) { state.withLock { $0.ended.append(reason) } }
}

/// The receiver with real senders: pyatv (`atvremote`, in the venv `make test` makes) streams
/// a file; what the sink is handed is checked sample by sample against the file.
@Suite(.serialized) struct AirPlayReceiverTests {
    static let atvremote = FileManager.default.currentDirectoryPath + "/out/venv-pyatv/bin/atvremote"

    final class Lines: Sendable {
        let all = Mutex<[String]>([])
        func append(_ line: String) { all.withLock { $0.append(line) } }
    }

    @Test(.timeLimit(.minutes(2)))
    func pyatvStreamsAFileBitExact() async throws {
        try #require(FileManager.default.isExecutableFile(atPath: Self.atvremote), "pyatv's atvremote is not at \(Self.atvremote): run make test (it makes the venv)")
        let directory = try TemporaryDirectory("airplay-pyatv")
        defer { directory.preserveLogs(as: "airplay-pyatv"); directory.remove() }
        let music = directory.file("music.wav")
        try TestMedia.ffmpeg(["-f", "lavfi", "-i", "anoisesrc=d=3:c=pink:a=0.3:seed=11", "-af", "pan=stereo|c0=c0|c1=-0.6*c0",
                              "-ar", "44100", "-c:a", "pcm_s16le", "-metadata", "title=Pink Noise", "-metadata", "artist=Tutti Tests", music])
        let sink = CollectingSink()
        let lines = Lines()
        let receiver = AirPlayReceiver(configuration: .init(host: "127.0.0.1", port: 0), sink: sink, log: { lines.append($0) })
        let port = try await receiver.start()
        defer { Task { await receiver.stop() } }

        let sender = try ChildProcess(name: "atvremote", executable: Self.atvremote,
                                      // The TXT properties the receiver's announcement will give: metadata as text,
                                      // artwork and progress (md), no encryption (et), L16 and ALAC (cn).
                                      arguments: ["--manual", "--address", "127.0.0.1", "--port", "\(port)", "--protocol", "raop", "--id", "tutti-test",
                                                  "--service-properties", ";md=0,1,2;et=0;cn=0,1;tp=UDP", "--debug", "stream_file=\(music)"],
                                      standardError: directory.file("atvremote.log"))
        #expect(await sender.exit(within: 60) == 0, "atvremote: \((try? String(contentsOfFile: directory.file("atvremote.log"), encoding: .utf8))?.suffix(3000) ?? "")")

        let state = sink.state.withLock { $0 }
        let reference = try TestMedia.run("ffmpeg", ["-nostdin", "-loglevel", "error", "-i", music, "-f", "s16le", "-"]).withUnsafeBytes { Array($0.bindMemory(to: Int16.self)) }
        print("AirPlay from pyatv: \(state.samples.count / 2) frames in \(state.timestamps.count) packets for a file of \(reference.count / 2); "
              + "\(state.schedules.count) schedules, volumes \(state.volumes), metadata \(state.metadata.map { "\($0.title ?? "-")/\($0.artist ?? "-")" }); log: \(lines.all.withLock { $0 })")
        #expect(state.began.count == 1 && state.began.first?.announcement.encoding == .l16)
        #expect(state.ended.count == 1, "\(state.ended)")
        // Every frame of the file, in order, from the first packet; then the silence pyatv pads with.
        #expect(state.samples.count >= reference.count)
        let mismatched = zip(state.samples, reference).filter { $0 != $1 }.count
        #expect(mismatched == 0, "\(mismatched) of \(reference.count) samples differ")
        #expect(state.samples.dropFirst(reference.count).allSatisfy { $0 == 0 })
        // Consecutive packets, 352 frames apart.
        #expect(zip(state.timestamps, state.timestamps.dropFirst()).allSatisfy { $1 &- $0 == 352 })
        // The sender's schedule was read through a fitted clock: its sync packets came each second.
        #expect(state.schedules.count >= 2)
        #expect(state.metadata.contains { $0.title == "Pink Noise" && $0.artist == "Tutti Tests" }, "\(state.metadata)")
        #expect(state.metadata.contains { $0.progress != nil })
        #expect(!state.volumes.isEmpty && state.volumes.allSatisfy { (-30...0).contains($0) }, "\(state.volumes)")
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
        let options = try await exchange("OPTIONS * RTSP/1.0\r\nCSeq: 9\r\n\r\n")
        #expect(options.hasPrefix("RTSP/1.0 200 OK\r\n") && options.contains("CSeq: 9\r\n") && options.contains("Public: ANNOUNCE"), "\(options)")
        let log = lines.all.withLock { $0 }
        #expect(log.contains { $0.contains("is not METHOD URI VERSION") } && log.contains { $0.contains("the stream is encrypted (rsaaeskey)") }, "\(log)")
        #expect(sink.state.withLock { $0.began.isEmpty })
    }
}
