import TuttiCore
import TuttiStreamAudio
import TuttiProtocol

/// The first reader of a room's playout: the stream's timeline as decoded PCM, from the chunks
/// in the `ChunkStore` — silence before the stream's first frame and after its end, and
/// silence (said once, in `problem`) for a chunk that cannot be decoded.
///
/// It appends to a `VariableRateResampler`'s input, the next reader. Given a
/// `ChunkDecodeWorker`, it has the next few chunks decoded there ahead of need (same samples).
/// Not thread-safe: the one thread that clocks the playout.
struct TimelineChunkReader {
    /// Chunks decoded ahead on the worker: about 170 ms at 48 kHz in 2048-frame chunks.
    static let chunksDecodedAhead = 4

    private let chunks: ChunkStore
    private let channelCount: Int
    private let worker: ChunkDecodeWorker?
    private var decoder: ChunkDecoder?
    /// The decoder the worker uses for this reader's jobs (only ever on the worker thread).
    private var aheadDecoder: ChunkDecoder?
    /// Jobs submitted to the worker, in timeline order.
    private var ahead: [ChunkDecodeJob] = []
    /// The chunk whose samples `decoded` holds, so feeding from it again does not decode it again.
    private var decodedChunk: (firstFrame: Int64, payload: [UInt8], frames: Int)?
    private var streamID: UInt32 = 0
    private var decoded: [Float] = []
    private var zeros: [Float]
    /// Why audio that arrived cannot be played, in one line; empty when nothing is wrong.
    private(set) var problem = ""

    init(chunks: ChunkStore, channelCount: Int, worker: ChunkDecodeWorker? = nil) {
        self.chunks = chunks
        self.channelCount = channelCount
        self.worker = worker
        zeros = [Float](repeating: 0, count: 4096 * channelCount)
    }

    var canDecode: Bool { decoder != nil }

    /// Opens the decoder of `stream` (nil: no stream). A stream this room cannot play leaves it
    /// closed, with the reason in `problem`.
    mutating func open(_ stream: PlayoutInputs.Stream?) {
        decoder = nil
        aheadDecoder = nil
        retireAhead()
        decodedChunk = nil
        problem = ""
        guard let stream else { return }
        streamID = stream.id
        guard stream.channelCount == channelCount else {
            // External data: the house sent a stream this room's device cannot play.
            problem = "stream \(stream.id) has \(stream.channelCount) channels, this room's output \(channelCount); silent until the next stream"
            return
        }
        do {
            decoder = try ChunkDecoder(codec: stream.codec, sampleRate: stream.sampleRate, channelCount: stream.channelCount, codecHeader: stream.codecHeader)
            if worker != nil {
                aheadDecoder = try ChunkDecoder(codec: stream.codec, sampleRate: stream.sampleRate, channelCount: stream.channelCount, codecHeader: stream.codecHeader)
            }
        } catch {
            problem = "stream \(stream.id): cannot open its \(stream.codec.wireName) decoder: \(error.reason); silent until the next stream"
        }
    }

    /// Appends the next stretch of the timeline to `resampler`'s input. False when the audio
    /// there has not arrived (or the resampler is full).
    mutating func feed(_ resampler: VariableRateResampler, endFrame: Int64?) -> Bool {
        let frame = resampler.inputEndFrame
        if frame < 0 || (endFrame.map { frame >= $0 } ?? false) {
            return appendSilence(frame < 0 ? min(-frame, 4096) : 4096, to: resampler)
        }
        guard let chunk = chunks.chunk(containing: frame), let decoder else { return false }
        let frames: Int
        do { frames = try decode(chunk, with: decoder) } catch {
            // A corrupt chunk plays as silence for its length: the timeline goes on.
            problem = "stream \(streamID): chunk at timeline frame \(chunk.firstFrame) (\(chunk.frameCount) frames) cannot be decoded: \(error.reason); playing silence for it"
            return appendSilence(chunk.firstFrame + Int64(chunk.frameCount) - frame, to: resampler)
        }
        if frames < chunk.frameCount {
            problem = "stream \(streamID): chunk at timeline frame \(chunk.firstFrame) decoded to \(frames) of its \(chunk.frameCount) frames; playing silence for the rest"
            decoded.removeSubrange((frames * channelCount)...)
            decoded += [Float](repeating: 0, count: (chunk.frameCount - frames) * channelCount)
        }
        let skip = Int(frame - chunk.firstFrame)
        let count = min(chunk.frameCount - skip, resampler.writableFrames)
        guard count > 0 else { return false }
        return decoded.withUnsafeBufferPointer { resampler.appendInput($0.baseAddress! + skip * channelCount, frames: count) } > 0
    }

    /// Decodes `chunk` into `decoded`, or takes what the worker decoded for it, and has the
    /// chunks after it decoded ahead.
    private mutating func decode(_ chunk: ChunkStore.Chunk, with decoder: ChunkDecoder) throws(MediaError) -> Int {
        if let last = decodedChunk, last.firstFrame == chunk.firstFrame, ChunkDecodeJob.sameStorage(last.payload, chunk.payload) {
            return last.frames
        }
        decodedChunk = nil
        defer { decodeAhead(after: chunk) }
        // Jobs for chunks before this one will not be needed.
        while let job = ahead.first, job.firstFrame < chunk.firstFrame { Self.retire(job); ahead.removeFirst() }
        var frames: Int?
        if let job = ahead.first, job.firstFrame == chunk.firstFrame {
            ahead.removeFirst()
            if !job.holds(chunk.payload) {
                // The audio was flushed and sent again: what was queued is stale.
                Self.retire(job)
                retireAhead()
            } else if !job.state.compareExchange(expected: ChunkDecodeJob.queued, desired: ChunkDecodeJob.takenBack, ordering: .acquiringAndReleasing).exchanged {
                worker!.waitUntilDone(job)
                frames = try job.takeSamples(into: &decoded).get()
            }
        }
        let count: Int
        if let frames { count = frames } else { count = try decoder.decode(chunk.payload, into: &decoded) }
        decodedChunk = (chunk.firstFrame, chunk.payload, count)
        return count
    }

    private mutating func decodeAhead(after chunk: ChunkStore.Chunk) {
        guard let worker, let aheadDecoder, ahead.count < Self.chunksDecodedAhead else { return }
        let from = max(ahead.last?.firstFrame ?? chunk.firstFrame, chunk.firstFrame)
        for next in chunks.chunks(after: from, maximum: Self.chunksDecodedAhead - ahead.count) {
            let job = ChunkDecodeJob(firstFrame: next.firstFrame, payload: next.payload, decoder: aheadDecoder)
            ahead.append(job)
            worker.submit(job)
        }
    }

    private mutating func retireAhead() {
        for job in ahead { Self.retire(job) }
        ahead.removeAll()
    }

    /// A job not yet started is skipped by the worker; one running finishes unread.
    private static func retire(_ job: ChunkDecodeJob) {
        _ = job.state.compareExchange(expected: ChunkDecodeJob.queued, desired: ChunkDecodeJob.takenBack, ordering: .acquiringAndReleasing)
    }

    private func appendSilence(_ frames: Int64, to resampler: VariableRateResampler) -> Bool {
        let count = Int(min(frames, 4096))
        guard count > 0 else { return false }
        return zeros.withUnsafeBufferPointer { resampler.appendInput($0.baseAddress!, frames: count) } > 0
    }
}
