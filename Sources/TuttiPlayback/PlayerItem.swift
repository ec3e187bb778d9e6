import TuttiCore
import TuttiMedia

/// One entry of a play queue.
public struct PlayerItem: Sendable, Equatable {
    public var path: String
    public init(path: String) { self.path = path }
}

/// What happened to one item while it played.
public typealias ItemOutcome = QueueItemReport
