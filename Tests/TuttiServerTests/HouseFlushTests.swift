import Foundation
import NIOCore
import NIOEmbedded
import Testing
import TuttiCore
import TuttiMedia
import TuttiNet
import TuttiTestSupport
@testable import TuttiServer

/// The house driven by a manual clock on an embedded event loop, with embedded channels as
/// rooms: every message a room would receive can be inspected, deterministically.
final class HouseHarness {
    let loop = EmbeddedEventLoop()
    let clock = ManualClock(startingAt: 1_000_000_000)
    let house: House
    var rooms: [String: EmbeddedChannel] = [:]
    let logLines = LogLines()

    init(configuration: House.Configuration = House.Configuration()) {
        let lines = logLines
        house = House(configuration: configuration, loop: loop, clock: clock, log: { lines.append($0) })
    }

    func connect(_ name: String, latency: Int64 = 0) throws {
        let channel = EmbeddedChannel(loop: loop)
        try channel.connect(to: SocketAddress(ipAddress: "127.0.0.1", port: 9)).wait()
        _ = house.connect(channel: channel, hello: .init(role: .speaker, name: name, codecs: ["flac"], latencyNanoseconds: latency))
        rooms[name] = channel
    }

    func control(_ request: [String: Any]) throws -> [String: Any] {
        let json = String(decoding: try JSONSerialization.data(withJSONObject: request), as: UTF8.self)
        let reply = house.control(json)
        let object = try JSONSerialization.jsonObject(with: Data(reply.json.utf8)) as! [String: Any]
        if !reply.ok { throw TestFailure(object["error"] as? String ?? reply.json) }
        return object
    }

    /// Runs the loop until `condition` holds (the producer thread posts to it); guarded by a timeout.
    func run(until condition: () -> Bool, timeout: Double = 20) throws {
        let deadline = Date().addingTimeInterval(timeout)
        while !condition() {
            loop.run()
            if Date() > deadline { throw TestFailure("timed out") }
            usleep(1000)
        }
        loop.run()
    }

    /// Everything the room was sent so far.
    func messages(_ name: String) throws -> [WireMessage] {
        var result: [WireMessage] = []
        while let message = try rooms[name]!.readOutbound(as: WireMessage.self) { result.append(message) }
        return result
    }

    /// Decodes the room's audio chunks of `stream` from `frame` on into one PCM array.
    static func audio(_ messages: [WireMessage], stream: UInt32, from frame: Int64, frames: Int) throws -> [Float] {
        var header: [UInt8] = []
        var out = [Float](repeating: .nan, count: frames * 2)
        var decoded: [Float] = []
        var decoder: ChunkDecoder?
        for message in messages {
            switch message {
            case .streamStart(let m) where m.streamID == stream:
                header = m.codecHeader
                decoder = try ChunkDecoder(codec: .flac, sampleRate: 48000, channelCount: 2, codecHeader: header)
            case .audioChunk(let m) where m.streamID == stream:
                _ = try decoder!.decode(m.payload, into: &decoded)
                for i in 0..<Int(m.frameCount) {
                    let f = Int(m.firstFrame - frame) + i
                    if f >= 0 && f < frames { out[2 * f] = decoded[2 * i]; out[2 * f + 1] = decoded[2 * i + 1] }
                }
            default: break
            }
        }
        return out
    }
}

struct TestFailure: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}

final class LogLines: @unchecked Sendable {
    private let lock = NSLock()
    private var lines: [String] = []
    func append(_ line: String) { lock.withLock { lines.append(line) } }
    var all: [String] { lock.withLock { lines } }
}

@Suite(.serialized) struct HouseFlushTests {
    static func tone(_ path: String, seconds: Double, frequency: Int) throws {
        try TestMedia.ffmpeg(["-f", "lavfi", "-i", "sine=frequency=\(frequency):sample_rate=48000:duration=\(seconds)", "-ac", "2", path])
    }

    /// A queue edit well ahead of the playhead flushes from the next item's first frame: rooms
    /// drop what they hold from there and get the new item, with everything before untouched.
    @Test func queueEditAheadOfThePlayheadFlushesFromTheBoundary() throws {
        let directory = try TemporaryDirectory("house-flush")
        defer { directory.remove() }
        let a = directory.file("a.flac"), b = directory.file("b.flac"), c = directory.file("c.flac")
        try Self.tone(a, seconds: 4, frequency: 300)
        try Self.tone(b, seconds: 2, frequency: 500)
        try Self.tone(c, seconds: 2, frequency: 700)
        let harness = HouseHarness()
        try harness.connect("kitchen")
        _ = try harness.control(["command": "play", "files": [a, b]])
        let stream = try #require(harness.house.stream)
        try harness.run { stream.endFrame != nil }
        var sent = try harness.messages("kitchen")
        #expect(sent.contains { if case .audioChunk = $0 { return true } else { return false } })

        // One second into item a (3 s before the boundary at 4 s): insert c after a.
        harness.clock.advance(by: 110_000_000 + 1_000_000_000)
        let reply = try harness.control(["command": "queue-add", "file": c, "at": 1])
        #expect(reply["flush"] as? String == "from")
        #expect(reply["fromSeconds"] as? Double == 4.0)
        try harness.run { stream.endFrame != nil }
        sent += try harness.messages("kitchen")
        let flushes = sent.compactMap { if case .flush(let f) = $0 { return f } else { return nil } }
        #expect(flushes == [.init(streamID: stream.id, fromFrame: 192_000)])
        // What the room now holds: a up to 4 s, then c (700 Hz), then b.
        let audio = try HouseHarness.audio(sent, stream: stream.id, from: 0, frames: 8 * 48000)
        let reference = try TestMedia.decodeWithFFmpeg(a) + (try TestMedia.decodeWithFFmpeg(c)) + (try TestMedia.decodeWithFFmpeg(b))
        #expect(audio.allSatisfy { !$0.isNaN })
        #expect(SignalCheck.maxDifference(audio, reference) < 1e-5)
        #expect(harness.house.state.queue == [a, c, b])
    }

