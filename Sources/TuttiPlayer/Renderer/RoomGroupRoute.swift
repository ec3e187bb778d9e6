import TuttiCore
import TuttiEngine

/// A route to a group of remote rooms as the house server drives them: the rooms' speakers
/// buffer minutes of audio ahead (the house's enhanced buffering), so the renderer asks for
/// that much media, and a flush is honoured down to the house's flush margin, the distance at
/// which the rooms can still cut their stores without an audible glitch.
///
/// This is the route's contract only: the values the house uses for its timeline
/// (`House.Configuration.bufferDepthNanoseconds` = 300 s and `flushMarginNanoseconds` = 0.5 s
/// by default, mirrored here as the defaults). Feeding a renderer's media into a house stream is
/// not part of this type; a house-side consumer reads `forwardBufferDuration` for how far ahead
/// to pull and `flushLeadTime` for when to refuse a flush-from. A renderer with this route can
/// still play through a `RenderSynchronizer` on a local device; it then simply asks for (and
/// holds) minutes of media.
///
/// Thread-safety: an immutable value.
public struct RoomGroupRoute: RenderRoute {
    /// The rooms this route plays in, by name; informational for the house.
    public let rooms: [String]
    public let forwardBufferDuration: MediaTime
    public let flushLeadTime: MediaTime

    /// The speakers' buffer depth the house streams ahead: 300 s.
    public static let houseBufferDepth = MediaTime(value: 300, timescale: 1)
    /// The house's flush margin: 0.5 s.
    public static let houseFlushMargin = MediaTime(value: 1, timescale: 2)

    public init(rooms: [String], forwardBufferDuration: MediaTime = RoomGroupRoute.houseBufferDepth,
                flushLeadTime: MediaTime = RoomGroupRoute.houseFlushMargin) {
        self.rooms = rooms
        self.forwardBufferDuration = forwardBufferDuration
        self.flushLeadTime = flushLeadTime
    }
}
