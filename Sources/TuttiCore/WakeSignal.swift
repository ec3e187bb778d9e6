import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// Wakes one waiting non-real-time thread from any thread, including a real-time one.
///
/// `signal()` is safe on a real-time thread: it touches an atomic and, only when someone is
/// waiting, posts a POSIX semaphore (a futex wake: no allocation, no user-space lock).
/// Use one waiter at a time.
public final class WakeSignal: @unchecked Sendable {
    private let semaphore: UnsafeMutablePointer<sem_t>
    private let waiting = Atomic<Bool>(false)

    public init() {
        semaphore = .allocate(capacity: 1)
        sem_init(semaphore, 0, 0)
    }

    deinit {
        sem_destroy(semaphore)
        semaphore.deallocate()
    }

    public func signal() {
        if waiting.exchange(false, ordering: .acquiringAndReleasing) { sem_post(semaphore) }
    }

    /// Waits until signalled or `timeoutNanoseconds` pass. The caller re-checks its condition
    /// after announcing the wait, so a signal between check and wait is never lost:
    /// call `prepareToWait()`, re-check, then `wait(timeoutNanoseconds:)`.
    public func prepareToWait() { waiting.store(true, ordering: .sequentiallyConsistent) }

    public func wait(timeoutNanoseconds: Int64) {
        var deadline = timespec()
        clock_gettime(CLOCK_REALTIME, &deadline)
        let total = Int64(deadline.tv_nsec) + timeoutNanoseconds
        deadline.tv_sec += Int(total / 1_000_000_000)
        deadline.tv_nsec = Int(total % 1_000_000_000)
        while sem_timedwait(semaphore, &deadline) != 0 && errno == EINTR {}
        waiting.store(false, ordering: .relaxed)
        // Absorb a post that raced with the timeout so the next wait starts clean.
        while sem_trywait(semaphore) == 0 {}
    }
}
