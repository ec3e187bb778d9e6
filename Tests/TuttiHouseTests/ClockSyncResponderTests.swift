import Crypto
import NIOCore
import NIOEmbedded
import Testing
import TuttiCore
@testable import TuttiHouse
import TuttiProtocol
import TuttiSimulation

/// The house's side of clock sync: each reply held a random part of the dither, so that a timer
/// grid on the path cannot hide the way back's floor.
@Suite struct ClockSyncResponderTests {
    /// Sends `count` requests and returns, for each reply, how long after its
    /// request it left (the loop's time; the reply's t3 is the house clock's, here the same).
    func holds(count: Int = 200) throws -> [Int64] {
        let loop = EmbeddedEventLoop()
        let clock = ManualClock(startingAt: 0)
        let sessions = ClockSyncSessions()
        let key = Self.key(7)
        sessions.register(key)
        let channel = EmbeddedChannel(handler: ClockSyncResponder(clock: clock, sessions: sessions, seed: 5), loop: loop)
        let peer = try SocketAddress(ipAddress: "127.0.0.1", port: 9)
        var holds: [Int64] = []
        for sequence in 0..<UInt32(count) {
            let request = ClockSyncPacket(isReply: false, sequence: sequence, clientSend: 1_000)
            let sent = Int64(loop.now.uptimeNanoseconds)
            try channel.writeInbound(StampedDatagram(envelope: AddressedEnvelope(remoteAddress: peer, data: ByteBuffer(bytes: request.encoded(key: key))), arrival: sent))
            // Step the loop's time (and the house clock with it) until the reply leaves.
            var reply: AddressedEnvelope<ByteBuffer>?
            for _ in 0..<2_000 {
                if let out = try channel.readOutbound(as: AddressedEnvelope<ByteBuffer>.self) { reply = out; break }
                loop.advanceTime(by: .microseconds(10))
                clock.advance(by: 10_000)
            }
            let bytes = try #require(reply).data.readableBytesView
            let packet = try ClockSyncPacket(decoding: bytes)
            #expect(packet.isReply && packet.sequence == sequence && packet.serverReceive == sent)
            #expect(ClockSyncPacket.isAuthentic(bytes, key: key), "a reply without the session's tag")
            holds.append(packet.serverSend - packet.serverReceive)
        }
        return holds
    }

    static func key(_ id: UInt64) -> ClockSyncKey {
        ClockSyncKey(sessionID: id, key: SymmetricKey(size: .bits256))
    }

    /// Only a request of a session the house holds, with that session's tag, is answered: a
    /// stranger's, a forged one, one of a session that ended, get nothing (and the house is
    /// no reflector for anyone's traffic).
    @Test func onlyTaggedRequestsOfAHeldSessionAreAnswered() throws {
        let loop = EmbeddedEventLoop()
        let clock = ManualClock(startingAt: 0)
        let sessions = ClockSyncSessions()
        let held = Self.key(7), stranger = Self.key(8), forger = ClockSyncKey(sessionID: 7, key: SymmetricKey(size: .bits256))
        sessions.register(held)
        let channel = EmbeddedChannel(handler: ClockSyncResponder(clock: clock, sessions: sessions, replyDitherNanoseconds: 0), loop: loop)
        let peer = try SocketAddress(ipAddress: "127.0.0.1", port: 9)
        func answered(_ bytes: [UInt8]) throws -> Bool {
            try channel.writeInbound(StampedDatagram(envelope: AddressedEnvelope(remoteAddress: peer, data: ByteBuffer(bytes: bytes)), arrival: 5))
            return try channel.readOutbound(as: AddressedEnvelope<ByteBuffer>.self) != nil
        }
        let request = ClockSyncPacket(isReply: false, sequence: 1, clientSend: 1_000)
        #expect(try answered(request.encoded(key: held)))
        #expect(try !answered(request.encoded()), "an untagged request")
        #expect(try !answered(request.encoded(key: stranger)), "a session the house does not hold")
        #expect(try !answered(request.encoded(key: forger)), "a held session's id with another key")
        var flipped = request.encoded(key: held)
        flipped[12] ^= 1
        #expect(try !answered(flipped), "an altered request")
        sessions.remove(sessionID: 7)
        #expect(try !answered(request.encoded(key: held)), "a session that ended")
    }