    /// Too close to the playhead the flush-from is refused with the reason, and the house falls
    /// back to a hard flush: a new stream from the current position with the new queue.
    @Test func queueEditTooCloseToThePlayheadIsRefusedAndHardFlushed() throws {
        let directory = try TemporaryDirectory("house-refuse")
        defer { directory.remove() }
        let a = directory.file("a.flac"), b = directory.file("b.flac"), c = directory.file("c.flac")
        try Self.tone(a, seconds: 2, frequency: 300)
        try Self.tone(b, seconds: 2, frequency: 500)
        try Self.tone(c, seconds: 2, frequency: 700)
        let harness = HouseHarness()
        try harness.connect("kitchen")
        _ = try harness.control(["command": "play", "files": [a, b]])
        let first = try #require(harness.house.stream)
        try harness.run { first.endFrame != nil }
        _ = try harness.messages("kitchen")
        // 1.8 s into a: the boundary is 0.2 s ahead, under the 0.5 s margin.
        harness.clock.advance(by: 110_000_000 + 1_800_000_000)
        let reply = try harness.control(["command": "queue-add", "file": c, "at": 1])
        #expect(reply["flush"] as? String == "hard")
        #expect(reply["refused"] as? String == "flush-from")
        #expect((reply["reason"] as? String)?.contains("needs 0.50 s") == true)
        #expect(harness.logLines.all.contains { $0.contains("flush-from refused") })
        let second = try #require(harness.house.stream)
        #expect(second.id != first.id)
        try harness.run { second.endFrame != nil }
        let sent = try harness.messages("kitchen")
        #expect(sent.contains(.flush(.init(streamID: first.id, fromFrame: .min))))
        // The new stream starts where the playhead was in a, then plays c, then b.
        let audio = try HouseHarness.audio(sent, stream: second.id, from: 0, frames: Int(0.2 * 48000) + 4 * 48000)
        let reference = Array(try TestMedia.decodeWithFFmpeg(a).suffix(Int(0.2 * 48000) * 2)) + (try TestMedia.decodeWithFFmpeg(c)) + (try TestMedia.decodeWithFFmpeg(b))
        #expect(SignalCheck.maxDifference(audio, reference) < 1e-5)
    }

    @Test func joinAndLeaveAffectOnlyThatRoom() throws {
        let directory = try TemporaryDirectory("house-join")
        defer { directory.remove() }
        let a = directory.file("a.flac")
        try Self.tone(a, seconds: 3, frequency: 300)
        let harness = HouseHarness()
        try harness.connect("kitchen")
        try harness.connect("office")
        _ = try harness.control(["command": "play", "files": [a], "rooms": ["kitchen"]])
        let stream = try #require(harness.house.stream)
        try harness.run { stream.endFrame != nil }
        #expect(try harness.messages("office").allSatisfy { if case .volume = $0 { return true } else { return false } })
        harness.clock.advance(by: 1_000_000_000)
        _ = try harness.control(["command": "join", "room": "office"])
        let joined = try harness.messages("office")
        guard case .streamStart(let start)? = joined.first else { Issue.record("office got no stream"); return }
        #expect(start.streamID == stream.id)
        // It is sent the anchors and audio from just after the playhead, not from the start.
        #expect(joined.contains(.anchor(.init(streamID: stream.id, timelineFrame: 0, serverTime: 1_110_000_000, isPlaying: true))))
        let firstChunk = joined.compactMap { if case .audioChunk(let c) = $0 { return c.firstFrame } else { return nil } }.first
        #expect(firstChunk.map { $0 > 40_000 && $0 < 60_000 } == true)
        _ = try harness.messages("kitchen")
        _ = try harness.control(["command": "leave", "room": "office"])
        #expect(try harness.messages("office") == [.flush(.init(streamID: stream.id, fromFrame: .min))])
        #expect(try harness.messages("kitchen").isEmpty)
        #expect(throws: TestFailure.self) { try harness.control(["command": "join", "room": "attic"]) }
    }
}
