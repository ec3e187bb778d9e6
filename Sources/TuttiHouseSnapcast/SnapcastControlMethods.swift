import Foundation
import TuttiHouse
import TuttiProtocol

/// Snapcast's control methods (JSON-RPC 2.0, doc/json_rpc_api/control.md in badaix/snapcast),
/// each performed through the house's typed control commands: a client's volume and latency
/// are its room's, moving clients into group `tutti` joins them to the house's group, and
/// `Stream.Control` drives the house's transport.
///
/// Not thread-safe: one per connection.
struct SnapcastControlMethods {
    let house: House
    let hostName: String
    /// Volumes before a mute, by room, so that unmuting restores them (the house has no mute).
    var mutedVolumes: [String: Int] = [:]

    /// A JSON-RPC error: code and one-line message.
    struct Failure: Error {
        var code: Int
        var message: String
        static func invalidParams(_ message: String) -> Failure { Failure(code: -32602, message: message) }
    }

    private func perform(_ command: ControlCommand) async throws(Failure) -> ControlReply {
        switch await house.perform(command) {
        case .success(let reply): return reply
        case .failure(let refusal): throw Failure(code: refusal.kind == .invalid ? -32602 : -32603, message: refusal.error)
        }
    }

    func status() async throws(Failure) -> StatusReport {
        guard case .status(let status) = try await perform(.status) else { throw Failure(code: -32603, message: "the house did not report its status") }
        return status
    }