    /// A request that names when to reply (its t3 field, `AimedExchanges`) is answered then, if
    /// that is ahead and within `maximumRequestedHold` of its arrival; one asking for more, or
    /// for a time already past, gets the dither, never a hold the room chose without limit.
    @Test func aRequestedReplyTimeIsKeptWithinItsLimit() throws {
        let loop = EmbeddedEventLoop()
        let clock = ManualClock(startingAt: 0)
        let sessions = ClockSyncSessions()
        let key = Self.key(7)
        sessions.register(key)
        let channel = EmbeddedChannel(handler: ClockSyncResponder(clock: clock, sessions: sessions, seed: 5), loop: loop)
        let peer = try SocketAddress(ipAddress: "127.0.0.1", port: 9)
        func reply(requesting replyAt: Int64, arrivedAgo: Int64 = 0) throws -> ClockSyncPacket {
            let arrival = clock.now() - arrivedAgo
            let request = ClockSyncPacket(isReply: false, sequence: 1, clientSend: 1_000, serverSend: replyAt)
            try channel.writeInbound(StampedDatagram(envelope: AddressedEnvelope(remoteAddress: peer, data: ByteBuffer(bytes: request.encoded(key: key))), arrival: arrival))
            for _ in 0..<4_000 {
                if let out = try channel.readOutbound(as: AddressedEnvelope<ByteBuffer>.self) { return try ClockSyncPacket(decoding: out.data.readableBytesView) }
                // The house clock first: a task the loop runs at its time reads it.
                clock.advance(by: 10_000)
                loop.advanceTime(by: .microseconds(10))
            }
            throw WireError("no reply")
        }
        for hold: Int64 in [1_230_000, 7_770_000, 24_990_000, ClockSyncResponder.maximumRequestedHold] {
            let now = clock.now()
            let answer = try reply(requesting: now + hold)
            #expect(answer.serverSend == now + hold, "asked for a reply \(hold / 1000) µs on")
        }
        // The limit runs from the request's arrival, not from when the house got to it: one
        // stamped 3 ms ago may be held 22 ms more, not 25.
        let now = clock.now()
        let late = try reply(requesting: now + 21_000_000, arrivedAgo: 3_000_000)
        #expect(late.serverSend == now + 21_000_000)
        let tooLate = try reply(requesting: clock.now() + 22_000_001, arrivedAgo: 3_000_000)
        #expect(tooLate.serverSend - tooLate.serverReceive < 20_000_000 + 3_000_000 && tooLate.serverSend != tooLate.serverReceive + 25_000_001)
        let justOver = clock.now()
        let over = try reply(requesting: justOver + ClockSyncResponder.maximumRequestedHold + 1)
        #expect(over.serverSend - justOver < 20_000_000, "held past its limit")
        // Further than the limit: the dither (a random part of 20 ms), not the hold asked for.
        var dithered: [Int64] = []
        for _ in 0..<20 {
            let now = clock.now()
            let answer = try reply(requesting: now + 30_000_000)
            dithered.append(answer.serverSend - now)
        }
        #expect(dithered.allSatisfy { $0 < 20_000_000 }, "held \(dithered.map { $0 / 1000 }) µs")
        // A time already past: the dither too, not an answer at once (a reply sent straight
        // after its request's arrival would leave at one phase of a grid).
        var pastHolds: [Int64] = []
        for _ in 0..<5 {
            clock.advance(by: 1_000_000)
            let past = try reply(requesting: clock.now() - 500_000)
            pastHolds.append(past.serverSend - past.serverReceive)
        }
        #expect(pastHolds.allSatisfy { $0 < 20_000_000 } && pastHolds.contains { $0 > 100_000 }, "held \(pastHolds.map { $0 / 1000 }) µs")
    }

    @Test func repliesAreHeldARandomPartOfTwentyMilliseconds() throws {
        let holds = try holds()
        print("holds: \(holds.min()! / 1000)–\(holds.max()! / 1000) µs")
        // The dither spans 20 ms evenly, whole periods of a 1, 2, 4, 5 and 10 ms timer grid:
        // 200 draws reach into every 2 ms of it (a 2 ms dither left half of a 4 ms grid
        // unsampled, a 10 ms one sampled half of it more than the other).
        #expect(holds.allSatisfy { $0 >= 0 && $0 < 20_000_000 })
        #expect(holds.contains { $0 >= 10_000_000 }, "no hold past 10 ms")
        for slice in 0..<10 { #expect(holds.contains { $0 / 2_000_000 == slice }, "no hold in \(2 * slice)–\(2 * slice + 2) ms") }
    }
}
