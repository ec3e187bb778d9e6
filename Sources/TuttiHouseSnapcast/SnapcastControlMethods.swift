import Foundation
import TuttiHouse
import TuttiProtocol

/// Snapcast's control methods (JSON-RPC 2.0, doc/json_rpc_api/control.md in badaix/snapcast),
/// each performed through the house's typed control commands: a client's volume, latency and
/// name are its room's; a group's clients and stream are the house group's rooms and music
/// (`Group.SetClients` moves rooms, `Group.SetStream` onto another group's stream joins its
/// music); `Stream.Control` and `Stream.SetProperty` drive the stream's group.
///
/// Not thread-safe: one per connection.
struct SnapcastControlMethods {
    let house: House
    let hostName: String
    /// Volumes before a mute, by room id, so that unmuting restores them (the house has no mute).
    let mutedVolumes: SnapcastMutedVolumes

    /// A JSON-RPC error: code and one-line message.
    struct Failure: Error {
        var code: Int
        var message: String
        static func invalidParams(_ message: String) -> Failure { Failure(code: -32602, message: message) }
    }

    private func perform(_ command: ControlCommand, group: GroupReport? = nil) async throws(Failure) -> ControlReply {
        switch await house.perform(command, group: group.map { String($0.id) }) {
        case .success(let reply): return reply
        case .failure(let refusal): throw Failure(code: refusal.kind == .invalid ? -32602 : -32603, message: refusal.error)
        }
    }

    /// The groups, their statuses and the rooms, in one look.
    func view() async throws(Failure) -> SnapcastHouseView {
        guard case .groups(let groups) = try await perform(.groups), case .rooms(let rooms) = try await perform(.rooms) else {
            throw Failure(code: -32603, message: "the house did not report its groups")
        }
        var statuses: [UInt32: StatusReport] = [:]
        for group in groups.groups {
            if case .status(let status) = try await perform(.status, group: group) { statuses[group.id] = status }
        }
        return SnapcastHouseView(groups: groups.groups, statuses: statuses, rooms: rooms.rooms)
    }

    private func room(_ id: String, in view: SnapcastHouseView) throws(Failure) -> RoomReport {
        guard let room = view.room(clientID: id) else { throw Failure.invalidParams("Client not found: \(id)") }
        return room
    }

    private func group(_ id: String, in view: SnapcastHouseView) throws(Failure) -> GroupReport {
        guard let group = view.group(snapcastID: id) else { throw Failure.invalidParams("Group not found: \(id)") }
        return group
    }

    private func stream(_ id: String, in view: SnapcastHouseView) throws(Failure) -> GroupReport {
        guard let group = view.group(streamID: id) else { throw Failure.invalidParams("Stream not found: \(id)") }
        return group
    }

    private static func string(_ params: [String: Any], _ key: String) throws(Failure) -> String {
        guard let value = params[key] as? String else { throw Failure.invalidParams("\"\(key)\" must be a string") }
        return value
    }

    private static func number(_ params: [String: Any], _ key: String) throws(Failure) -> Double {
        guard let value = params[key] as? NSNumber, value.doubleValue.isFinite else {
            throw Failure.invalidParams("\"\(key)\" must be a number")
        }
        return value.doubleValue
    }