    private func room(_ id: String, in status: StatusReport) throws(Failure) -> RoomReport {
        guard let room = status.rooms.first(where: { $0.name == id }) else { throw Failure.invalidParams("Client not found: \(id)") }
        return room
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
            return SnapcastServerStatus.json(try await status(), hostName: hostName)
        case "Server.DeleteClient":
            throw Failure(code: -32603, message: "a connected room cannot be deleted; stop its speaker")
        case "Client.GetStatus":
            return ["client": SnapcastServerStatus.client(try room(Self.string(params, "id"), in: await status()))]
        case "Client.SetVolume":
            let id = try Self.string(params, "id")
            guard let volume = params["volume"] as? [String: Any] else { throw Failure.invalidParams("\"volume\" must be an object") }
            let current = try room(id, in: await status())
            var percent = try volume["percent"] != nil ? Int(Self.number(volume, "percent").rounded()) : current.volume
            guard (0...100).contains(percent) else { throw Failure.invalidParams("volume percent must be 0 to 100") }
            if let muted = volume["muted"] as? Bool {
                if muted {
                    if current.volume > 0 { mutedVolumes[id] = volume["percent"] != nil && percent > 0 ? percent : current.volume }
                    percent = 0
                } else if volume["percent"] == nil, let restored = mutedVolumes.removeValue(forKey: id) {
                    percent = restored
                }
            }
            _ = try await perform(.volume(room: id, percent: percent))
            return ["volume": ["muted": percent == 0, "percent": percent]]
        case "Client.SetLatency":
            let id = try Self.string(params, "id")
            let latency = try Self.number(params, "latency")
            guard latency >= 0 && latency <= 2000 else { throw Failure.invalidParams("latency must be 0 to 2000 ms") }
            _ = try await perform(.roomLatency(room: id, milliseconds: latency))
            return ["latency": Int(latency.rounded())]
        case "Client.SetName":
            let id = try Self.string(params, "id"), name = try Self.string(params, "name")
            _ = try await perform(.roomRename(room: id, to: name))
            return ["name": name]
        case "Group.GetStatus":
            let id = try Self.string(params, "id")
            let server = SnapcastServerStatus.json(try await status(), hostName: hostName)
            let groups = (server["server"] as? [String: Any])?["groups"] as? [[String: Any]] ?? []
            guard let group = groups.first(where: { $0["id"] as? String == id }) else { throw Failure.invalidParams("Group not found: \(id)") }
            return ["group": group]
        case "Group.SetMute":
            let id = try Self.string(params, "id")
            guard let mute = params["mute"] as? Bool else { throw Failure.invalidParams("\"mute\" must be a boolean") }
            let now = try await status()
            let members = id == SnapcastServerStatus.groupID ? now.rooms.filter(\.inGroup) : now.rooms.filter { $0.name == id }
            guard !members.isEmpty || id == SnapcastServerStatus.groupID else { throw Failure.invalidParams("Group not found: \(id)") }
            for room in members {
                if mute {
                    if room.volume > 0 { mutedVolumes[room.name] = room.volume }
                    _ = try await perform(.volume(room: room.name, percent: 0))
                } else if let restored = mutedVolumes.removeValue(forKey: room.name) {
                    _ = try await perform(.volume(room: room.name, percent: restored))
                }
            }
            return ["mute": mute]
        case "Group.SetStream":
            let id = try Self.string(params, "id"), stream = try Self.string(params, "stream_id")
            guard stream == SnapcastServerStatus.streamID || stream == SnapcastServerStatus.idleStreamID else {
                throw Failure.invalidParams("Stream not found: \(stream)")
            }
            let now = try await status()
            let members = id == SnapcastServerStatus.groupID ? now.rooms.filter(\.inGroup) : now.rooms.filter { $0.name == id }
            guard !members.isEmpty else { throw Failure.invalidParams("Group not found: \(id)") }
            for room in members {
                _ = try await perform(stream == SnapcastServerStatus.streamID ? .join(room: room.name) : .leave(room: room.name))
            }
            return ["stream_id": stream]
        case "Group.SetClients":
            let id = try Self.string(params, "id")
            guard let clients = params["clients"] as? [String] else { throw Failure.invalidParams("\"clients\" must be a list of client ids") }
            let now = try await status()
            for client in clients { _ = try room(client, in: now) }
            if id == SnapcastServerStatus.groupID {
                for room in now.rooms where clients.contains(room.name) != room.inGroup {
                    _ = try await perform(room.inGroup ? .leave(room: room.name) : .join(room: room.name))
                }
            } else {
                // Into a room's own group: off the house's group, so silent, as that group is.
                for room in now.rooms where clients.contains(room.name) && room.inGroup { _ = try await perform(.leave(room: room.name)) }
            }
            return SnapcastServerStatus.json(try await status(), hostName: hostName)
        case "Group.SetName":
            throw Failure(code: -32603, message: "group names are not kept by the house")
        case "Stream.Control":
            let command = try Self.string(params, "command")
            let now = try await status()
            let arguments = params["params"] as? [String: Any] ?? [:]
            switch command {
            case "play":
                if now.state == "paused" { _ = try await perform(.resume) } else if now.state == "stopped" { _ = try await perform(.queuePlay(index: now.item ?? 0)) }
            case "pause":
                if now.state == "playing" { _ = try await perform(.pause) }
            case "playPause":
                _ = try await perform(now.state == "playing" ? .pause : now.state == "paused" ? .resume : .queuePlay(index: now.item ?? 0))
            case "stop": _ = try await perform(.stop)
            case "next": _ = try await perform(.next)
            case "previous": _ = try await perform(.previous)
            case "seek": _ = try await perform(.seek(seconds: max(0, (now.itemPositionSeconds ?? 0) + Self.number(arguments, "offset"))))
            case "setPosition": _ = try await perform(.seek(seconds: max(0, Self.number(arguments, "position"))))
            default: throw Failure.invalidParams("unknown stream command \(command)")
            }
            return "ok"
        case "Stream.SetProperty":
            switch try Self.string(params, "property") {
            case "volume":
                _ = try await perform(.groupVolume(percent: Int(Self.number(params, "value").rounded())))
            case "loopStatus":
                // MPRIS's loop status: the queue repeats ("playlist"), the track does ("track"), or neither.
                switch try Self.string(params, "value") {
                case "none": _ = try await perform(.playModes(repeat: false, single: false))
                case "track": _ = try await perform(.playModes(repeat: true, single: true))
                case "playlist": _ = try await perform(.playModes(repeat: true, single: false))
                case let other: throw Failure.invalidParams("loopStatus must be none, track or playlist, not \(other)")
                }
            case "shuffle":
                guard let on = params["value"] as? Bool else { throw Failure.invalidParams("shuffle must be true or false") }
                _ = try await perform(.playModes(random: on))
            case let other:
                throw Failure.invalidParams("the stream's \(other) cannot be set (volume, loopStatus and shuffle can)")
            }
            return "ok"
        default:
            throw Failure(code: -32601, message: "Method not found: \(method)")
        }
    }
}
