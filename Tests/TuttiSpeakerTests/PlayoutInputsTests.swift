import Testing
import TuttiProtocol
@testable import TuttiSpeaker

/// What a reconnecting speaker says it holds: its stream, the last cut it was told of, and the
/// gap-free stretches of its buffer.
@Suite struct PlayoutInputsTests {
    @Test func theResumeNamesTheStreamTheEpochAndTheHeldRanges() {
        let inputs = PlayoutInputs()
        #expect(inputs.resume == nil)
        inputs.startStream(.init(id: 6, codec: .pcm, sampleRate: 48000, channelCount: 2, codecHeader: []), epoch: 2)
        for first in [0, 2048, 8192] as [Int64] {
            inputs.receive(.init(firstFrame: first, frameCount: 2048, payload: [1]), streamID: 6, at: 0)
        }
        // A chunk of another stream is not kept.
        inputs.receive(.init(firstFrame: 4096, frameCount: 2048, payload: [1]), streamID: 5, at: 0)
        #expect(inputs.resume == .init(streamID: 6, epoch: 2, held: [0..<4096, 8192..<10240]))
        inputs.flush(streamID: 6, from: 9000, epoch: 3)
        #expect(inputs.resume == .init(streamID: 6, epoch: 3, held: [0..<4096, 8192..<9000]))
        inputs.flush(streamID: 6, from: .min)
        #expect(inputs.resume == nil)
    }

    @Test func atMostEightRangesAreNamedTheEarliestFirst() {
        let store = ChunkStore()
        for k in 0..<20 { store.insert(.init(firstFrame: Int64(k) * 4096, frameCount: 2048, payload: [1])) }
        let ranges = store.ranges(maximum: WireMessage.Resume.maximumRanges)
        #expect(ranges.count == 8)
        #expect(ranges.first == 0..<2048 && ranges.last == (7 * 4096)..<(7 * 4096 + 2048))
    }
}