    /// Performs `method`; its result object.
    mutating func call(_ method: String, _ params: [String: Any]) async throws(Failure) -> Any {
        switch method {
        case "Server.GetRPCVersion":
            return ["major": 2, "minor": 0, "patch": 0]
        case "Server.GetStatus":
            return SnapcastServerStatus.json(try await view(), hostName: hostName)
        case "Server.DeleteClient":
            throw Failure(code: -32603, message: "a connected room cannot be deleted; stop its speaker")
        case "Client.GetStatus":
            return ["client": SnapcastServerStatus.client(try room(Self.string(params, "id"), in: await view()))]
        case "Client.SetVolume":
            let id = try Self.string(params, "id")
            guard let volume = params["volume"] as? [String: Any] else { throw Failure.invalidParams("\"volume\" must be an object") }
            let current = try room(id, in: await view())
            var percent = try volume["percent"] != nil ? Int(Self.number(volume, "percent").rounded()) : current.volume
            guard (0...100).contains(percent) else { throw Failure.invalidParams("volume percent must be 0 to 100") }
            if let muted = volume["muted"] as? Bool {
                if muted {
                    if current.volume > 0 { mutedVolumes.mute(current.id, from: volume["percent"] != nil && percent > 0 ? percent : current.volume) }
                    percent = 0
                } else if volume["percent"] == nil, let restored = mutedVolumes.unmute(current.id) {
                    percent = restored
                }
            }
            _ = try await perform(.volume(room: current.name, percent: percent))
            return ["volume": ["muted": percent == 0, "percent": percent]]
        case "Client.SetLatency":
            let current = try room(Self.string(params, "id"), in: await view())
            let latency = try Self.number(params, "latency")
            guard latency >= 0 && latency <= 2000 else { throw Failure.invalidParams("latency must be 0 to 2000 ms") }
            _ = try await perform(.roomLatency(room: current.name, milliseconds: latency))
            return ["latency": Int(latency.rounded())]
        case "Client.SetName":
            let current = try room(Self.string(params, "id"), in: await view())
            let name = try Self.string(params, "name")
            _ = try await perform(.roomRename(room: current.name, to: name))
            return ["name": name]
        case "Group.GetStatus":
            let now = try await view()
            return ["group": SnapcastServerStatus.group(try group(Self.string(params, "id"), in: now), in: now)]
        case "Group.SetMute":
            let now = try await view()
            let group = try group(Self.string(params, "id"), in: now)
            guard let mute = params["mute"] as? Bool else { throw Failure.invalidParams("\"mute\" must be a boolean") }
            for room in now.members(of: group) {
                if mute {
                    if room.volume > 0 { mutedVolumes.mute(room.id, from: room.volume) }
                    _ = try await perform(.volume(room: room.name, percent: 0))
                } else if let restored = mutedVolumes.unmute(room.id) {
                    _ = try await perform(.volume(room: room.name, percent: restored))
                }
            }
            return ["mute": mute]
        case "Group.SetStream":
            let now = try await view()
            let group = try group(Self.string(params, "id"), in: now)
            let target = try stream(Self.string(params, "stream_id"), in: now)
            // Onto another group's stream: the group's rooms go to that group, to hear its music.
            if target.id != group.id {
                for room in now.members(of: group) { _ = try await perform(.join(room: room.name), group: target) }
            }
            return ["stream_id": SnapcastServerStatus.streamID(target)]
        case "Group.SetClients":
            let now = try await view()
            let group = try group(Self.string(params, "id"), in: now)
            guard let clients = params["clients"] as? [String] else { throw Failure.invalidParams("\"clients\" must be a list of client ids") }
            let wanted = try clients.map { (id: String) throws(Failure) -> RoomReport in try room(id, in: now) }
            // Snapcast's way: the group holds exactly these clients; one taken out goes to a
            // group of its own.
            for room in now.members(of: group) where !wanted.contains(where: { $0.id == room.id }) {
                _ = try await perform(.leave(room: room.name), group: group)
            }
            for room in wanted where room.group != group.name { _ = try await perform(.join(room: room.name), group: group) }
            return SnapcastServerStatus.json(try await view(), hostName: hostName)
        case "Group.SetName":
            let now = try await view()
            let group = try group(Self.string(params, "id"), in: now)
            let name = try Self.string(params, "name")
            _ = try await perform(.groupRename(to: name), group: group)
            return ["name": name]
        case "Stream.Control":
            let now = try await view()
            let group = try stream(Self.string(params, "id"), in: now)
            let command = try Self.string(params, "command")
            let state = now.statuses[group.id]
            let arguments = params["params"] as? [String: Any] ?? [:]
            switch command {
            case "play":
                if group.state == "paused" { _ = try await perform(.resume, group: group) } else if group.state == "stopped" { _ = try await perform(.queuePlay(index: state?.item ?? 0), group: group) }
            case "pause":
                if group.state == "playing" { _ = try await perform(.pause, group: group) }
            case "playPause":
                _ = try await perform(group.state == "playing" ? .pause : group.state == "paused" ? .resume : .queuePlay(index: state?.item ?? 0), group: group)
            case "stop": _ = try await perform(.stop, group: group)
            case "next": _ = try await perform(.next, group: group)
            case "previous": _ = try await perform(.previous, group: group)
            case "seek": _ = try await perform(.seek(seconds: max(0, (state?.itemPositionSeconds ?? 0) + Self.number(arguments, "offset"))), group: group)
            case "setPosition": _ = try await perform(.seek(seconds: max(0, Self.number(arguments, "position"))), group: group)
            default: throw Failure.invalidParams("unknown stream command \(command)")
            }
            return "ok"
        case "Stream.SetProperty":
            let group = try stream(Self.string(params, "id"), in: await view())
            switch try Self.string(params, "property") {
            case "volume":
                _ = try await perform(.groupVolume(percent: Int(Self.number(params, "value").rounded())), group: group)
            case "loopStatus":
                // MPRIS's loop status: the queue repeats ("playlist"), the track does ("track"), or neither.
                switch try Self.string(params, "value") {
                case "none": _ = try await perform(.playModes(repeat: false, single: false), group: group)
                case "track": _ = try await perform(.playModes(repeat: true, single: true), group: group)
                case "playlist": _ = try await perform(.playModes(repeat: true, single: false), group: group)
                case let other: throw Failure.invalidParams("loopStatus must be none, track or playlist, not \(other)")
                }
            case "shuffle":
                guard let on = params["value"] as? Bool else { throw Failure.invalidParams("shuffle must be true or false") }
                _ = try await perform(.playModes(random: on), group: group)
            case let other:
                throw Failure.invalidParams("the stream's \(other) cannot be set (volume, loopStatus and shuffle can)")
            }
            return "ok"
        default:
            throw Failure(code: -32601, message: "Method not found: \(method)")
        }
    }
}
