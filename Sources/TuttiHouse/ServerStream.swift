import Foundation
import NIOCore
import Synchronization
import TuttiMedia
import TuttiProtocol
import TuttiEngine

/// One encoded chunk of a server stream, on the stream's timeline.
struct ServerChunk: Sendable {
    let firstFrame: Int64
    private(set) var frameCount: Int
    /// The chunk's whole wire message (`WireMessage.audioChunk`), framed once and sent as it
    /// is to every room (`FramedChunkWriter`); its frame count is always `frameCount`.
    private(set) var wire: ByteBuffer
    var endFrame: Int64 { firstFrame + Int64(frameCount) }

    init(streamID: UInt32, firstFrame: Int64, frameCount: Int, payload: [UInt8]) {
        self.firstFrame = firstFrame
        self.frameCount = frameCount
        var wire = ByteBufferAllocator().buffer(capacity: payload.count + 64)
        WireMessage.audioChunk(.init(streamID: streamID, firstFrame: firstFrame, frameCount: UInt32(frameCount), payload: payload)).encode(into: &wire)
        self.wire = wire
    }

    /// Keeps only the first `frames` frames: a cut inside the chunk. The payload stays whole (a
    /// room decodes it and keeps what the count says); the wire message is framed again with
    /// the new count, so a room sent the chunk after the cut gets no frame the cut removed.
    /// Buffers already handed to NIO keep their bytes (`ByteBuffer` copies on write).
    mutating func shorten(to frames: Int) {
        precondition(frames > 0 && frames <= frameCount, "a chunk of \(frameCount) frames cannot be cut to \(frames)")
        var framed = wire
        guard case .audioChunk(var message)? = try? WireMessage.decode(from: &framed) else {
            preconditionFailure("a ServerChunk's wire holds its own audio chunk")
        }
        message.frameCount = UInt32(frames)
        var reframed = ByteBufferAllocator().buffer(capacity: wire.readableBytes)
        WireMessage.audioChunk(message).encode(into: &reframed)
        wire = reframed
        frameCount = frames
    }
}

/// A stream the house plays: its format, the encoded chunks produced so far (the queue's
/// timeline, ahead of the playhead), the cuts queue edits made in it, and its anchors.
///
/// Thread-safety: chunks, the end and the cuts are guarded (the engine's producer thread
/// writes through `StreamTimelineOutput`, the house's event loop reads); `schedule` and
/// `engine` belong to the house's event loop; `listening` is guarded.
final class ServerStream: @unchecked Sendable {
    let id: UInt32
    let codec: StreamCodec
    let sampleRate: Int
    let channelCount: Int
    let codecHeader: [UInt8]
    var schedule: TimelineSchedule
    /// The playback engine producing this stream (nil once stopped).
    var engine: QueueProducer?

    /// A truncation of the chunk list: rooms told of it drop their audio from `frame` on and
    /// are sent chunks again from index `chunkCount`.
    struct Cut: Equatable, Sendable {
        var epoch: Int
        var frame: Int64
        var chunkCount: Int
    }

    private struct Produced {
        /// Where production began: 0, or for a stream a restarted house resumed, the frame
        /// from which it produces again (the rooms hold what came before).
        var baseFrame: Int64 = 0
        var chunks: [ServerChunk] = []
        var endFrame: Int64?
        /// Bumped by every truncation; writes carry the epoch they were made in, so a block
        /// decoded before a cut can never land after it.
        var epoch = 0
        var cuts: [Cut] = []
    }
    private let produced = Mutex(Produced())

    /// What the producer thread needs of the timeline: the schedule (anchors) and how far
    /// ahead of "now" an edit can still reach every room.
    struct Listening: Sendable {
        var schedule: TimelineSchedule
        var editLeadNanoseconds: Int64
    }
    let listening: Mutex<Listening>

    /// Called under the stream's lock for each cut, before any room can be told of it, with the
    /// new epoch and the frame: the house stores it first (`HouseStore`), so a restarted house
    /// never reuses an epoch its rooms have seen. Set before production starts.
    var willCut: (@Sendable (_ epoch: Int, _ frame: Int64) -> Void)?
    /// Called when production reaches the end of the queue, with the end frame.
    var didFinish: (@Sendable (_ frame: Int64) -> Void)?

