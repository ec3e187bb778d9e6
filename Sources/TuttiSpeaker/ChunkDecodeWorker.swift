import Synchronization
import TuttiCore
import TuttiDevices
import TuttiStreamAudio

/// A thread that decodes chunks just ahead of the playouts that will need them, so the thread
/// that clocks a playout mostly finds its next chunks decoded (`TimelineChunkReader` submits them).
///
/// Only codecs whose packets decode on their own (FLAC, PCM: see `ChunkDecoder`) are decoded
/// ahead, so a chunk decodes to the same samples here as on the playout thread. A reader that
/// needs a chunk whose decode has not started takes it back and decodes it itself; one that is
/// being decoded it waits for. Either way it gets the same bits, which is what keeps the
/// simulated house deterministic while its rooms' decoding runs on a second core.
///
/// Thread-safety: `submit` and `stop` may be called from any thread; jobs run one at a time,
/// in submission order, on the worker's own thread. Call `stop` when done: the thread holds the worker.
public final class ChunkDecodeWorker: @unchecked Sendable {
    private let condition = ConditionLock()
    // Guarded by `condition`:
    private var queue: [ChunkDecodeJob] = []
    private var queueHead = 0
    private var stopping = false
    /// A job is taken from the queue and not yet finished.
    private var busy = false

    public init(name: String = "tutti-decode-ahead") {
        DeviceThread(name: name, realtime: false) { [self] in run() }.detach()
    }

    /// Ends the thread after the job it is running; jobs not started are left undone (their
    /// readers decode those chunks themselves).
    public func stop() {
        condition.withLock {
            stopping = true
            condition.broadcast()
        }
    }

    func submit(_ job: ChunkDecodeJob) {
        condition.withLock {
            queue.append(job)
            condition.signal()
        }
    }

    /// Blocks until `job` is no longer being decoded on the worker thread.
    func waitUntilDone(_ job: ChunkDecodeJob) {
        condition.withLock {
            while job.state.load(ordering: .acquiring) == ChunkDecodeJob.decoding { condition.wait() }
        }
    }

    /// Blocks until every job submitted so far has been decoded or skipped: for tests that
    /// need the decoded-ahead path taken rather than raced.
    func waitUntilIdle() {
        condition.withLock {
            while (queueHead < queue.count || busy) && !stopping { condition.wait() }
        }
    }

    private func run() {
        while let job = next() {
            if job.state.compareExchange(expected: ChunkDecodeJob.queued, desired: ChunkDecodeJob.decoding, ordering: .acquiringAndReleasing).exchanged {
                job.decode()
            }
            condition.withLock {
                if job.state.load(ordering: .relaxed) == ChunkDecodeJob.decoding { job.state.store(ChunkDecodeJob.done, ordering: .releasing) }
                busy = false
                condition.broadcast()
            }
        }
    }

    private func next() -> ChunkDecodeJob? {
        condition.withLock {
            while queueHead == queue.count && !stopping { condition.wait() }
            if stopping { return nil }
            let job = queue[queueHead]
            queueHead += 1
            busy = true
            if queueHead == queue.count {
                queue.removeAll(keepingCapacity: true)
                queueHead = 0
            }
            return job
        }
    }
}

/// One chunk to decode ahead: its payload (held, so its storage identifies it), the decoder
/// (used only on the worker thread), and once `done`, the samples or the error.
final class ChunkDecodeJob: @unchecked Sendable {
    static let queued = 0, decoding = 1, done = 2, takenBack = 3

    let firstFrame: Int64
    let payload: [UInt8]
    private let decoder: ChunkDecoder
    let state = Atomic<Int>(queued)
    /// Written by the worker before `state` becomes `done`; read by the reader after.
    private(set) var samples: [Float] = []
    private(set) var result: Result<Int, MediaError> = .success(0)

    init(firstFrame: Int64, payload: [UInt8], decoder: ChunkDecoder) {
        self.firstFrame = firstFrame
        self.payload = payload
        self.decoder = decoder
    }

    /// Whether `payload` is this job's payload: the same storage, which this job keeps alive.
    func holds(_ payload: [UInt8]) -> Bool { Self.sameStorage(payload, self.payload) }

    /// Whether two payloads share their storage: the same bytes, cheaply, while one of them is held.
    static func sameStorage(_ a: [UInt8], _ b: [UInt8]) -> Bool {
        a.count == b.count && a.withUnsafeBufferPointer { x in b.withUnsafeBufferPointer { $0.baseAddress == x.baseAddress } }
    }

    fileprivate func decode() {
        do throws(MediaError) {
            result = .success(try decoder.decode(payload, into: &samples))
        } catch {
            result = .failure(error)
        }
    }

    /// Takes the samples out of a `done` job.
    func takeSamples(into output: inout [Float]) -> Result<Int, MediaError> {
        swap(&output, &samples)
        return result
    }
}
