import Foundation
import TuttiProtocol

/// The house as Snapcast's control API describes a server (`Server.GetStatus`): its rooms as
/// clients, in groups, playing streams.
///
/// Snapcast puts every client in a group, and each group plays a stream. The house has one
/// group and one stream, so: group `tutti` holds the rooms of the house's group and plays stream
/// `tutti`; every other room is a group of its own, named after it, on stream `idle`, which plays
/// nothing. A client's id is its room's name.
enum SnapcastServerStatus {
    static let groupID = "tutti"
    static let streamID = "tutti"
    static let idleStreamID = "idle"

    static func json(_ status: StatusReport, hostName: String) -> [String: Any] {
        let rooms = status.rooms.sorted { $0.name < $1.name }
        // A group is muted when every room of it is silent (Group.SetMute turns each to 0).
        let members = rooms.filter(\.inGroup)
        var groups: [[String: Any]] = [[
            "id": groupID, "name": "Tutti", "muted": !members.isEmpty && members.allSatisfy { $0.volume == 0 }, "stream_id": streamID,
            "clients": members.map(client),
        ]]
        for room in rooms where !room.inGroup {
            groups.append(["id": room.name, "name": room.name, "muted": room.volume == 0, "stream_id": idleStreamID, "clients": [client(room)]])
        }
        let playing = status.state == "playing" || status.state == "starting"
        var metadata: [String: Any] = [:]
        if let title = status.title { metadata["title"] = title }
        if let artist = status.artist { metadata["artist"] = [artist] }
        if let album = status.album { metadata["album"] = album }
        if let duration = status.itemDurationSeconds { metadata["duration"] = duration }
        if let path = status.path, path.hasPrefix("/") {
            metadata["artUrl"] = "/api/artwork?placeholder=true&path=" + (path.addingPercentEncoding(withAllowedCharacters: .urlQueryAllowed) ?? path)
        }
        var properties: [String: Any] = [
            "playbackStatus": playing ? "playing" : status.state == "paused" ? "paused" : "stopped",
            "loopStatus": Self.loopStatus(status.playModes ?? PlayModes()), "shuffle": status.playModes?.random ?? false, "volume": status.groupVolume ?? 100, "mute": false, "rate": 1.0,
            "canGoNext": true, "canGoPrevious": true, "canPlay": true, "canPause": true, "canSeek": true, "canControl": true,
            "metadata": metadata,
        ]
        if let position = status.itemPositionSeconds { properties["position"] = position }
        func stream(_ id: String, _ state: String, _ properties: [String: Any]) -> [String: Any] {
            ["id": id, "status": state, "properties": properties,
             "uri": ["raw": "tutti:///\(id)", "scheme": "tutti", "host": "", "path": "/\(id)", "fragment": "", "query": ["name": id]]]
        }
        return ["server": [
            "groups": groups,
            "server": [
                "host": ["arch": "x86_64", "ip": "", "mac": "", "name": hostName, "os": "Linux"],
                "snapserver": ["controlProtocolVersion": 1, "name": "Snapserver", "protocolVersion": 1, "version": "0.26.0"],
            ],
            "streams": [stream(streamID, playing ? "playing" : "idle", properties), stream(idleStreamID, "idle", [:])],
        ] as [String: Any]]
    }

    /// The play modes as MPRIS's loop status, which Snapcast's stream properties carry.
    static func loopStatus(_ modes: PlayModes) -> String {
        modes.repeat ? (modes.single ? "track" : "playlist") : "none"
    }

    static func client(_ room: RoomReport) -> [String: Any] {
        [
            "id": room.name,
            "connected": true,
            "lastSeen": ["sec": Int(Date().timeIntervalSince1970), "usec": 0],
            "host": ["arch": "x86_64", "ip": "", "mac": "00:00:00:00:00:00", "name": room.name, "os": "Linux"],
            "config": ["instance": 1, "latency": Int(room.latencyMs.rounded()), "name": room.name,
                       "volume": ["muted": room.volume == 0, "percent": room.volume]] as [String: Any],
            "snapclient": ["name": "tutti speaker", "protocolVersion": 2, "version": "tutti"],
        ]
    }
}
