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
        let channel = EmbeddedChannel(handler: ClockSyncResponder(clock: clock, seed: 5), loop: loop)
        let peer = try SocketAddress(ipAddress: "127.0.0.1", port: 9)
        var holds: [Int64] = []
        for sequence in 0..<UInt32(count) {
            let request = ClockSyncPacket(isReply: false, sequence: sequence, clientSend: 1_000)
            let sent = Int64(loop.now.uptimeNanoseconds)
            try channel.writeInbound(StampedDatagram(envelope: AddressedEnvelope(remoteAddress: peer, data: ByteBuffer(bytes: request.encoded())), arrival: sent))
            // Step the loop's time (and the house clock with it) until the reply leaves.
            var reply: AddressedEnvelope<ByteBuffer>?
            for _ in 0..<2_000 {
                if let out = try channel.readOutbound(as: AddressedEnvelope<ByteBuffer>.self) { reply = out; break }
                loop.advanceTime(by: .microseconds(10))
                clock.advance(by: 10_000)
            }
            let packet = try ClockSyncPacket(decoding: try #require(reply).data.readableBytesView)
            #expect(packet.isReply && packet.sequence == sequence && packet.serverReceive == sent)
            holds.append(packet.serverSend - packet.serverReceive)
        }
        return holds
    }

    @Test func repliesAreHeldARandomPartOfTenMilliseconds() throws {
        let holds = try holds()
        print("holds: \(holds.min()! / 1000)–\(holds.max()! / 1000) µs")
        // The dither spans 10 ms, a 100 Hz timer grid, evenly: 200 draws reach into every
        // tenth of it (a 2 ms dither left half of a 4 ms grid unsampled).
        #expect(holds.allSatisfy { $0 >= 0 && $0 < 10_000_000 })
        for tenth in 0..<10 { #expect(holds.contains { $0 / 1_000_000 == tenth }, "no hold in \(tenth)–\(tenth + 1) ms") }
    }
}
