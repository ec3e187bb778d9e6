import Synchronization
import TuttiProtocol

/// MPD's playlist version: a number that grows whenever a partition's queue changes, one per
/// group, shared by every connection of one server (clients compare it across `status` calls
/// and ask `plchanges`).
/// Thread-safety: any thread.
final class MPDPlaylistVersion: Sendable {
    private struct Seen {
        var signature: [String] = []
        var version = 1
    }

    private let state = Mutex<[UInt32: Seen]>([:])

    /// The version of `group`'s queue as last observed.
    func current(group: UInt32) -> Int { state.withLock { $0[group]?.version ?? 1 } }

    /// Notes `group`'s queue as seen now; its version grows if it differs from the last seen.
    func observe(_ queue: QueueReport, group: UInt32) {
        let signature = queue.items.map { "\($0.id ?? -1) \($0.path)" }
        state.withLock { seen in
            var entry = seen[group] ?? Seen()
            if entry.signature != signature {
                entry.signature = signature
                entry.version += 1
            }
            seen[group] = entry
        }
    }
}
