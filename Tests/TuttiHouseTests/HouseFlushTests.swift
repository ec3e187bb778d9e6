import Foundation
import NIOCore
import NIOEmbedded
import NIOPosix
import Testing
import TuttiMedia
import TuttiProtocol
import TuttiSimulation
@testable import TuttiHouse
import TuttiEngine
import TuttiTestSupport

/// The house driven by a manual clock on NIO's thread-safe testing event loop, with testing
/// channels as rooms: every message a room would receive can be inspected, deterministically.
final class HouseHarness: @unchecked Sendable {
    let loop = NIOAsyncTestingEventLoop()
    let clock: ManualClock
    let house: House
    var rooms: [String: NIOAsyncTestingChannel] = [:]
    let logLines = LogLines()

    /// - Parameter waitsForRooms: whether `play` waits for rooms to report a settled clock (the
    ///   testing channels never do unless a test says so); without, it starts at once.
    /// - Parameter clock: the house's clock; a new one at 1 s by default (a restarted house
    ///   shares its predecessor's).
    init(configuration: House.Configuration = House.Configuration(), waitsForRooms: Bool = false,
         clock: ManualClock = ManualClock(startingAt: 1_000_000_000)) {
        self.clock = clock
        let lines = logLines
        var configuration = configuration
        // A house's URL policy, as `tutti server` gives it, with the test servers' host allowed.
        if configuration.network == nil { configuration.network = TestNetwork.houseOpener() }
        if !waitsForRooms { configuration.startWaitNanoseconds = 0 }
        house = House(configuration: configuration, loop: loop, clock: clock, log: { lines.append($0) })
    }

    @discardableResult
    func connect(_ name: String, latency: Int64 = 0, outputLead: Int64 = 0, resume: WireMessage.Resume? = nil) async throws -> UInt32 {
        let channel = NIOAsyncTestingChannel(loop: loop)
        // The outbound half of `serve(connection:)`: chunks framed once, every other message encoded.
        try await loop.executeInContext {
            try channel.pipeline.syncOperations.addHandlers([FramedChunkWriter(), MessageToByteHandler(WireMessageEncoder())])
        }
        try await channel.connect(to: SocketAddress(ipAddress: "127.0.0.1", port: 9)).get()
        let house = self.house
        let id = try await loop.executeInContext {
            let id = house.core.value.connect(channel: channel, hello: .init(role: .speaker, name: name, codecs: ["flac"], latencyNanoseconds: latency,
                                                                             outputLeadNanoseconds: outputLead, resume: resume))
            house.core.value.startSending(toConnection: id)
            return id
        }
        rooms[name] = channel
        return id
    }

    /// Runs the loop until `condition` holds on it (the producer thread posts to the loop as it
    /// goes); the timeout only guards.
    func runLoop(until what: String, timeout: Double = 20, _ condition: @escaping @Sendable (HouseCore) -> Bool) async throws {
        let deadline = Date().addingTimeInterval(timeout)
        while true {
            await loop.run()
            if try await onLoop(condition) { return }
            if Date() > deadline { throw TestFailure("timed out waiting for \(what)") }
            try await Task.sleep(nanoseconds: 1_000_000)
        }
    }

    /// Sends a control command (through its JSON, as a client would) and waits for the reply;
    /// edits of a playing queue are answered once the engine's producer thread has applied them
    /// (its answer hops to the loop, which the test drives). The timeout only guards.
    func control(_ command: ControlCommand, group: String? = nil, timeout: Double = 20) async throws -> ControlReply {
        let json = ControlJSON.encode(ControlRequest(command, group: group))
        let house = self.house
        let box = ReplyBox()
        try await loop.executeInContext { house.control(json: json) { ok, json in box.set(ok, json) } }
        let deadline = Date().addingTimeInterval(timeout)
        while box.value == nil {
            if Date() > deadline { throw TestFailure("no reply to \(json)") }
            await loop.run()
            if box.value == nil { try await Task.sleep(nanoseconds: 1_000_000) }
        }
        let reply = box.value!
        if !reply.ok { throw TestFailure(ControlJSON.decodeRefusal(reply.json).error) }
        return try ControlJSON.decodeReply(reply.json, to: command)
    }

