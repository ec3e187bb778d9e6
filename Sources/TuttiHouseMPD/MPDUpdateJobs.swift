import Synchronization

/// MPD's `update` job ids, one count per server: each `update` answers the next, and every
/// connection sees the last one in its snapshots, so that its idle clients hear `update`.
/// Thread-safety: any thread.
final class MPDUpdateJobs: Sendable {
    private let count = Mutex(0)

    /// A new job's id (MPD's start at 1).
    func next() -> Int { count.withLock { $0 += 1; return $0 } }

    var last: Int { count.withLock { $0 } }
}
