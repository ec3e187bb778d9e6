import NIOCore
import NIOPosix
import Testing
import TuttiCore
import TuttiSimulation
@testable import TuttiSpeaker

/// How a room retries the house: jittered, capped waits, and one-line reasons for real
/// connection failures.
@Suite struct SpeakerReconnectTests {
    @Test func backoffDoublesToTwoSecondsWithJitter() {
        var backoff = ReconnectBackoff(random: SplitMix64(seed: 5))
        let nominal: [Int64] = [100, 200, 400, 800, 1600, 2000, 2000, 2000].map { $0 * 1_000_000 }
        var waits: [Int64] = []
        for expected in nominal {
            let wait = backoff.next()
            #expect(Double(wait) >= 0.8 * Double(expected) && Double(wait) <= 1.2 * Double(expected), "\(wait) for \(expected)")
            waits.append(wait)
        }
        // Jittered: not exactly the nominal values.
        #expect(waits != nominal)
        backoff.reset()
        #expect(backoff.current == ReconnectBackoff.first)
    }

    /// A port nobody listens on, and a name that does not resolve, as a real connect reports them.
    @Test func connectionFailuresAreNamedInAFewWords() async throws {
        let group = MultiThreadedEventLoopGroup.singleton
        // Bind and close, so the port is known to be free.
        let probe = try await ServerBootstrap(group: group).bind(host: "127.0.0.1", port: 0).get()
        let port = probe.localAddress!.port!
        try await probe.close()
        do {
            _ = try await ClientBootstrap(group: group).connect(host: "127.0.0.1", port: port).get()
            Issue.record("connected to a closed port")
        } catch {
            #expect(SpeakerClient.describe(error) == "connection refused", "\(error)")
        }
        do {
            _ = try await ClientBootstrap(group: group).connect(host: "no-such-house.invalid", port: 4953).get()
            Issue.record("resolved an invalid name")
        } catch {
            #expect(SpeakerClient.describe(error).hasPrefix("cannot resolve no-such-house.invalid"), "\(error)")
        }
    }
}
