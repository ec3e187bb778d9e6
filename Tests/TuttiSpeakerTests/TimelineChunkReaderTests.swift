import Foundation
import Testing
import TuttiCore
import TuttiMedia
import TuttiProtocol
@testable import TuttiSpeaker

/// The first reader of the playout: chunks decoded ahead on a worker give the same samples as
/// chunks decoded when needed, also when the audio queued for decoding is flushed and sent
/// again, when a chunk is corrupt, and when the worker never gets to a job.
@Suite struct TimelineChunkReaderTests {
    static let chunkFrames = 2048, chunkCount = 10

    /// FLAC chunks of a tone; `version` changes pitch and level, so old and new audio differ.
    static func chunks(version: Int, encoder: ChunkEncoder) throws -> [ChunkStore.Chunk] {
        let frequency = version == 0 ? 441.0 : 1003.0, level = version == 0 ? 0.5 : 0.3
        return try (0..<chunkCount).map { k in
            var samples = [Float](repeating: 0, count: 2 * chunkFrames)
            for i in 0..<chunkFrames {
                let phase = 2 * Double.pi * frequency * Double(k * chunkFrames + i) / 48000
                samples[2 * i] = Float(level * sin(phase))
                samples[2 * i + 1] = -samples[2 * i]
            }
            let payload = try samples.withUnsafeBufferPointer { try encoder.encode($0.baseAddress!, frames: chunkFrames) }
            return ChunkStore.Chunk(firstFrame: Int64(k * chunkFrames), frameCount: chunkFrames, payload: payload)
        }
    }

    static func stream(_ encoder: ChunkEncoder) -> PlayoutInputs.Stream {
        .init(id: 3, codec: .flac, sampleRate: 48000, channelCount: 2, codecHeader: encoder.codecHeader)
    }

    /// Feeds `reader` until the stream's end is in the resampler, then renders it all at step 1.
    static func play(_ reader: inout TimelineChunkReader, _ resampler: VariableRateResampler) -> [Float] {
        let end = Int64(chunkCount * chunkFrames)
        while resampler.inputEndFrame < end + Int64(resampler.lookaheadFrames) + 1, reader.feed(resampler, endFrame: end) {}
        var output = [Float](repeating: .nan, count: chunkCount * chunkFrames * 2)
        let rendered = output.withUnsafeMutableBufferPointer { resampler.render(into: $0.baseAddress!, frames: chunkCount * chunkFrames, step: 1) }
        #expect(rendered == chunkCount * chunkFrames)
        return output
    }

    static func resampler() -> VariableRateResampler {
        let resampler = VariableRateResampler(channelCount: 2, inputCapacityFrames: 65536)
        resampler.reset(firstInputFrame: -Int64(resampler.lookaheadFrames), position: FramePosition(frame: 0))
        return resampler
    }

    @Test func decodingAheadGivesTheSameSamplesThroughAFlushAndACorruptChunk() throws {
        let encoder = try ChunkEncoder(codec: .flac, sampleRate: 48000, channelCount: 2)
        let old = try Self.chunks(version: 0, encoder: encoder)
        var new = try Self.chunks(version: 1, encoder: encoder)
        new[7].payload = [UInt8](repeating: 0x5A, count: new[7].payload.count)
        let flushFrame = Int64(2 * Self.chunkFrames)

        // The reference: decoded when needed, from a store that only ever held the final audio.
        let reference = ChunkStore()
        for chunk in old[0..<2] + new[2...] { reference.insert(chunk) }
        var plain = TimelineChunkReader(chunks: reference, channelCount: 2)
        plain.open(Self.stream(encoder))
        let expected = Self.play(&plain, Self.resampler())
        #expect(plain.problem.contains("chunk at timeline frame 14336 (2048 frames) cannot be decoded"), "\(plain.problem)")

        // Decoded ahead: the worker decodes chunks 1…4 of the old audio; then chunks 2… are
        // flushed and sent again, so jobs 2…4 are stale and must not be heard.
        let worker = ChunkDecodeWorker()
        defer { worker.stop() }
        let store = ChunkStore()
        for chunk in old { store.insert(chunk) }
        var ahead = TimelineChunkReader(chunks: store, channelCount: 2, worker: worker)
        ahead.open(Self.stream(encoder))
        let resampler = Self.resampler()
        // Silence before frame 0 (the kernel's lookahead), then chunk 0, which queues 1…4.
        while resampler.inputEndFrame < Int64(Self.chunkFrames), ahead.feed(resampler, endFrame: Int64(Self.chunkCount * Self.chunkFrames)) {}
        #expect(resampler.inputEndFrame == Int64(Self.chunkFrames))
        worker.waitUntilIdle()
        store.flush(from: flushFrame)
        for chunk in new[2...] { store.insert(chunk) }
        let heard = Self.play(&ahead, resampler)
        #expect(ahead.problem == plain.problem)
        let firstDifference = heard.indices.first { heard[$0] != expected[$0] }
        #expect(firstDifference == nil, "first difference at sample \(firstDifference ?? -1)")

        // The new audio is heard, not the old (the test would pass vacuously if both were silent).
        func rms(_ range: Range<Int>) -> Double {
            (heard[range].reduce(0.0) { $0 + Double($1) * Double($1) } / Double(range.count)).squareRoot()
        }
        let oldLevel = rms(0..<(Int(flushFrame) * 2)), newLevel = rms((Int(flushFrame) * 2 + 200)..<(14336 * 2))
        #expect(abs(oldLevel - 0.5 / 2.0.squareRoot()) < 0.01, "\(oldLevel)")
        #expect(abs(newLevel - 0.3 / 2.0.squareRoot()) < 0.01, "\(newLevel)")
    }

    /// A worker that never runs its jobs: the reader takes every one back and decodes it itself.
    @Test func jobsTheWorkerNeverStartsAreDecodedByTheReader() throws {
        let encoder = try ChunkEncoder(codec: .flac, sampleRate: 48000, channelCount: 2)
        let chunks = try Self.chunks(version: 0, encoder: encoder)
        let reference = ChunkStore(), store = ChunkStore()
        for chunk in chunks { reference.insert(chunk); store.insert(chunk) }
        var plain = TimelineChunkReader(chunks: reference, channelCount: 2)
        plain.open(Self.stream(encoder))
        let worker = ChunkDecodeWorker()
        worker.stop()
        var ahead = TimelineChunkReader(chunks: store, channelCount: 2, worker: worker)
        ahead.open(Self.stream(encoder))
        let expected = Self.play(&plain, Self.resampler())
        #expect(Self.play(&ahead, Self.resampler()) == expected)
        #expect(expected.contains { $0 != 0 })
    }
}
