import Foundation
import Synchronization
import TuttiCore
import TuttiMedia
import TuttiNet

/// One encoded chunk of a server stream, on the stream's timeline.
struct ServerChunk: Sendable {
    var firstFrame: Int64
    var frameCount: Int
    var payload: [UInt8]
    var endFrame: Int64 { firstFrame + Int64(frameCount) }
}

/// A stream the house plays: its format, the encoded chunks produced so far (from the queue,
/// ahead of the playhead), where each queue item sits on its timeline, and its anchors.
///
/// Thread-safety: chunks and items are guarded (the producer thread appends, the house's event
/// loop reads); `schedule` belongs to the house's event loop.
final class ServerStream: @unchecked Sendable {
    let id: UInt32
    let codec: StreamCodec
    let sampleRate: Int
    let channelCount: Int
    let codecHeader: [UInt8]
    /// The queue as this stream plays it (an edit that restarts production replaces the tail).
    private(set) var paths: [String]
    var schedule: TimelineSchedule
    var producer: StreamProducer?

    private struct Produced {
        var chunks: [ServerChunk] = []
        var items: [QueueItemReport] = []
        var endFrame: Int64?
        var failures: [MediaError] = []
        /// Bumped by every truncation. A producer writes under the epoch it was made in, so a
        /// cancelled producer still finishing a block cannot add to the stream after the cut.
        var epoch = 0
    }
    private let produced = Mutex(Produced())

    init(id: UInt32, codec: StreamCodec, sampleRate: Int, channelCount: Int, codecHeader: [UInt8], paths: [String]) {
        self.id = id
        self.codec = codec
        self.sampleRate = sampleRate
        self.channelCount = channelCount
        self.codecHeader = codecHeader
        self.paths = paths
        schedule = TimelineSchedule(sampleRate: sampleRate)
    }

    // MARK: Producer side

    /// The epoch a producer made now writes under.
    var epoch: Int { produced.withLock { $0.epoch } }

    func append(_ chunk: ServerChunk, epoch: Int) {
        produced.withLock { p in
            guard p.epoch == epoch else { return }
            p.chunks.append(chunk)
        }
    }

    func record(_ item: QueueItemReport, epoch: Int) {
        produced.withLock { p in
            guard p.epoch == epoch else { return }
            if let error = item.error, !p.failures.contains(error) { p.failures.append(error) }
            if let i = p.items.lastIndex(where: { $0.index == item.index && $0.startFrame == item.startFrame }) {
                p.items[i] = item
            } else if item.info != nil {
                p.items.append(item)
            }
        }
    }

    func finish(at frame: Int64, epoch: Int) {
        produced.withLock { p in
            if p.epoch == epoch { p.endFrame = frame }
        }
    }

    // MARK: House side

    var chunkCount: Int { produced.withLock { $0.chunks.count } }
    func chunk(at index: Int) -> ServerChunk { produced.withLock { $0.chunks[index] } }
    var endFrame: Int64? { produced.withLock { $0.endFrame } }
    var producedEnd: Int64 { produced.withLock { $0.chunks.last?.endFrame ?? 0 } }
    var items: [QueueItemReport] { produced.withLock { $0.items } }

    /// Failures reported since the last call.
    func takeFailures() -> [MediaError] {
        produced.withLock { p in defer { p.failures.removeAll() }; return p.failures }
    }

    /// Index of the chunk holding `frame` (or the first after it).
    func chunkIndex(containing frame: Int64) -> Int {
        produced.withLock { p in
            var low = 0, high = p.chunks.count
            while low < high {
                let mid = (low + high) / 2
                if p.chunks[mid].endFrame <= frame { low = mid + 1 } else { high = mid }
            }
            return low
        }
    }

    /// Drops everything produced at or after `frame`, cutting the chunk that spans it, and
    /// forgets items starting there. Used before production restarts at `frame`.
    func truncate(at frame: Int64, paths newPaths: [String]) {
        paths = newPaths
        produced.withLock { p in
            p.chunks.removeAll { $0.firstFrame >= frame }
            if let last = p.chunks.indices.last, p.chunks[last].endFrame > frame {
                p.chunks[last].frameCount = Int(frame - p.chunks[last].firstFrame)
            }
            p.items.removeAll { $0.startFrame >= frame }
            p.endFrame = nil
            p.epoch += 1
        }
    }