    init(id: UInt32, codec: StreamCodec, sampleRate: Int, channelCount: Int, codecHeader: [UInt8]) {
        self.id = id
        self.codec = codec
        self.sampleRate = sampleRate
        self.channelCount = channelCount
        self.codecHeader = codecHeader
        schedule = TimelineSchedule(sampleRate: sampleRate)
        listening = Mutex(Listening(schedule: schedule, editLeadNanoseconds: 0))
    }

    /// A stream a restarted house resumes: produced again from `frame`, after a cut there in a
    /// new epoch beyond any the rooms have seen (`storedEpoch + 1`), so every room that holds
    /// audio past `frame` drops it and is sent the new production, and a room holding what
    /// comes before keeps it.
    func resumeProduction(at frame: Int64, storedEpoch: Int) {
        produced.withLock { p in
            precondition(p.chunks.isEmpty && p.cuts.isEmpty, "a stream resumes before it produces")
            p.baseFrame = frame
            p.epoch = storedEpoch + 1
            p.cuts = [Cut(epoch: p.epoch, frame: frame, chunkCount: 0)]
        }
    }

    // MARK: Producer side

    /// The epoch writes made now carry.
    var epoch: Int { produced.withLock { $0.epoch } }

    func append(_ chunk: ServerChunk, epoch: Int) {
        produced.withLock { p in
            guard p.epoch == epoch else { return }
            p.chunks.append(chunk)
        }
    }

    func finish(at frame: Int64, epoch: Int) {
        produced.withLock { p in
            guard p.epoch == epoch else { return }
            p.endFrame = frame
            // Recorded under the lock, as a cut is (`truncate`): whoever sees the end (the
            // rooms' sender; a house started on the same store) finds it stored, and a cut that
            // follows clears it after, never before. Recorded after the lock, a loaded CI
            // machine let a test see the end and start a second house before the store had it.
            didFinish?(frame)
        }
    }

    /// Drops everything produced at or after `frame`, cutting the chunk that spans it, and the
    /// end; records the cut for the rooms. Returns the new epoch.
    @discardableResult
    func truncate(at frame: Int64) -> Int {
        produced.withLock { p in
            p.chunks.removeAll { $0.firstFrame >= frame }
            if let last = p.chunks.indices.last, p.chunks[last].endFrame > frame {
                p.chunks[last].shorten(to: Int(frame - p.chunks[last].firstFrame))
            }
            p.baseFrame = min(p.baseFrame, frame)
            p.endFrame = nil
            p.epoch += 1
            willCut?(p.epoch, frame)
            p.cuts.append(Cut(epoch: p.epoch, frame: frame, chunkCount: p.chunks.count))
            return p.epoch
        }
    }

    // MARK: House side

    var chunkCount: Int { produced.withLock { $0.chunks.count } }
    var endFrame: Int64? { produced.withLock { $0.endFrame } }
    var producedEnd: Int64 { produced.withLock { $0.chunks.last?.endFrame ?? $0.baseFrame } }

    /// Chunk `index` as of `epoch`; nil if it is not there or a cut came since.
    func chunk(at index: Int, epoch: Int) -> ServerChunk? {
        produced.withLock { p in p.epoch == epoch && index < p.chunks.count ? p.chunks[index] : nil }
    }

    /// The stream's end and chunk count as of `epoch`; nil if the end is not known or a cut came since.
    func end(epoch: Int) -> (frame: Int64, chunkCount: Int)? {
        produced.withLock { p in
            guard p.epoch == epoch, let end = p.endFrame else { return nil }
            return (end, p.chunks.count)
        }
    }

    /// The cuts made after `epoch`, and the epoch they bring a room to.
    func cuts(after epoch: Int) -> (cuts: [Cut], epoch: Int) {
        produced.withLock { p in (p.cuts.filter { $0.epoch > epoch }, p.epoch) }
    }

    /// Where a room joining at `frame` starts: the chunk holding it (or the first after it), as
    /// of the current epoch.
    func joinPoint(at frame: Int64) -> (chunk: Int, epoch: Int) {
        produced.withLock { p in
            var low = 0, high = p.chunks.count
            while low < high {
                let mid = (low + high) / 2
                if p.chunks[mid].endFrame <= frame { low = mid + 1 } else { high = mid }
            }
            return (low, p.epoch)
        }
    }
}
