import NIOCore
import TuttiProtocol

/// Who wants to hear that something a controller can see may have changed: a command took
/// effect, a room connected, left or sent its status. Observers are told *that*, not *what*:
/// each asks the house for the reports it shows (`perform(_:)`), so there is one source of
/// truth and a burst of changes costs one look. Changes that only time makes (the playhead
/// crossing into the next item) raise no call; an observer that shows them looks again on its
/// own clock (`HouseEventFeed` does every 100 ms).
///
/// Thread-safety: `observeChanges` and `stopObservingChanges` may be called from any thread;
/// observers are called on the house's loop and must not block it.
extension House {
    public typealias ChangeObserver = @Sendable () -> Void

    /// Calls `observer` on the loop after each change, until `stopObservingChanges(_:)` with
    /// the returned token.
    public func observeChanges(_ observer: @escaping ChangeObserver) async -> Int {
        let core = self.core
        return await withCheckedContinuation { continuation in
            loop.execute {
                let token = core.value.changeObservers.add(observer)
                continuation.resume(returning: token)
            }
        }
    }

    public func stopObservingChanges(_ token: Int) {
        let core = self.core
        loop.execute { core.value.changeObservers.remove(token) }
    }
}

/// The observers of one house, by token. Only touched on the house's loop.
struct ChangeObservers {
    private var observers: [Int: House.ChangeObserver] = [:]
    private var nextToken = 1

    mutating func add(_ observer: @escaping House.ChangeObserver) -> Int {
        defer { nextToken += 1 }
        observers[nextToken] = observer
        return nextToken
    }

    mutating func remove(_ token: Int) { observers[token] = nil }

    func notify() {
        for observer in observers.values { observer() }
    }
}

extension House {
    /// Where group `group`'s AirPlay receiver listens ("HOST:PORT"), or nil for none: what the
    /// group's report says (`GroupReport.airplay`). Any thread.
    public func setAirPlayAddress(_ address: String?, group: UInt32) {
        let core = self.core
        loop.execute {
            core.value.airPlayAddresses[group] = address
            core.value.noteChange()
        }
    }
}
