import TuttiProtocol

/// A room's identity: the same across renames, restarts and reconnections. MPD's output id,
/// Snapcast's client id and the HTTP API's room id.
typealias RoomID = UInt32

/// What the house keeps of one room, connected or not: one record per room, stored
/// (`HouseStore`), replacing the dictionaries by display name it once kept.
struct RoomRecord: Equatable, Sendable {
    let id: RoomID
    /// The name its speaker says in its hello: how the room is known again when it reconnects,
    /// whatever it has been renamed.
    let speakerName: String
    /// Its name: its speaker's, unless a controller renamed it.
    var name: String
    var volume = 100
    /// The latency a controller set (`room-latency`), in nanoseconds: it replaces its
    /// speaker's.
    var latencySet: Int64?
    /// The latency it last compensated (set, or its speaker's): a restarted house needs each
    /// group's largest before the rooms reconnect.
    var latencyKnown: Int64?
    /// The group it plays in.
    var group: GroupID
    /// Which of the stream's channels it plays (`room-channel`; a stereo pair's halves, left
    /// and right).
    var channel: ChannelMode = .stereo
    /// The other half of the stereo pair it is in.
    var partner: RoomID?
    /// The pair's name, on its left half, which stands for the pair: to every controller the
    /// pair is one room, with the left half's id and this name.
    var pairName: String?

    /// Whether it is the right half of a pair: hidden behind its left half.
    var isHiddenHalf: Bool { partner != nil && pairName == nil }
    /// The name a controller sees: the pair's, for a pair's left half.
    var shownName: String { pairName ?? name }
}
