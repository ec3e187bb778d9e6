import Foundation
import Testing
import TuttiProtocol
import TuttiSimulation
@testable import TuttiHouse
import TuttiTestSupport

/// `play` waits for the rooms it plays to: it sends the stream at once, holds it at its first
/// frame, and anchors the start when every room has a settled clock and the start of the audio,
/// or when the wait limit passes (then the rooms not ready are named and join later).
@Suite(.serialized) struct PendingStartTests {
    static func status(streamID: UInt32, clockError: Int64) -> WireMessage.SpeakerStatus {
        .init(state: .paused, streamID: streamID, playheadFrame: -1, bufferedUntilFrame: -1, syncErrorNanoseconds: 0,
              clockErrorNanoseconds: clockError, underruns: 0)
    }

    /// Starts `play` and returns the box its reply will land in.
    static func startPlay(_ harness: HouseHarness, _ files: [String]) async throws -> ReplyBox {
        let box = ReplyBox()
        let json = ControlJSON.encode(ControlCommand.play(files: files))
        let house = harness.house
        try await harness.loop.executeInContext { house.control(json: json) { ok, json in box.set(ok, json) } }
        return box
    }

    static func anchors(_ messages: [WireMessage]) -> [WireMessage.Anchor] {
        messages.compactMap { if case .anchor(let anchor) = $0 { return anchor } else { return nil } }
    }

    @Test func playWaitsForARoomWhoseClockIsSettling() async throws {
        let directory = try TemporaryDirectory("pending-start")
        defer { directory.remove() }
        let a = directory.file("a.flac")
        try HouseFlushTests.tone(a, seconds: 2, frequency: 300)
        let harness = HouseHarness(waitsForRooms: true)
        // A speaker on a virtual card commits each frame to its device 95 ms before it is heard.
        let kitchen = try await harness.connect("kitchen", outputLead: 95_000_000)
        // The room's last status says its clock is still settling.
        try await harness.onLoop { $0.received(status: Self.status(streamID: 0, clockError: -1), fromConnection: kitchen) }
        let box = try await Self.startPlay(harness, [a])
        try await harness.runLoop(until: "the start of the stream to be sent") { house in
            house.rooms.connected.first { $0.connectionID == kitchen }.map { $0.sender.sentUntilFrame >= 12000 } ?? false
        }
        #expect(box.value == nil, "answered before the room was ready")
        let status = try await harness.onLoop { $0.statusReport(of: $0.defaultGroup) }
        #expect(status.state == "starting")
        var sent = try await harness.messages("kitchen")
        let streamID = try #require(sent.compactMap { if case .streamStart(let m) = $0 { return m.streamID } else { return nil } }.first)
        // No anchor yet: the room holds the stream and plays nothing.
        #expect(Self.anchors(sent).isEmpty)

        // 800 ms later the clock has settled.
        harness.clock.advance(by: 800_000_000)
        try await harness.onLoop { $0.received(status: Self.status(streamID: streamID, clockError: 40_000), fromConnection: kitchen) }
        await harness.loop.run()
        let reply = try #require(box.value)
        #expect(reply.ok, "\(reply.json)")
        let report = try #require(try ControlJSON.decodeReply(reply.json, to: .play(files: [a])).started)
        #expect(report.waitedMs == 800)
        #expect(report.notReady == nil)
        // Its bound (40 µs) is within the start target: it plays in sync from the first sample.
        #expect(report.roomStarts == [RoomStart(room: "kitchen", mode: .inSync, clockBoundMicroseconds: 40)])
        // The start is the anchor delay beyond the room's output lead: the anchor reaches it
        // before it commits the first frame.
        let delay = House.Configuration().startDelayNanoseconds + 95_000_000
        #expect(report.startsInMs == Int(delay / 1_000_000))
        sent += try await harness.messages("kitchen")
        let start = try #require(Self.anchors(sent).last)
        #expect(start.isPlaying && start.timelineFrame == 0)
        #expect(start.serverTime == harness.clock.now() + delay)
    }

    @Test func aRoomNotReadyInTimeIsLeftToJoinLater() async throws {
        let directory = try TemporaryDirectory("pending-start-late")
        defer { directory.remove() }
        let a = directory.file("a.flac")
        try HouseFlushTests.tone(a, seconds: 2, frequency: 300)
        let harness = HouseHarness(waitsForRooms: true)
        let kitchen = try await harness.connect("kitchen")
        try await harness.connect("hall")
        try await harness.onLoop { $0.received(status: Self.status(streamID: 0, clockError: 350_000), fromConnection: kitchen) }
        let box = try await Self.startPlay(harness, [a])
        try await harness.runLoop(until: "the start of the stream to be sent") { house in
            house.rooms.connected.allSatisfy { $0.sender.sentUntilFrame >= 12000 }
        }
        // The kitchen's clock is usable, if young (a 350 µs bound); the hall never says anything.
        let streamID = try await harness.onLoop { $0.defaultGroup.stream!.id }
        try await harness.onLoop { $0.received(status: Self.status(streamID: streamID, clockError: 350_000), fromConnection: kitchen) }
        await harness.loop.run()
        #expect(box.value == nil, "started without waiting for the hall")
        harness.clock.advance(by: 1_500_000_000)
        await harness.loop.advanceTime(by: .milliseconds(1500))
        let reply = try #require(box.value)
        let report = try #require(try ControlJSON.decodeReply(reply.json, to: .play(files: [a])).started)
        #expect(report.notReady == [UnreadyRoom(room: "hall", reason: "it has sent no status yet")])
        #expect(report.waitedMs == 1500)
        #expect(report.rooms == ["hall", "kitchen"])
        // The kitchen starts at once and slews into sync as its bound shrinks; the hall joins later.
        #expect(report.roomStarts == [RoomStart(room: "hall", mode: .later, clockBoundMicroseconds: nil),
                                      RoomStart(room: "kitchen", mode: .slewing, clockBoundMicroseconds: 350)])
        #expect(harness.logLines.all.contains { $0.contains("without hall") && $0.contains("hall: it has sent no status yet") }, "\(harness.logLines.all)")
        // Both rooms were sent the anchor: the hall plays along once its clock settles.
        for room in ["kitchen", "hall"] {
            #expect(Self.anchors(try await harness.messages(room)).last?.isPlaying == true, "\(room)")
        }
    }
}
