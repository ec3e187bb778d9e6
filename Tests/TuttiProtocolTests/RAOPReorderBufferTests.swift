import Testing
import TuttiProtocol

/// The reorder buffer: in order, each once, with the missing asked for once and given up on
/// after `patience` packets.
@Suite struct RAOPReorderBufferTests {
    func packet(_ sequence: UInt16) -> RAOPAudioPacket { RAOPAudioPacket(sequence: sequence, timestamp: UInt32(sequence) * 352, ssrc: 1, payload: [UInt8(truncatingIfNeeded: sequence)]) }

    @Test func reordersAsksOnceAndGivesUp() {
        var buffer = RAOPReorderBuffer(patience: 3)
        #expect(buffer.receive(packet(65534)).released.map(\.sequence) == [65534])
        // 65535 and 0 missing: asked for once, in two ranges (a range does not wrap).
        let out = buffer.receive(packet(1))
        #expect(out.released.isEmpty && out.resend.map(\.sequence) == [65535, 0] && out.resend.map(\.count) == [1, 1])
        #expect(buffer.receive(packet(2)).resend.isEmpty)
        // The resend of 65535 arrives: released with nothing after it yet (0 still missing).
        #expect(buffer.receive(packet(65535)).released.map(\.sequence) == [65535])
        // A third packet after the gap: 0 is given up on, then 1, 2, 3 follow.
        let late = buffer.receive(packet(3))
        #expect(late.released.map(\.sequence) == [0, 1, 2, 3] && late.released.first?.packet == nil)
        // A duplicate, and one from before: dropped.
        #expect(buffer.receive(packet(2)).released.isEmpty && buffer.receive(packet(65000)).released.isEmpty)
        #expect(buffer.duplicates == 2 && buffer.givenUp == 1 && buffer.resendsAsked == 2)
    }

    /// A forged number far ahead (a stranger's datagram) asks for nothing and changes nothing; a
    /// run of them, each the next, is a sender that moved on, and the order starts there.
    @Test func farAheadIsAForgeryUntilARunMakesItAJump() {
        var buffer = RAOPReorderBuffer(patience: 4)
        _ = buffer.receive(packet(100))
        let forged = buffer.receive(packet(30_000))
        #expect(forged.released.isEmpty && forged.resend.isEmpty)
        #expect(buffer.receive(packet(101)).released.map(\.sequence) == [101])
        // 102 held (103 missing), then the sender's numbers move on by 5000.
        _ = buffer.receive(packet(103))
        var released: [UInt16] = []
        for sequence in UInt16(5000)..<5008 {
            let out = buffer.receive(packet(sequence))
            #expect(out.resend.isEmpty)
            released += out.released.map(\.sequence)
        }
        #expect(released == [102, 103] + Array(5000..<5008), "\(released)")
        #expect(buffer.jumps == 1 && buffer.farAhead == 9)
        #expect(buffer.receive(packet(5008)).released.map(\.sequence) == [5008])
    }

    /// After a flush from a sequence number, packets before it (late, or resent) are void.
    @Test func aFlushVoidsWhatCameBefore() {
        var buffer = RAOPReorderBuffer()
        _ = buffer.receive(packet(10))
        buffer.reset(next: 500)
        #expect(buffer.receive(packet(11)).released.isEmpty)
        #expect(buffer.receive(packet(500)).released.map(\.sequence) == [500])
    }
}
