import Foundation
import Testing
import TuttiProtocol
import TuttiSimulation
@testable import TuttiHouse
import TuttiTestSupport

/// A room that reconnects says what it holds (`Hello.resume`); the house sends only what it
/// lacks, after the cuts it missed, and never its stream header again.
@Suite(.serialized) struct RoomResumeTests {
    static func chunks(_ messages: [WireMessage]) -> [WireMessage.AudioChunk] {
        messages.compactMap { if case .audioChunk(let chunk) = $0 { return chunk } else { return nil } }
    }

    static func startsStream(_ messages: [WireMessage]) -> Bool {
        messages.contains { if case .streamStart = $0 { return true } else { return false } }
    }

    @Test func aReconnectingRoomIsSentOnlyWhatItLacks() async throws {
        let directory = try TemporaryDirectory("resume")
        defer { directory.remove() }
        let a = directory.file("a.flac")
        try HouseFlushTests.tone(a, seconds: 4, frequency: 300)
        let harness = HouseHarness()
        let first = try await harness.connect("kitchen")
        _ = try await harness.control(.play(files: [a]))
        let stream = try await harness.waitForProduction()
        let sent = try await harness.messages("kitchen")
        #expect(!Self.chunks(sent).isEmpty)

        // The connection drops a second into the track; the room held the first 2 s.
        try await harness.onLoop { $0.disconnect(connectionID: first) }
        harness.clock.advance(by: House.Configuration().startDelayNanoseconds + 1_000_000_000)
        try await harness.connect("kitchen", resume: .init(streamID: stream.id, epoch: 0, held: [0..<96000]))
        let again = try await harness.messages("kitchen")
        #expect(!Self.startsStream(again), "the stream header was sent again")
        // The anchors again, then the audio from the chunk holding frame 96000 to the end, once each.
        #expect(again.contains { if case .anchor(let m) = $0 { return m.isPlaying && m.timelineFrame == 0 } else { return false } })
        let resent = Self.chunks(again)
        let firstFrame = try #require(resent.first?.firstFrame)
        #expect(firstFrame <= 96000 && firstFrame + 2048 > 96000, "resumed at \(firstFrame)")
        #expect(zip(resent, resent.dropFirst()).allSatisfy { $0.firstFrame + Int64($0.frameCount) == $1.firstFrame })
        let last = try #require(resent.last)
        #expect(last.firstFrame + Int64(last.frameCount) == 192_000)
        #expect(again.contains { if case .streamEnd(let m) = $0 { return m.endFrame == 4 * 48000 } else { return false } })
        #expect(harness.logLines.all.contains { $0.contains("room kitchen resumes stream \(stream.id)") })
    }

    @Test func aCutMadeWhileARoomWasAwayReachesItBeforeAnyAudio() async throws {
        let directory = try TemporaryDirectory("resume-cut")
        defer { directory.remove() }
        let a = directory.file("a.flac"), b = directory.file("b.flac")
        try HouseFlushTests.tone(a, seconds: 4, frequency: 300)
        try HouseFlushTests.tone(b, seconds: 2, frequency: 500)
        let harness = HouseHarness()
        let first = try await harness.connect("kitchen")
        _ = try await harness.control(.play(files: [a, b]))
        let stream = try await harness.waitForProduction()
        _ = try await harness.messages("kitchen")
        try await harness.onLoop { $0.disconnect(connectionID: first) }

        // While it is away, b is removed: the stream is cut where b began.
        harness.clock.advance(by: House.Configuration().startDelayNanoseconds + 1_000_000_000)
        let edit = try await harness.control(.queueRemove(index: 1)).edited
        #expect(edit?.cut?.fromSeconds == 4.0)
        _ = try await harness.waitForProduction()
        // It held a and half of b, as of epoch 0.
        try await harness.connect("kitchen", resume: .init(streamID: stream.id, epoch: 0, held: [0..<240_000]))
        let again = try await harness.messages("kitchen")
        #expect(!Self.startsStream(again))
        let flushIndex = try #require(again.firstIndex { if case .flush(let m) = $0 { return m.fromFrame == 192_000 && m.epoch == 1 } else { return false } })
        #expect(again.firstIndex { if case .audioChunk = $0 { return true } else { return false } }.map { $0 > flushIndex } ?? true)
        // What it held of a is still good: nothing before the cut is sent again.
        #expect(Self.chunks(again).allSatisfy { $0.firstFrame >= 190_000 }, "\(Self.chunks(again).map(\.firstFrame))")
        #expect(again.contains { if case .streamEnd(let m) = $0 { return m.endFrame == 192_000 } else { return false } })
    }

    @Test func aRoomHoldingAStreamThatEndedWhileItWasAwayIsToldToDropIt() async throws {
        let harness = HouseHarness()
        try await harness.connect("kitchen", resume: .init(streamID: 41, epoch: 0, held: [0..<96000]))
        let sent = try await harness.messages("kitchen")
        #expect(sent.contains { if case .flush(let m) = $0 { return m.streamID == 41 && m.fromFrame == .min } else { return false } })
    }
}
