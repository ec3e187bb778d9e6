import Testing
import TuttiProtocol

/// The reorder buffer: in order, each once, with the missing asked for once and given up on
/// after `patience` packets.
@Suite struct RAOPReorderBufferTests {
    func packet(_ sequence: UInt16) -> RAOPAudioPacket { RAOPAudioPacket(sequence: sequence, timestamp: UInt32(sequence) * 352, ssrc: 1, payload: [UInt8(truncatingIfNeeded: sequence)]) }

    @Test func reordersAsksOnceAndGivesUp() {
        var buffer = RAOPReorderBuffer(patience: 3)
        #expect(buffer.receive(packet(65534)).released.map(\.sequence) == [65534])
        // 65535 and 0 missing: asked for together, once.
        let out = buffer.receive(packet(1))
        #expect(out.released.isEmpty && out.resend.map(\.sequence) == [65535] && out.resend.map(\.count) == [2])
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
}
