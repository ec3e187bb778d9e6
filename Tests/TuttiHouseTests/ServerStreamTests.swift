import Testing
@testable import TuttiHouse
import TuttiProtocol

/// The stream's chunk list across a truncation (a queue edit cutting the timeline).
@Suite struct ServerStreamTests {
    /// A block decoded before a cut must not land after it, and a room learns of every cut,
    /// in order, with the chunk it must be sent from next.
    @Test func writesFromBeforeACutAreDroppedAndCutsAreRecorded() throws {
        let stream = ServerStream(id: 1, codec: .flac, sampleRate: 48000, channelCount: 2, codecHeader: [])
        let old = stream.epoch
        stream.append(ServerChunk(streamID: 1, firstFrame: 0, frameCount: 2048, payload: []), epoch: old)
        stream.append(ServerChunk(streamID: 1, firstFrame: 2048, frameCount: 2048, payload: []), epoch: old)
        let new = stream.truncate(at: 3000)
        #expect(new != old && new == stream.epoch)
        #expect(stream.chunkCount == 2 && stream.producedEnd == 3000)
        #expect(stream.chunk(at: 0, epoch: old) == nil)
        #expect(stream.chunk(at: 1, epoch: new)?.frameCount == 952)
        // What a room is sent of the cut chunk says the same: a room joining after the cut
        // must not take frames the cut removed (the chunk was framed before it).
        var wire = try #require(stream.chunk(at: 1, epoch: new)?.wire)
        guard case .audioChunk(let sent)? = try WireMessage.decode(from: &wire) else { Issue.record("not an audio chunk"); return }
        #expect(sent.frameCount == 952 && sent.firstFrame == 2048 && sent.streamID == 1)

        // A write under the old epoch arrives late: dropped.
        stream.append(ServerChunk(streamID: 1, firstFrame: 4096, frameCount: 2048, payload: []), epoch: old)
        stream.finish(at: 6144, epoch: old)
        #expect(stream.chunkCount == 2 && stream.producedEnd == 3000 && stream.endFrame == nil)

        // Production goes on from the cut.
        stream.append(ServerChunk(streamID: 1, firstFrame: 3000, frameCount: 2048, payload: []), epoch: new)
        stream.finish(at: 5048, epoch: new)
        #expect(stream.chunkCount == 3 && stream.producedEnd == 5048 && stream.endFrame == 5048)
        #expect(stream.end(epoch: new)?.frame == 5048 && stream.end(epoch: old) == nil)

        // A second cut at the end: a room still at the first epoch is told both.
        let third = stream.truncate(at: 5048)
        let (cuts, epoch) = stream.cuts(after: old)
        #expect(epoch == third)
        #expect(cuts == [ServerStream.Cut(epoch: new, frame: 3000, chunkCount: 2), ServerStream.Cut(epoch: third, frame: 5048, chunkCount: 3)])
        #expect(stream.cuts(after: third).cuts.isEmpty)
        #expect(stream.joinPoint(at: 4000) == (chunk: 2, epoch: third))
    }
}
