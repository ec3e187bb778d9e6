import Synchronization
import TuttiProtocol

/// MPD's playlist version: a number that grows whenever the queue changes, shared by every
/// connection of one server (clients compare it across `status` calls and ask `plchanges`).
/// Thread-safety: any thread.
final class MPDPlaylistVersion: Sendable {
    private let state = Mutex<(signature: [String], version: Int)>(([], 1))

    var current: Int { state.withLock { $0.version } }

    /// Notes the queue as seen now; the version grows if it differs from the last one seen.
    func observe(_ queue: QueueReport) {
        let signature = queue.items.map { "\($0.id ?? -1) \($0.path)" }
        state.withLock {
            if $0.signature != signature {
                $0.signature = signature
                $0.version += 1
            }
        }
    }
}
