import Dispatch

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
        let executor = asUnownedTaskExecutor()
        queue.async { job.runSynchronously(on: executor) }
    }
}
