import Foundation
import Testing
import TuttiSimulation
@testable import TuttiHouse
import TuttiTestSupport

/// `tutti ctl play URL` for rooms: the house's producer reads the URL through the same HTTP
/// source as the local player, and the rooms receive exactly its audio.
@Suite(.serialized) struct HouseURLTests {
    @Test func roomsPlayAURLExactly() async throws {
        let tone = ToneWAV(seconds: 3)
        let server = try await MediaHTTPServer.start(files: ["/radio.wav": tone.bytes])
        let url = server.url(for: "/radio.wav")
        let harness = HouseHarness()
        try await harness.connect("kitchen")
        _ = try await harness.control(.play(files: [url]))
        let stream = try await harness.waitForProduction()
        let sent = try await harness.messages("kitchen")
        try await server.shutdown()
        let audio = try HouseHarness.audio(sent, stream: stream.id, from: 0, frames: tone.frameCount)
        #expect(audio.allSatisfy { !$0.isNaN })
        #expect(audio.elementsEqual(tone.samples))
        #expect(try await harness.onLoop { $0.defaultGroup.queue } == [url])
    }

    /// An unreachable URL is reported as the item's error; the rest of the queue still plays.
    @Test func aMissingURLIsSkippedAndNamed() async throws {
        let tone = ToneWAV(seconds: 1)
        let server = try await MediaHTTPServer.start(files: ["/ok.wav": tone.bytes])
        let missing = server.url(for: "/missing.wav")
        let harness = HouseHarness()
        try await harness.connect("kitchen")
        _ = try await harness.control(.play(files: [missing, server.url(for: "/ok.wav")]))
        let stream = try await harness.waitForProduction()
        let sent = try await harness.messages("kitchen")
        try await server.shutdown()
        let audio = try HouseHarness.audio(sent, stream: stream.id, from: 0, frames: tone.frameCount)
        #expect(audio.elementsEqual(tone.samples))
        #expect(harness.logLines.all.contains { $0.contains("\(missing): HTTP 404 Not Found") }, "\(harness.logLines.all)")
    }
}
