import Synchronization

/// The clock-sync sessions a house answers: one per admitted speaker's connection, registered
/// when the speaker is let in and removed when its connection ends. The house's loop writes it,
/// the clock-sync thread reads it for every request.
///
/// Thread-safety: all members may be called from any thread.
public final class ClockSyncSessions: Sendable {
    private let keys = Mutex<[UInt64: ClockSyncKey]>([:])

    public init() {}

    public func register(_ key: ClockSyncKey) { keys.withLock { $0[key.sessionID] = key } }
    public func remove(sessionID: UInt64) { keys.withLock { _ = $0.removeValue(forKey: sessionID) } }
    public func key(for sessionID: UInt64) -> ClockSyncKey? { keys.withLock { $0[sessionID] } }
    public var count: Int { keys.withLock { $0.count } }
}
