import Synchronization

/// How many connections of one server are in each partition (a group other than the default),
/// so that `delpartition` refuses one still in use, as MPD does ("partition still has clients").
/// Thread-safety: any thread.
final class MPDPartitionClients: Sendable {
    private let counts = Mutex<[UInt32: Int]>([:])

    /// A connection moved from partition `old` to `new` (nil: the default group).
    func move(from old: UInt32?, to new: UInt32?) {
        guard old != new else { return }
        counts.withLock { counts in
            if let old {
                counts[old, default: 0] -= 1
                if counts[old] == 0 { counts[old] = nil }
            }
            if let new { counts[new, default: 0] += 1 }
        }
    }

    func count(in group: UInt32) -> Int { counts.withLock { $0[group] ?? 0 } }
}