    /// Renumbers recorded items after a queue edit at `index` (+1 insert, −1 remove).
    func shiftItemIndices(atOrAfter index: Int, by delta: Int) {
        produced.withLock { p in
            for i in p.items.indices where p.items[i].index >= index { p.items[i].index += delta }
        }
    }

    /// The queue item playing at timeline frame `frame`.
    func item(at frame: Int64) -> QueueItemReport? {
        items.last { $0.startFrame <= frame }
    }
}

/// Decodes the queue into a stream's chunks on its own thread, running ahead of the playhead
/// by up to `depthFrames` as fast as decoding and encoding allow.
final class StreamProducer: @unchecked Sendable {
    private let stream: ServerStream
    private let reader: GaplessQueueReader
    private let encoder: ChunkEncoder
    private let chunkFrames: Int
    private let depthFrames: Int64
    private let playhead: @Sendable () -> Int64
    private let notify: @Sendable () -> Void
    private let cancelled = Atomic<Bool>(false)
    private let wake = WakeSignal()
    private var thread: Thread?
    /// The stream's epoch at creation: what this producer writes counts only until a truncation.
    private let epoch: Int

    init(stream: ServerStream, encoder: ChunkEncoder, firstItem: Int, offset: MediaTime, firstFrame: Int64,
         chunkFrames: Int, depthFrames: Int64, playhead: @escaping @Sendable () -> Int64, notify: @escaping @Sendable () -> Void) {
        self.stream = stream
        epoch = stream.epoch
        reader = GaplessQueueReader(paths: stream.paths, outputRate: stream.sampleRate, channelCount: stream.channelCount,
                                    firstItem: firstItem, offset: offset, firstFrame: firstFrame)
        self.encoder = encoder
        self.chunkFrames = chunkFrames
        self.depthFrames = depthFrames
        self.playhead = playhead
        self.notify = notify
    }

    func start() {
        let thread = Thread { [self] in run() }
        thread.name = "tutti-produce"
        thread.start()
        self.thread = thread
    }

    /// Stops producing; the thread ends within a block.
    func cancel() {
        cancelled.store(true, ordering: .releasing)
        wake.signal()
    }

    /// The playhead moved: production may continue if it was waiting at the depth limit.
    func playheadMoved() { wake.signal() }

    private func run() {
        let stream = self.stream
        let epoch = self.epoch
        reader.onItem = { stream.record($0, epoch: epoch) }
        var block: [Float] = []
        var pending: [Float] = []
        var packet: [UInt8] = []
        var pendingStart = reader.position
        let channels = stream.channelCount
        while !cancelled.load(ordering: .acquiring) {
            if pendingStart - playhead() > depthFrames {
                wake.prepareToWait()
                if pendingStart - playhead() > depthFrames { wake.wait(timeoutNanoseconds: 200_000_000) }
                continue
            }
            let frames = reader.read(into: &block)
            if frames > 0 { pending.append(contentsOf: block) }
            var emitted = false
            while pending.count >= chunkFrames * channels || (frames == 0 && !pending.isEmpty) {
                let count = min(chunkFrames, pending.count / channels)
                do {
                    try pending.withUnsafeBufferPointer { (samples: UnsafeBufferPointer<Float>) throws(MediaError) in
                        try encoder.encode(samples.baseAddress!, frames: count, into: &packet)
                    }
                } catch {
                    // Our own encoder failing is a broken invariant, not bad input.
                    fatalError("stream encoder failed: \(error)")
                }
                stream.append(ServerChunk(firstFrame: pendingStart, frameCount: count, payload: packet), epoch: epoch)
                pendingStart += Int64(count)
                pending.removeFirst(count * channels)
                emitted = true
            }
            if emitted { notify() }
            if frames == 0 {
                stream.finish(at: pendingStart, epoch: epoch)
                notify()
                return
            }
        }
    }
}
