import Crypto
import NIOCore
import NIOEmbedded
import Testing
import TuttiCore
import TuttiProtocol
import TuttiSimulation
@testable import TuttiSpeaker

/// The speaker's pace of clock-sync requests, on a test loop and clock: about 290 a second in its
/// first seconds, and the settled 20 a second while the house holds replies longer than its
/// dither (a house behind on its clock thread, which faster requests would only put further
/// behind).
@Suite struct ClockSyncClientTests {
    final class Harness {
        let loop = EmbeddedEventLoop()
        let clock = ManualClock(startingAt: 0)
        let channel: EmbeddedChannel
        let client: ClockSyncClient
        let house = try! SocketAddress(ipAddress: "127.0.0.1", port: 9)
        /// The connection's clock-sync session, as its handshake agreed it.
        let key = ClockSyncKey(sessionID: 5, key: SymmetricKey(size: .bits256))

        init() throws {
            channel = EmbeddedChannel(loop: loop)
            // Active, as a bound datagram socket is (the client sends only on an active channel).
            try channel.connect(to: house).wait()
            var configuration = ClockSyncClient.Configuration()
            configuration.seed = 3
            client = ClockSyncClient(server: house, clock: clock, configuration: configuration) { _ in }
            try client.attach(to: channel)
            loop.run()
            // No session, no request: the room is not yet admitted, or between connections.
            let early = try channel.readOutbound(as: AddressedEnvelope<ByteBuffer>.self)
            precondition(early == nil, "a request before the session")
            client.setSession(key)
            loop.run()
        }

        /// Moves the loop and the clock together by `nanoseconds`, in 100 µs steps.
        func advance(_ nanoseconds: Int64) {
            for _ in 0..<(nanoseconds / 100_000) {
                loop.advanceTime(by: .microseconds(100))
                clock.advance(by: 100_000)
            }
        }

        /// The requests sent so far and not yet read.
        func requests() throws -> [ClockSyncPacket] {
            var out: [ClockSyncPacket] = []
            while let envelope = try channel.readOutbound(as: AddressedEnvelope<ByteBuffer>.self) {
                out.append(try ClockSyncPacket(decoding: envelope.data.readableBytesView))
            }
            return out
        }

        /// The house's reply to `request`, received now, held `hold` at the house.
        func reply(to request: ClockSyncPacket, hold: Int64, key: ClockSyncKey? = nil) throws {
            let now = clock.now()
            let reply = ClockSyncPacket(isReply: true, sequence: request.sequence, clientSend: request.clientSend,
                                        serverReceive: now - hold - 100_000, serverSend: now - 100_000)
            try channel.writeInbound(AddressedEnvelope(remoteAddress: house, data: ByteBuffer(bytes: reply.encoded(key: key ?? self.key))))
        }
    }

    /// Requests carry the session's tag; a reply without it (forged, or under another key) is
    /// dropped and moves nothing.
    @Test func aForgedReplyMovesNothing() throws {
        let h = try Harness()
        let first = try #require(try h.requests().first)
        #expect(first.sessionID == h.key.sessionID)
        h.advance(1_000_000)
        try h.reply(to: first, hold: 100_000, key: ClockSyncKey(sessionID: 5, key: SymmetricKey(size: .bits256)))
        #expect(h.client.forgedReplies == 1 && h.client.exchanges.received == 0)
        try h.reply(to: first, hold: 100_000)
        #expect(h.client.forgedReplies == 1 && h.client.exchanges.received == 1)
        // Paused between connections: nothing is sent.
        h.client.setSession(nil)
        h.advance(100_000_000)
        _ = try h.requests()
        h.advance(100_000_000)
        #expect(try h.requests().isEmpty)
        h.client.setSession(h.key)
        h.advance(1_000_000)
        #expect(try h.requests().count >= 1, "the exchanges resume with a session")
    }

    @Test func startsFastAndBacksOffWhileTheHouseIsBehind() throws {
        let h = try Harness()
        let first = try #require(try h.requests().first)
        h.advance(2_000_000)
        try h.reply(to: first, hold: 1_000_000)
        // In the first seconds: the next request within 2.5–4.5 ms.
        h.advance(2_600_000)
        let second = try h.requests()
        #expect(second.count == 1, "\(second.count) requests in 4.6 ms")
        // A reply held 50 ms, over the 40 ms a reply is held at most when the house keeps up
        // (its dither spans 20 ms), and so back over 50 ms after its request (a reply held
        // longer than its round trip is impossible, and the estimator refuses it): the house
        // is behind. The request after next waits the settled interval (50–52 ms); the next
        // was already on its way.
        h.advance(55_000_000)
        _ = try h.requests()
        try h.reply(to: second[0], hold: 50_000_000)
        h.advance(4_600_000)
        let third = try h.requests()
        #expect(third.count == 1)
        h.advance(45_000_000)
        #expect(try h.requests().isEmpty, "a request within 50 ms while the house was behind")
        h.advance(7_000_000)
        #expect(try h.requests().count == 1)
        // Two seconds on, the house answering in time again: fast once more.
        h.advance(2_000_000_000)
        _ = try h.requests()
        h.advance(60_000_000)
        let again = try h.requests()
        try h.reply(to: try #require(again.last), hold: 1_000_000)
        h.advance(60_000_000)
        // Past the first 3 s: the fast rate (10–12 ms), not the settled one (50–52 ms).
        let fast = try h.requests()
        #expect(fast.count >= 4, "\(fast.count) requests in 60 ms once the house kept up")
    }
}