    /// Runs `body` on the loop with the house's state (`HouseCore`).
    func onLoop<T: Sendable>(_ body: @escaping @Sendable (HouseCore) -> T) async throws -> T {
        let house = self.house
        return try await loop.executeInContext { body(house.core.value) }
    }

    /// The current stream's production, once it has finished (the producer thread posts to
    /// the loop as it goes) and every room in the group has been sent all of it, up to its end
    /// message; guarded by a timeout.
    func waitForProduction(timeout: Double = 20) async throws -> ServerStream {
        let deadline = Date().addingTimeInterval(timeout)
        while true {
            await loop.run()
            let done = try await onLoop { house -> ServerStream? in
                let group = house.defaultGroup
                guard let stream = group.stream, stream.endFrame != nil, group.rooms.allSatisfy({ $0.sender.sentEnd }) else { return nil }
                return stream
            }
            if let stream = done {
                await loop.run()
                return stream
            }
            if Date() > deadline { throw TestFailure("production did not finish") }
            try await Task.sleep(nanoseconds: 1_000_000)
        }
    }

    /// Everything the room was sent so far.
    func messages(_ name: String) async throws -> [WireMessage] {
        await loop.run()
        var bytes = ByteBuffer()
        while var buffer = try await rooms[name]!.readOutbound(as: ByteBuffer.self) { bytes.writeBuffer(&buffer) }
        var result: [WireMessage] = []
        while let message = try WireMessage.decode(from: &bytes) { result.append(message) }
        #expect(bytes.readableBytes == 0, "a room was sent a partial wire message")
        return result
    }

