import Synchronization
import TuttiProtocol

/// A speaker's deep buffer: the encoded chunks of one stream, by timeline frame.
///
/// Minutes of audio are kept encoded (FLAC), so depth costs little memory; the playout engine
/// decodes just ahead of the device. Thread-safety: all members may be called from any thread
/// (the network thread inserts and flushes, the playout thread reads).
public final class ChunkStore: Sendable {
    public struct Chunk: Sendable {
        public var firstFrame: Int64
        /// Frames of the chunk that belong to the timeline; fewer than it decodes to once a
        /// flush-from has cut it.
        public var frameCount: Int
        public var payload: [UInt8]
        public var endFrame: Int64 { firstFrame + Int64(frameCount) }
    }

    private struct State {
        var chunks: [Chunk] = []   // sorted by firstFrame, non-overlapping
        var bytes = 0
    }

    private let state = Mutex(State())

    public init() {}

    /// Adds a chunk. Chunks arrive in timeline order; one overlapping audio already held replaces it.
    public func insert(_ chunk: Chunk) {
        state.withLock { s in
            if let last = s.chunks.last, last.endFrame <= chunk.firstFrame {
                s.chunks.append(chunk)
            } else {
                s.chunks.removeAll { c in
                    let overlaps = c.firstFrame < chunk.endFrame && chunk.firstFrame < c.endFrame
                    if overlaps { s.bytes -= c.payload.count }
                    return overlaps
                }
                let index = s.chunks.firstIndex { $0.firstFrame > chunk.firstFrame } ?? s.chunks.count
                s.chunks.insert(chunk, at: index)
            }
            s.bytes += chunk.payload.count
        }
    }

    /// Drops all audio at or after `frame` (cutting the chunk that spans it).
    public func flush(from frame: Int64) {
        state.withLock { s in
            s.chunks.removeAll { c in
                if c.firstFrame >= frame { s.bytes -= c.payload.count; return true }
                return false
            }
            if let last = s.chunks.indices.last, s.chunks[last].endFrame > frame {
                s.chunks[last].frameCount = Int(frame - s.chunks[last].firstFrame)
            }
        }
    }

    public func removeAll() {
        state.withLock { $0 = State() }
    }

    /// Releases chunks that end at or before `frame` (already played).
    public func discard(before frame: Int64) {
        state.withLock { s in
            while let first = s.chunks.first, first.endFrame <= frame {
                s.bytes -= first.payload.count
                s.chunks.removeFirst()
            }
        }
    }

    /// The first timeline frame held, if any.
    public var firstFrame: Int64? { state.withLock { $0.chunks.first?.firstFrame } }

    /// The chunk holding timeline frame `frame`.
    public func chunk(containing frame: Int64) -> Chunk? {
        state.withLock { s in
            // Binary search: the last chunk starting at or before `frame`.
            var low = 0, high = s.chunks.count
            while low < high {
                let mid = (low + high) / 2
                if s.chunks[mid].firstFrame <= frame { low = mid + 1 } else { high = mid }
            }
            guard low > 0 else { return nil }
            let candidate = s.chunks[low - 1]
            return frame < candidate.endFrame ? candidate : nil
        }
    }

    /// The gap-free stretches of audio held, in timeline order, at most `maximum` (the earliest).
    public func ranges(maximum: Int) -> [Range<Int64>] {
        state.withLock { s in
            var result: [Range<Int64>] = []
            for c in s.chunks where c.frameCount > 0 {
                if let last = result.last, last.upperBound == c.firstFrame {
                    result[result.count - 1] = last.lowerBound..<c.endFrame
                } else {
                    if result.count == maximum { break }
                    result.append(c.firstFrame..<c.endFrame)
                }
            }
            return result
        }
    }

    /// Up to `maximum` chunks that start after `frame`, in timeline order.
    public func chunks(after frame: Int64, maximum: Int) -> [Chunk] {
        state.withLock { s in
            var low = 0, high = s.chunks.count
            while low < high {
                let mid = (low + high) / 2
                if s.chunks[mid].firstFrame <= frame { low = mid + 1 } else { high = mid }
            }
            return Array(s.chunks[low..<min(s.chunks.count, low + maximum)])
        }
    }

    /// The end of the gap-free audio starting at `frame` (`frame` itself if none is held there).
    public func contiguousEnd(from frame: Int64) -> Int64 {
        state.withLock { s in
            var end = frame
            for c in s.chunks where c.endFrame > end {
                if c.firstFrame > end { break }
                end = c.endFrame
            }
            return end
        }
    }

    public var byteCount: Int { state.withLock { $0.bytes } }
    public var chunkCount: Int { state.withLock { $0.chunks.count } }
}
