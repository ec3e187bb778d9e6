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

    /// A house fetches nothing local for its controllers (`URLPolicy.house`): not a loopback URL
    /// unless its host is allowed, not a redirect to a cloud's metadata address or to an
    /// `http+unix` socket, not an HLS playlist entry on loopback. Each is refused with one line
    /// naming the URL and why, before any connection; the rest of the queue plays.
    @Test func localTargetsAreRefusedInURLsRedirectsAndPlaylists() async throws {
        let tone = ToneWAV(seconds: 1)
        let server = try await MediaHTTPServer.start(files: ["/ok.wav": tone.bytes, "/secret.wav": tone.bytes])
        server.setRedirect("/metadata.wav", to: "http://169.254.169.254/latest/meta-data/")
        server.setRedirect("/socket.wav", to: "http+unix://%2Frun%2Fdocker.sock/info")
        server.setRedirect("/mapped.wav", to: "http://[::ffff:127.0.0.1]:\(server.port)/secret.wav", status: 307)
        server.setFile("/list.m3u8", Array("#EXTM3U\n#EXT-X-TARGETDURATION:1\n#EXTINF:1,\nhttp://[::1]:\(server.port)/secret.ts\n#EXT-X-ENDLIST\n".utf8))
        let urls = ["/metadata.wav", "/socket.wav", "/mapped.wav", "/list.m3u8"].map { server.url(for: $0) }
        let harness = HouseHarness()
        try await harness.connect("kitchen")
        _ = try await harness.control(.play(files: urls + [server.url(for: "/ok.wav")]))
        let stream = try await harness.waitForProduction()
        let sent = try await harness.messages("kitchen")
        let audio = try HouseHarness.audio(sent, stream: stream.id, from: 0, frames: tone.frameCount)
        #expect(audio.elementsEqual(tone.samples), "the allowed URL after the refused ones did not play exactly")
        let lines = harness.logLines.all
        for (url, why) in zip(urls, ["169.254.169.254 is a link-local address", "only http and https URLs are fetched, not http+unix",
                                     "::ffff:127.0.0.1 is a loopback address", "::1 is a loopback address"]) {
            #expect(lines.contains { $0.contains(url) && $0.contains(why) }, "\(url): \(why) not in \(lines)")
        }
        // Nothing was fetched from behind the redirects or the playlist.
        #expect(server.requests(for: "/secret.wav").isEmpty && server.requests(for: "/secret.ts").isEmpty)

        // Loopback itself, when its host is not allowed: refused before connecting.
        var configuration = House.Configuration()
        configuration.network = TestNetwork.houseOpener(allowing: [])
        let strict = HouseHarness(configuration: configuration)
        try await strict.connect("kitchen")
        let loopback = server.url(for: "/secret.wav")
        _ = try await strict.control(.play(files: [loopback]))
        try await strict.runLoop(until: "the refusal") { _ in strict.logLines.all.contains { $0.contains(loopback) } }
        #expect(strict.logLines.all.contains { $0.contains(loopback) && $0.contains("refused: 127.0.0.1 is a loopback address") && $0.contains("--allow-url-host 127.0.0.1") },
                "\(strict.logLines.all)")
        #expect(server.requests(for: "/secret.wav").isEmpty)
        try await server.shutdown()
    }
}