    /// Decodes the room's audio chunks of `stream` from `frame` on into one PCM array.
    static func audio(_ messages: [WireMessage], stream: UInt32, from frame: Int64, frames: Int) throws -> [Float] {
        var out = [Float](repeating: .nan, count: frames * 2)
        var decoded: [Float] = []
        var decoder: ChunkDecoder?
        for message in messages {
            switch message {
            case .streamStart(let m) where m.streamID == stream:
                decoder = try ChunkDecoder(codec: .flac, sampleRate: 48000, channelCount: 2, codecHeader: m.codecHeader)
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

final class ReplyBox: @unchecked Sendable {
    private let lock = NSLock()
    private var reply: (ok: Bool, json: String)?
    func set(_ ok: Bool, _ json: String) { lock.withLock { reply = (ok, json) } }
    var value: (ok: Bool, json: String)? { lock.withLock { reply } }
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
    @Test func queueEditAheadOfThePlayheadFlushesFromTheBoundary() async throws {
        let directory = try TemporaryDirectory("house-flush")
        defer { directory.remove() }
        let a = directory.file("a.flac"), b = directory.file("b.flac"), c = directory.file("c.flac")
        try Self.tone(a, seconds: 4, frequency: 300)
        try Self.tone(b, seconds: 2, frequency: 500)
        try Self.tone(c, seconds: 2, frequency: 700)
        let harness = HouseHarness()
        try await harness.connect("kitchen")
        _ = try await harness.control(.play(files: [a, b]))
        let stream = try await harness.waitForProduction()
        var sent = try await harness.messages("kitchen")
        #expect(sent.contains { if case .audioChunk = $0 { return true } else { return false } })

        // One second into item a (3 s before the boundary at 4 s): insert c after a.
        harness.clock.advance(by: House.Configuration().startDelayNanoseconds + 1_000_000_000)
        let reply = try await harness.control(.queueAdd(file: c, at: 1)).edited!
        #expect(reply.cut != nil)
        #expect(reply.cut?.fromSeconds == 4.0)
        _ = try await harness.waitForProduction()
        sent += try await harness.messages("kitchen")
        let flushes = sent.compactMap { if case .flush(let f) = $0 { return f } else { return nil } }
        #expect(flushes == [.init(streamID: stream.id, fromFrame: 192_000, epoch: 1)])
        // What the room now holds: a up to 4 s, then c (700 Hz), then b.
        let audio = try HouseHarness.audio(sent, stream: stream.id, from: 0, frames: 8 * 48000)
        let reference = try TestMedia.decodeWithFFmpeg(a) + (try TestMedia.decodeWithFFmpeg(c)) + (try TestMedia.decodeWithFFmpeg(b))
        #expect(audio.allSatisfy { !$0.isNaN })
        #expect(SignalCheck.maxDifference(audio, reference) < 1e-5)
        #expect(try await harness.onLoop { $0.defaultGroup.queue } == [a, c, b])
    }

    /// Closer to the playhead than the seamless margin (but beyond the start delay every room
    /// needs), an edit still cuts the same stream at the boundary: the reply says it may not be
    /// seamless, and the rooms get a, then c, then b.
    @Test func queueEditCloseToThePlayheadCutsWithinTheMarginAndSaysSo() async throws {
        let directory = try TemporaryDirectory("house-close")
        defer { directory.remove() }
        let a = directory.file("a.flac"), b = directory.file("b.flac"), c = directory.file("c.flac")
        try Self.tone(a, seconds: 2, frequency: 300)
        try Self.tone(b, seconds: 2, frequency: 500)
        try Self.tone(c, seconds: 2, frequency: 700)
        let harness = HouseHarness()
        try await harness.connect("kitchen")
        _ = try await harness.control(.play(files: [a, b]))
        let stream = try await harness.waitForProduction()
        var sent = try await harness.messages("kitchen")
        // 1.7 s into a: the boundary is 0.3 s ahead, beyond the edit lead, under the 0.5 s margin.
        harness.clock.advance(by: House.Configuration().startDelayNanoseconds + 1_700_000_000)
        let reply = try await harness.control(.queueAdd(file: c, at: 1)).edited!
        #expect(reply.cut != nil)
        #expect(reply.cut?.fromSeconds == 2.0)
        #expect(reply.cut?.seamless == false)
        #expect(reply.cut?.reason?.contains("needs 0.50 s") == true)
        let again = try await harness.waitForProduction()
        #expect(again.id == stream.id)
        sent += try await harness.messages("kitchen")
        #expect(sent.contains(.flush(.init(streamID: stream.id, fromFrame: 96_000, epoch: 1))))
        #expect(!sent.contains(.flush(.init(streamID: stream.id, fromFrame: .min))))
        let audio = try HouseHarness.audio(sent, stream: stream.id, from: 0, frames: 6 * 48000)
        let reference = try TestMedia.decodeWithFFmpeg(a) + (try TestMedia.decodeWithFFmpeg(c)) + (try TestMedia.decodeWithFFmpeg(b))
        #expect(audio.allSatisfy { !$0.isNaN })
        #expect(SignalCheck.maxDifference(audio, reference) < 1e-5)
    }

    /// Seek and next go through the same engine: each cuts the playing stream at the edit lead
    /// (what every room needs to cut on the same frame) and goes on from the target, on one timeline, so the
    /// rooms stay on the stream they play and hear exactly: a up to the seek, a from 2 s up
    /// to the skip, then b.
    @Test func seekAndNextCutThePlayingStreamAtTheEditLead() async throws {
        let directory = try TemporaryDirectory("house-seek")
        defer { directory.remove() }
        let a = directory.file("a.flac"), b = directory.file("b.flac")
        try Self.tone(a, seconds: 3, frequency: 300)
        try Self.tone(b, seconds: 2, frequency: 500)
        let harness = HouseHarness()
        try await harness.connect("kitchen")
        _ = try await harness.control(.play(files: [a, b]))
        let stream = try await harness.waitForProduction()
        var sent = try await harness.messages("kitchen")
        let delay = House.Configuration().startDelayNanoseconds
        let lead = Int(House.Configuration().editLeadNanoseconds * 48000 / 1_000_000_000)

        harness.clock.advance(by: delay + 1_000_000_000)
        let seek = try await harness.control(.seek(seconds: 2.0)).edited!
        let seekFrame = 48000 + lead
        #expect(seek.cut?.fromSeconds == Double(seekFrame) / 48000)
        #expect(seek.item == 0)
        _ = try await harness.waitForProduction()
        harness.clock.advance(by: 500_000_000)
        let next = try await harness.control(.next).edited!
        let nextFrame = 72000 + lead
        #expect(next.item == 1)
        #expect(next.cut?.fromSeconds == Double(nextFrame) / 48000)
        let final = try await harness.waitForProduction()
        #expect(final.id == stream.id)
        #expect(final.endFrame == Int64(nextFrame + 2 * 48000))
        sent += try await harness.messages("kitchen")
        let flushes = sent.compactMap { if case .flush(let f) = $0 { return f.fromFrame } else { return nil } }
        #expect(flushes == [Int64(seekFrame), Int64(nextFrame)])

        let audio = try HouseHarness.audio(sent, stream: stream.id, from: 0, frames: nextFrame + 2 * 48000)
        let decodedA = try TestMedia.decodeWithFFmpeg(a), decodedB = try TestMedia.decodeWithFFmpeg(b)
        let reference = Array(decodedA[0..<(seekFrame * 2)]) + Array(decodedA[(96000 * 2)..<((96000 + nextFrame - seekFrame) * 2)]) + decodedB
        #expect(audio.allSatisfy { !$0.isNaN })
        #expect(SignalCheck.maxDifference(audio, reference) < 1e-5)
        let status = try await harness.control(.status).status!
        #expect(status.item == 0)
    }

    /// Removing the playing item skips to the next at the edit lead; moving an item reorders
    /// what follows from the first boundary it changes; adding to a queue that has run out, but
    /// whose end is not heard yet, continues the same stream at its end.
    @Test func removeMoveAndAppendEditThePlayingStream() async throws {
        let directory = try TemporaryDirectory("house-edit")
        defer { directory.remove() }
        let a = directory.file("a.flac"), b = directory.file("b.flac"), c = directory.file("c.flac"), d = directory.file("d.flac")
        try Self.tone(a, seconds: 2, frequency: 300)
        try Self.tone(b, seconds: 2, frequency: 500)
        try Self.tone(c, seconds: 2, frequency: 700)
        try Self.tone(d, seconds: 1, frequency: 900)
        let harness = HouseHarness()
        try await harness.connect("kitchen")
        _ = try await harness.control(.play(files: [a, b, c]))
        let stream = try await harness.waitForProduction()
        var sent = try await harness.messages("kitchen")
        let delay = House.Configuration().startDelayNanoseconds
        let lead = Int(House.Configuration().editLeadNanoseconds * 48000 / 1_000_000_000)

        // 0.5 s in: remove a (playing); b starts at the edit lead.
        harness.clock.advance(by: delay + 500_000_000)
        let removed = try await harness.control(.queueRemove(index: 0)).edited!
        let bStart = 24000 + lead
        #expect(removed.cut?.fromSeconds == Double(bStart) / 48000)
        _ = try await harness.waitForProduction()
        // The queue is [b, c]; move c first: it no longer follows b, so the stream ends after b.
        let moved = try await harness.control(.queueMove(from: 1, to: 0)).edited!
        #expect(moved.cut?.fromSeconds == Double(bStart + 96000) / 48000)
        #expect(try await harness.onLoop { $0.defaultGroup.queue } == [c, b])
        let ended = try await harness.waitForProduction()
        #expect(ended.endFrame == Int64(bStart + 96000))
        // The queue ran out, its end 2 s ahead: d continues the stream there.
        let added = try await harness.control(.queueAdd(file: d)).edited!
        #expect(added.cut?.fromSeconds == Double(bStart + 96000) / 48000)
        #expect(added.cut?.seamless == true)
        let final = try await harness.waitForProduction()
        #expect(final.id == stream.id && final.endFrame == Int64(bStart + 96000 + 48000))
        sent += try await harness.messages("kitchen")
        let ends = sent.compactMap { if case .streamEnd(let e) = $0 { return e.endFrame } else { return nil } }
        #expect(ends.last == Int64(bStart + 96000 + 48000))

        let audio = try HouseHarness.audio(sent, stream: stream.id, from: 0, frames: bStart + 96000 + 48000)
        let reference = Array(try TestMedia.decodeWithFFmpeg(a)[0..<(bStart * 2)]) + (try TestMedia.decodeWithFFmpeg(b)) + (try TestMedia.decodeWithFFmpeg(d))
        #expect(audio.allSatisfy { !$0.isNaN })
        #expect(SignalCheck.maxDifference(audio, reference) < 1e-5)
    }

    @Test func joinAndLeaveAffectOnlyThatRoom() async throws {
        let directory = try TemporaryDirectory("house-join")
        defer { directory.remove() }
        let a = directory.file("a.flac")
        try Self.tone(a, seconds: 3, frequency: 300)
        let harness = HouseHarness()
        try await harness.connect("kitchen")
        try await harness.connect("office")
        _ = try await harness.control(.play(files: [a], rooms: ["kitchen"]))
        let stream = try await harness.waitForProduction()
        // The office, out of the group, was sent its settings and nothing of the stream.
        #expect(try await harness.messages("office").allSatisfy {
            switch $0 {
            case .volume, .roomSettings: true
            default: false
            }
        })
        harness.clock.advance(by: 1_000_000_000)
        _ = try await harness.control(.join(room: "office"))
        let joined = try await harness.messages("office")
        guard case .streamStart(let start)? = joined.first else { Issue.record("office got no stream"); return }
        #expect(start.streamID == stream.id)
        // It is sent the anchors and audio from just after the playhead, not from the start.
        #expect(joined.contains(.anchor(.init(streamID: stream.id, timelineFrame: 0, serverTime: 1_000_000_000 + House.Configuration().startDelayNanoseconds, isPlaying: true))))
        let firstChunk = joined.compactMap { if case .audioChunk(let c) = $0 { return c.firstFrame } else { return nil } }.first
        #expect(firstChunk.map { $0 > 40_000 && $0 < 60_000 } == true)
        _ = try await harness.messages("kitchen")
        _ = try await harness.control(.leave(room: "office"))
        #expect(try await harness.messages("office") == [.flush(.init(streamID: stream.id, fromFrame: .min))])
        #expect(try await harness.messages("kitchen").isEmpty)
        await #expect(throws: TestFailure.self) { try await harness.control(.join(room: "attic")) }
    }

    /// Pause and resume are anchors scheduled ahead, the same for every room: all stop on one
    /// frame and start again from it together.
    @Test func pauseAndResumeAreSharedAnchors() async throws {
        let directory = try TemporaryDirectory("house-pause")
        defer { directory.remove() }
        let a = directory.file("a.flac")
        try Self.tone(a, seconds: 3, frequency: 300)
        let harness = HouseHarness()
        try await harness.connect("kitchen")
        try await harness.connect("office", latency: 20_000_000)
        _ = try await harness.control(.play(files: [a]))
        let stream = try await harness.waitForProduction()
        let delay = House.Configuration().startDelayNanoseconds
        // Heard from start + delay + the largest room latency (office's 20 ms).
        let start = 1_000_000_000 + delay + 20_000_000
        harness.clock.advance(by: delay + 20_000_000 + 1_000_000_000)
        let paused = try await harness.control(.pause)
        // A pause is scheduled like a start: beyond the largest room latency too.
        let pauseTime = harness.clock.now() + delay + 20_000_000
        let pauseFrame = (pauseTime - start) * 48000 / 1_000_000_000
        #expect(paused.paused?.pausedAtSeconds == Double(pauseFrame) / 48000)
        await #expect(throws: TestFailure.self) { try await harness.control(.pause) }
        harness.clock.advance(by: 2_000_000_000)
        _ = try await harness.control(.resume)
        let resumeTime = harness.clock.now() + delay + 20_000_000
        for room in ["kitchen", "office"] {
            let anchors = try await harness.messages(room).compactMap { if case .anchor(let a) = $0 { return a } else { return nil } }
            #expect(anchors == [
                .init(streamID: stream.id, timelineFrame: 0, serverTime: start, isPlaying: true),
                .init(streamID: stream.id, timelineFrame: pauseFrame, serverTime: pauseTime, isPlaying: false),
                .init(streamID: stream.id, timelineFrame: pauseFrame, serverTime: resumeTime, isPlaying: true),
            ], "\(room)")
        }
        let status = try await harness.control(.status).status!
        #expect(status.state == "playing")
    }
}
