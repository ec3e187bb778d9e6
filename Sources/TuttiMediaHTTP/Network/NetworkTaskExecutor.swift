import Dispatch
import Foundation

/// Runs a download task's jobs on a serial dispatch queue of its own instead of Swift's
/// cooperative pool.
///
/// A network source is read by a decoder thread that blocks until its bytes arrive, while the
/// download that brings them is a Swift task. On the cooperative pool (one thread per core:
/// two on a small machine) that task waits behind whatever CPU-bound or blocking work the
/// process has put there, so bytes sitting in a socket could wait seconds for a thread — and
/// if every pool thread were blocked on such reads, forever. A serial queue is backed by
/// libdispatch's overcommitting threads, which it creates when the others are busy, so a
/// download always makes progress, whatever the rest of the process is doing.
///
/// Use it as a task executor preference (`Task(executorPreference:)`): the task's own code
/// and every nonisolated async function it calls (AsyncHTTPClient's continuations, sleeps)
/// run on the queue. One executor per download keeps downloads from waiting on each other.
///
/// Thread-safety: `enqueue` may be called from any thread; jobs run one at a time, in order.
public final class NetworkTaskExecutor: TaskExecutor, @unchecked Sendable {
    private let queue: DispatchQueue

    public init(label: String) {
        queue = DispatchQueue(label: "tutti.network." + label)
    }

    public func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        // `self`, strongly: the job holds the executor only unowned.
        queue.async { job.runSynchronously(on: self.asUnownedTaskExecutor()) }
    }

    /// Sleeps for `duration` with the wake-up on this executor's queue. `Task.sleep` would
    /// schedule it on the cooperative pool, which is what these tasks must not wait for.
    /// - Throws: `CancellationError` when the task is cancelled meanwhile.
    public func sleep(for duration: Duration) async throws {
        let seconds = Double(duration.components.seconds) + Double(duration.components.attoseconds) * 1e-18
        let wake = WakeUp()
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
                wake.arm(continuation)
                queue.asyncAfter(deadline: .now() + max(0, seconds)) { wake.fire(with: .success(())) }
            }
        } onCancel: {
            wake.fire(with: .failure(CancellationError()))
        }
    }

    /// Sleeps until `instant` of the continuous clock (see `sleep(for:)`).
    public func sleep(until instant: ContinuousClock.Instant) async throws {
        try await sleep(for: max(.zero, instant - .now))
    }

    /// Resumes a sleep once, by the timer or by cancellation, whichever comes first; a
    /// cancellation that comes before the continuation exists is remembered.
    private final class WakeUp: @unchecked Sendable {
        private let lock = NSLock()
        private var continuation: CheckedContinuation<Void, any Error>?
        private var outcome: Result<Void, any Error>?

        func arm(_ continuation: CheckedContinuation<Void, any Error>) {
            lock.lock()
            if let outcome {
                lock.unlock()
                continuation.resume(with: outcome)
                return
            }
            self.continuation = continuation
            lock.unlock()
        }

        func fire(with result: Result<Void, any Error>) {
            lock.lock()
            guard outcome == nil else { lock.unlock(); return }
            outcome = result
            let waiting = continuation
            continuation = nil
            lock.unlock()
            waiting?.resume(with: result)
        }
    }
}
