import TuttiCore
import TuttiMedia

/// One entry of a play queue.
public struct PlayerItem: Sendable, Equatable {
    public var path: String
    public init(path: String) { self.path = path }
}

/// What happened to one item while it played.
public struct ItemOutcome: Sendable {
    public var index: Int
    public var item: PlayerItem
    public var info: TrackInfo?
    /// The output frame (timeline position of the queue) at which the item starts.
    public var startFrame: Int64
    /// Output frames it contributed.
    public var frameCount: Int64
    /// Set when the item could not be played, or only partly (truncated, corrupt).
    public var error: MediaError?
}
