import Foundation
import TuttiProtocol

/// The house as its Snapcast controllers see it: its groups, each group's status, its rooms.
/// Gathered in one look (`SnapcastControlMethods.view()`).
struct SnapcastHouseView {
    var groups: [GroupReport]
    /// Each group's status, by group id.
    var statuses: [UInt32: StatusReport]
    /// Every connected room.
    var rooms: [RoomReport]

    func group(snapcastID id: String) -> GroupReport? {
        groups.first { SnapcastServerStatus.groupID($0) == id }
    }

    func group(streamID id: String) -> GroupReport? {
        groups.first { SnapcastServerStatus.streamID($0) == id }
    }

    func room(clientID id: String) -> RoomReport? {
        rooms.first { SnapcastServerStatus.clientID($0) == id }
    }

    func members(of group: GroupReport) -> [RoomReport] {
        rooms.filter { $0.group == group.name }
    }

    /// Without what only time changes (positions, the clock, buffers): what a controller
    /// would be told of again.
    var steady: String {
        var view = self
        for id in view.statuses.keys {
            view.statuses[id]!.serverTimeNs = 0
            view.statuses[id]!.positionSeconds = nil
            view.statuses[id]!.itemPositionSeconds = nil
            view.statuses[id]!.bufferedAheadSeconds = nil
            view.statuses[id]!.rooms = []
        }
        for index in view.groups.indices { view.groups[index].positionSeconds = nil }
        view.rooms = view.rooms.map { room in
            var room = room
            room.bufferSeconds = nil
            room.syncErrorMicroseconds = nil
            room.clockErrorMicroseconds = nil
            room.playheadSeconds = nil
            room.sentSeconds = 0
            room.fillRate = nil
            return room
        }
        let encoder = JSONEncoder()
        encoder.outputFormatting = .sortedKeys
        let parts = [try? encoder.encode(view.groups), try? encoder.encode(view.statuses.sorted { $0.key < $1.key }.map(\.value)),
                     try? encoder.encode(view.rooms)]
        return parts.map { String(decoding: $0 ?? Data(), as: UTF8.self) }.joined(separator: "\n")
    }
}

/// The house as Snapcast's control API describes a server (`Server.GetStatus`): its rooms as
/// clients, its groups as groups, each playing a stream of its own.
///
/// A Snapcast group plays a stream; a house group plays its queue. So each house group is a
/// Snapcast group (its id the group's id) playing the group's stream (its id `group-ID`, its
/// name the group's): moving a group onto another group's stream moves its rooms into that
/// group, to hear its music. A client's id is its room's id, which a rename does not change.
enum SnapcastServerStatus {
    static func groupID(_ group: GroupReport) -> String { String(group.id) }
    static func streamID(_ group: GroupReport) -> String { "group-\(group.id)" }
    static func clientID(_ room: RoomReport) -> String { String(room.id) }

    static func status(_ view: SnapcastHouseView, hostName: String) -> Snapcast.StatusResult {
        // Snapcast keeps no empty group (snapserver drops one as its last client leaves); the
        // house keeps them, with their queues. Their streams stay listed, to be chosen.
        let groups = view.groups.filter { !view.members(of: $0).isEmpty }.map { self.group($0, in: view) }
        return Snapcast.StatusResult(server: Snapcast.Server(
            groups: groups,
            server: Snapcast.ServerInfo(host: Snapcast.Host(arch: "x86_64", ip: "", mac: "", name: hostName, os: "Linux"),
                                        snapserver: Snapcast.Snapserver(controlProtocolVersion: 1, name: "Snapserver", protocolVersion: 1, version: "0.26.0")),
            streams: view.groups.map { stream($0, status: view.statuses[$0.id]) }))
    }

    /// A group, with its clients.
    static func group(_ group: GroupReport, in view: SnapcastHouseView) -> Snapcast.Group {
        let members = view.members(of: group).sorted { $0.id < $1.id }
        // A group is muted when every room of it is silent (Group.SetMute turns each to 0).
        return Snapcast.Group(id: groupID(group), name: group.name, muted: !members.isEmpty && members.allSatisfy { $0.volume == 0 },
                              streamID: streamID(group), clients: members.map(client))
    }

    /// A group's stream: what it plays, as MPRIS-like properties.
    static func stream(_ group: GroupReport, status: StatusReport?) -> Snapcast.Stream {
        let playing = group.state == "playing" || group.state == "starting"
        var metadata = Snapcast.Metadata(title: status?.title, artist: status?.artist.map { [$0] }, album: status?.album,
                                         duration: status?.itemDurationSeconds)
        if let path = status?.path, path.hasPrefix("/") {
            metadata.artUrl = "/api/artwork?placeholder=true&path=" + (path.addingPercentEncoding(withAllowedCharacters: .urlQueryAllowed) ?? path)
        } else if let revision = status?.source?.artworkRevision {
            // A live source's cover (an AirPlay sender's), by group and revision.
            metadata.artUrl = "/api/artwork?live=\(group.id)&revision=\(revision)"
        }
        let properties = Snapcast.StreamProperties(
            playbackStatus: playing ? "playing" : group.state == "paused" ? "paused" : "stopped",
            loopStatus: loopStatus(status?.playModes ?? PlayModes()), shuffle: status?.playModes?.random ?? false,
            volume: group.volume ?? 100, mute: false, rate: 1.0,
            canGoNext: true, canGoPrevious: true, canPlay: true, canPause: true, canSeek: true, canControl: true,
            metadata: metadata, position: status?.itemPositionSeconds)
        let id = streamID(group)
        return Snapcast.Stream(id: id, status: playing ? "playing" : "idle", properties: properties,
                               uri: Snapcast.StreamURI(raw: "tutti:///\(id)?name=\(group.name.addingPercentEncoding(withAllowedCharacters: .urlQueryAllowed) ?? id)",
                                                       scheme: "tutti", host: "", path: "/\(id)", fragment: "", query: ["name": group.name]))
    }

    /// The play modes as MPRIS's loop status, which Snapcast's stream properties carry.
    static func loopStatus(_ modes: PlayModes) -> String {
        modes.repeat ? (modes.single ? "track" : "playlist") : "none"
    }

    static func client(_ room: RoomReport) -> Snapcast.Client {
        Snapcast.Client(
            id: clientID(room), connected: true, lastSeen: Snapcast.Time(sec: Int(Date().timeIntervalSince1970), usec: 0),
            host: Snapcast.Host(arch: "x86_64", ip: "", mac: "00:00:00:00:00:00", name: room.name, os: "Linux"),
            config: Snapcast.ClientConfig(instance: 1, latency: Int(room.latencyMs.rounded()), name: room.name,
                                          volume: Snapcast.Volume(muted: room.volume == 0, percent: room.volume)),
            snapclient: Snapcast.Snapclient(name: "tutti speaker", protocolVersion: 2, version: "tutti"))
    }
}
