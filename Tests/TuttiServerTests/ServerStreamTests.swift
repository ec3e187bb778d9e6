import Testing
import TuttiMedia
@testable import TuttiServer

/// The stream's chunk list across a truncation (a queue edit restarting production).
@Suite struct ServerStreamTests {
    /// A cancelled producer may still be finishing a block when the house cuts the stream; what
    /// it writes after the cut must not land between the cut and the new producer's chunks.
    @Test func aCancelledProducerCannotWriteAfterTheCut() {
        let stream = ServerStream(id: 1, codec: .flac, sampleRate: 48000, channelCount: 2, codecHeader: [], paths: ["a.flac"])
        let old = stream.epoch
        stream.append(ServerChunk(firstFrame: 0, frameCount: 2048, payload: []), epoch: old)
        stream.append(ServerChunk(firstFrame: 2048, frameCount: 2048, payload: []), epoch: old)
        stream.truncate(at: 3000, paths: ["a.flac", "b.flac"])
        let new = stream.epoch
        #expect(new != old)
        #expect(stream.chunkCount == 2 && stream.producedEnd == 3000)

        // The old producer's last block and its end of queue arrive late: dropped.
        stream.append(ServerChunk(firstFrame: 4096, frameCount: 2048, payload: []), epoch: old)
        stream.finish(at: 6144, epoch: old)
        #expect(stream.chunkCount == 2 && stream.producedEnd == 3000 && stream.endFrame == nil)

        // The new producer continues from the cut.
        stream.append(ServerChunk(firstFrame: 3000, frameCount: 2048, payload: []), epoch: new)
        stream.finish(at: 5048, epoch: new)
        #expect(stream.chunkCount == 3 && stream.producedEnd == 5048 && stream.endFrame == 5048)
    }
}
