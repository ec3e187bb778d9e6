import Synchronization

/// The volumes rooms had before a Snapcast controller muted them (the house has no mute: a
/// muted room is at 0), so that unmuting restores them. One per front end, shared by its
/// connections and requests, as snapserver keeps a client's mute for every controller.
/// Thread-safety: any thread.
public final class SnapcastMutedVolumes: Sendable {
    private let volumes = Mutex<[UInt32: Int]>([:])

    public init() {}

    /// Notes `room`'s volume before its mute.
    func mute(_ room: UInt32, from volume: Int) { volumes.withLock { $0[room] = volume } }

    /// The volume to restore `room` to, forgotten once taken.
    func unmute(_ room: UInt32) -> Int? { volumes.withLock { $0.removeValue(forKey: room) } }
}
