import TuttiProtocol

/// What an MPD client can see of the house at one moment, and which of MPD's idle subsystems
/// differ between two such moments.
struct MPDSnapshot: Sendable {
    var status: StatusReport
    var queue: QueueReport
    var playlists: StoredPlaylistsReport
    /// The house's groups: MPD's partitions.
    var groups: [GroupReport]
    /// The last `update` job (`MPDUpdateJobs`): another connection's update raises `update`.
    var updateJob: Int

    /// MPD's subsystems that changed from `self` to `later`.
    func changes(to later: MPDSnapshot) -> Set<String> {
        var changed = Set<String>()
        if status.state != later.status.state || status.item != later.status.item || status.stream != later.status.stream
            || status.path != later.status.path {
            changed.insert("player")
        }
        if queue.items.map({ [$0.path, "\($0.id ?? -1)"] }) != later.queue.items.map({ [$0.path, "\($0.id ?? -1)"] }) {
            changed.insert("playlist")
        }
        if status.groupVolume != later.status.groupVolume { changed.insert("mixer") }
        if status.playModes != later.status.playModes || status.replayGain != later.status.replayGain
            || status.crossfadeSeconds != later.status.crossfadeSeconds { changed.insert("options") }
        if playlists != later.playlists { changed.insert("stored_playlist") }
        if status.rooms.map({ "\($0.id)/\($0.name)/\($0.group)" }).sorted() != later.status.rooms.map({ "\($0.id)/\($0.name)/\($0.group)" }).sorted() {
            changed.insert("output")
        }
        if groups.map(\.name) != later.groups.map(\.name) { changed.insert("partition") }
        if status.library?.tracks != later.status.library?.tracks { changed.insert("database") }
        if status.library?.scanning != later.status.library?.scanning || updateJob != later.updateJob { changed.insert("update") }
        return changed
    }

    static let subsystems: Set<String> = ["database", "update", "stored_playlist", "playlist", "player", "mixer", "output", "options",
                                          "partition", "sticker", "subscription", "message", "neighbor", "mount"]
}
