import Foundation
import TuttiCore
import TuttiMedia

/// One entry of a play queue (AVPlayerItem's role): what to play and where to stop.
///
/// Each item has its own identity: the same file can be queued twice and edited separately.
public struct PlayerItem: Sendable, Equatable, Identifiable {
    public let id: UUID
    public var path: String
    /// Where the item ends (AVPlayerItem.forwardPlaybackEndTime), in its own time; nil plays it
    /// to its end. The next item joins gaplessly at the cut.
    public var forwardPlaybackEndTime: MediaTime?

    public init(path: String, forwardPlaybackEndTime: MediaTime?) {
        id = UUID()
        self.path = path
        self.forwardPlaybackEndTime = forwardPlaybackEndTime
    }

    public init(path: String) { self.init(path: path, forwardPlaybackEndTime: nil) }
}

/// What the player does when an item ends (AVPlayer.ActionAtItemEnd).
public enum ActionAtItemEnd: String, Sendable {
    /// Goes on with the next item, gaplessly.
    case advance
    /// Pauses (rate 0) with the next item cued at its first frame; `resume()` plays it.
    case pause
    /// Holds at the item's end with the rate kept; `advanceToNextItem()` goes on.
    case none
}

/// A control request the player cannot honour, with the reason in one line.
public struct PlayerError: Error, Sendable, Equatable, CustomStringConvertible {
    public enum Kind: Sendable, Equatable {
        case automaticWaitingIsOn, unsupportedRate, notStarted, hostTimeTooSoon, noCurrentItem
    }
    public var kind: Kind
    public var description: String

    public init(_ kind: Kind, _ description: String) {
        self.kind = kind
        self.description = description
    }
}
