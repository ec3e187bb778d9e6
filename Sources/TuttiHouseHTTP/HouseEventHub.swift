import Synchronization
import TuttiHouse
import TuttiProtocol

/// One look at the house for every listener of the event feed (`HouseEventFeed`): when the
/// house says something changed, and every `intervalNanoseconds` for what only time changes
/// (the next item starting), it asks the house once for its groups and each group's status
/// and queue, and hands that snapshot to every listener. Each listener keeps the newest
/// snapshot only and diffs it against what it showed, without touching the house: a thousand
/// open feeds cost the house what one does. (Each feed used to ask the house itself ten times
/// a second.) It looks only while someone listens.
///
/// Thread-safety: all members may be called from any thread.
final class HouseEventHub: Sendable {
    /// What the house showed at one look.
    struct Snapshot: Sendable {
        struct Group: Sendable {
            var report: GroupReport
            var status: StatusReport?
            var queue: QueueReport?
        }
        var groups: GroupsReport
        var eachGroup: [Group]
    }

    private struct State {
        var listeners: [Int: AsyncStream<Snapshot>.Continuation] = [:]
        var nextID = 0
        var latest: Snapshot?
        /// Asks for a look (one pending at most).
        var look: AsyncStream<Void>.Continuation?
        var looking: Task<Void, Never>?
    }

    let house: House
    let intervalNanoseconds: Int64
    private let state = Mutex(State())

    init(house: House, intervalNanoseconds: Int64) {
        self.house = house
        self.intervalNanoseconds = intervalNanoseconds
    }

    /// A listener's snapshots: the latest at once (if any), then each new one; only the newest
    /// waits when the listener is slow.
    func subscribe() -> (id: Int, snapshots: AsyncStream<Snapshot>) {
        let (snapshots, continuation) = AsyncStream<Snapshot>.makeStream(bufferingPolicy: .bufferingNewest(1))
        let id = state.withLock { state -> Int in
            defer { state.nextID += 1 }
            state.listeners[state.nextID] = continuation
            if let latest = state.latest { continuation.yield(latest) }
            if state.looking == nil { startLooking(&state) }
            // A new listener is shown the house as it is now, not as it was at the last look.
            state.look?.yield()
            return state.nextID
        }
        return (id, snapshots)
    }

    func unsubscribe(_ id: Int) {
        let stopped = state.withLock { state -> Task<Void, Never>? in
            state.listeners.removeValue(forKey: id)?.finish()
            guard state.listeners.isEmpty else { return nil }
            defer {
                state.looking = nil
                state.look = nil
                state.latest = nil
            }
            return state.looking
        }
        stopped?.cancel()
    }

    /// Starts the task that looks at the house on each change and tick; under the lock.
    private func startLooking(_ state: inout State) {
        let (looks, look) = AsyncStream<Void>.makeStream(bufferingPolicy: .bufferingNewest(1))
        state.look = look
        let house = self.house, interval = intervalNanoseconds
        state.looking = Task { [weak self] in
            let token = await house.observeChanges { look.yield() }
            defer {
                house.stopObservingChanges(token)
                look.finish()
            }
            let ticker = Task {
                while !Task.isCancelled {
                    do { try await Task.sleep(nanoseconds: UInt64(interval)) } catch { return }
                    look.yield()
                }
            }
            defer { ticker.cancel() }
            look.yield()
            for await _ in looks {
                guard !Task.isCancelled, let snapshot = await Self.snapshot(of: house) else { continue }
                guard let self else { return }
                self.state.withLock { state in
                    // The last listener left during the look: a later one starts afresh.
                    guard !Task.isCancelled else { return }
                    state.latest = snapshot
                    for listener in state.listeners.values { listener.yield(snapshot) }
                }
            }
        }
    }

    /// The house's groups, and each group's status and queue; nil if it would not say.
    static func snapshot(of house: House) async -> Snapshot? {
        guard case .success(let reply) = await house.perform(.groups), let groups = reply.groups else { return nil }
        var eachGroup: [Snapshot.Group] = []
        for group in groups.groups {
            var entry = Snapshot.Group(report: group)
            if case .success(let reply) = await house.perform(.status, group: String(group.id)) { entry.status = reply.status }
            if case .success(let reply) = await house.perform(.queue, group: String(group.id)) { entry.queue = reply.queue }
            eachGroup.append(entry)
        }
        return Snapshot(groups: groups, eachGroup: eachGroup)
    }
}
