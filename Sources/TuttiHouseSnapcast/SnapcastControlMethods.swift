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

    /// `params` read as `T`: a field missing or of the wrong type is -32602, naming the field.
    static func params<T: Decodable>(_ type: T.Type, _ params: JSONValue?) throws(Failure) -> T {
        do throws(SnapcastParams.Invalid) { return try SnapcastParams.read(type, params) } catch { throw .invalidParams(error.message) }
    }

    /// Performs `method` with `params`; its result.
    mutating func call(_ method: String, _ params: JSONValue?) async throws(Failure) -> any Encodable {
        switch method {
        case "Server.GetRPCVersion":
            return Snapcast.RPCVersion(major: 2, minor: 0, patch: 0)
        case "Server.GetStatus":
            return SnapcastServerStatus.status(try await view(), hostName: hostName)
        case "Server.DeleteClient":
            throw Failure(code: -32603, message: "a connected room cannot be deleted; stop its speaker")
        case "Client.GetStatus":
            let request = try Self.params(SnapcastParams.ID.self, params)
            return Snapcast.ClientResult(client: SnapcastServerStatus.client(try room(request.id, in: await view())))
        case "Client.SetVolume":
            let request = try Self.params(SnapcastParams.ClientSetVolume.self, params)
            let current = try room(request.id, in: await view())
            // Checked before it becomes an Int: a percent of 1e300 must be refused, not trap.
            if let asked = request.volume.percent, !(asked >= 0 && asked <= 100) { throw Failure.invalidParams("volume percent must be 0 to 100") }
            var percent = request.volume.percent.map { Int($0.rounded()) } ?? current.volume
            if let muted = request.volume.muted {
                if muted {
                    if current.volume > 0 { mutedVolumes.mute(current.id, from: request.volume.percent != nil && percent > 0 ? percent : current.volume) }
                    percent = 0
                } else if request.volume.percent == nil, let restored = mutedVolumes.unmute(current.id) {
                    percent = restored
                }
            }
            _ = try await perform(.volume(room: current.name, percent: percent))
            return Snapcast.VolumeResult(volume: Snapcast.Volume(muted: percent == 0, percent: percent))
        case "Client.SetLatency":
            let request = try Self.params(SnapcastParams.ClientSetLatency.self, params)
            let current = try room(request.id, in: await view())
            guard request.latency.isFinite, request.latency >= 0 && request.latency <= 2000 else { throw Failure.invalidParams("latency must be 0 to 2000 ms") }
            _ = try await perform(.roomLatency(room: current.name, milliseconds: request.latency))
            return Snapcast.LatencyResult(latency: Int(request.latency.rounded()))
        case "Client.SetName":
            let request = try Self.params(SnapcastParams.SetName.self, params)
            let current = try room(request.id, in: await view())
            _ = try await perform(.roomRename(room: current.name, to: request.name))
            return Snapcast.NameResult(name: request.name)
        case "Group.GetStatus":
            let request = try Self.params(SnapcastParams.ID.self, params)
            let now = try await view()
            return Snapcast.GroupResult(group: SnapcastServerStatus.group(try group(request.id, in: now), in: now))
        case "Group.SetMute":
            let request = try Self.params(SnapcastParams.GroupSetMute.self, params)
            let now = try await view()
            let group = try group(request.id, in: now)
            for room in now.members(of: group) {
                if request.mute {
                    if room.volume > 0 { mutedVolumes.mute(room.id, from: room.volume) }
                    _ = try await perform(.volume(room: room.name, percent: 0))
                } else if let restored = mutedVolumes.unmute(room.id) {
                    _ = try await perform(.volume(room: room.name, percent: restored))
                }
            }
            return Snapcast.MuteResult(mute: request.mute)
        case "Group.SetStream":
            let request = try Self.params(SnapcastParams.GroupSetStream.self, params)
            let now = try await view()
            let group = try group(request.id, in: now)
            let target = try stream(request.streamID, in: now)
            // Onto another group's stream: the group's rooms go to that group, to hear its music.
            if target.id != group.id {
                for room in now.members(of: group) { _ = try await perform(.join(room: room.name), group: target) }
            }
            return Snapcast.StreamResult(streamID: SnapcastServerStatus.streamID(target))
        case "Group.SetClients":
            let request = try Self.params(SnapcastParams.GroupSetClients.self, params)
            let now = try await view()
            let group = try group(request.id, in: now)
            let wanted = try request.clients.map { (id: String) throws(Failure) -> RoomReport in try room(id, in: now) }
            // Snapcast's way: the group holds exactly these clients; one taken out goes to a
            // group of its own.
            for room in now.members(of: group) where !wanted.contains(where: { $0.id == room.id }) {
                _ = try await perform(.leave(room: room.name), group: group)
            }
            for room in wanted where room.group != group.name { _ = try await perform(.join(room: room.name), group: group) }
            return SnapcastServerStatus.status(try await view(), hostName: hostName)
        case "Group.SetName":
            let request = try Self.params(SnapcastParams.SetName.self, params)
            let group = try group(request.id, in: await view())
            _ = try await perform(.groupRename(to: request.name), group: group)
            return Snapcast.NameResult(name: request.name)
        case "Stream.Control":
            let request = try Self.params(SnapcastParams.StreamControl.self, params)
            let now = try await view()
            let group = try stream(request.id, in: now)
            let state = now.statuses[group.id]
            func argument(_ value: Double?, _ name: String) throws(Failure) -> Double {
                guard let value, value.isFinite else { throw Failure.invalidParams("\"params.\(name)\" must be a number") }
                return value
            }
            switch request.command {
            case "play":
                if group.state == "paused" { _ = try await perform(.resume, group: group) } else if group.state == "stopped" { _ = try await perform(.queuePlay(index: state?.item ?? 0), group: group) }
            case "pause":
                if group.state == "playing" { _ = try await perform(.pause, group: group) }
            case "playPause":
                _ = try await perform(group.state == "playing" ? .pause : group.state == "paused" ? .resume : .queuePlay(index: state?.item ?? 0), group: group)
            case "stop": _ = try await perform(.stop, group: group)
            case "next": _ = try await perform(.next, group: group)
            case "previous": _ = try await perform(.previous, group: group)
            case "seek": _ = try await perform(.seek(seconds: max(0, (state?.itemPositionSeconds ?? 0) + argument(request.params?.offset, "offset"))), group: group)
            case "setPosition": _ = try await perform(.seek(seconds: max(0, try argument(request.params?.position, "position"))), group: group)
            default: throw Failure.invalidParams("unknown stream command \(request.command)")
            }
            return "ok"
        case "Stream.SetProperty":
            let request = try Self.params(SnapcastParams.StreamSetProperty.self, params)
            let group = try stream(request.id, in: await view())
            switch request.property {
            case "volume":
                let value: Double
                switch request.value {
                case .integer(let number): value = Double(number)
                case .number(let number) where number.isFinite: value = number
                default: throw Failure.invalidParams("\"value\" must be a number")
                }
                // Checked before it becomes an Int, which a huge value would trap on.
                guard value >= 0 && value <= 100 else { throw Failure.invalidParams("the stream's volume must be 0 to 100") }
                _ = try await perform(.groupVolume(percent: Int(value.rounded())), group: group)
            case "loopStatus":
                // MPRIS's loop status: the queue repeats ("playlist"), the track does ("track"), or neither.
                guard case .string(let loop) = request.value else { throw Failure.invalidParams("\"value\" must be a string") }
                switch loop {
                case "none": _ = try await perform(.playModes(repeat: false, single: false), group: group)
                case "track": _ = try await perform(.playModes(repeat: true, single: true), group: group)
                case "playlist": _ = try await perform(.playModes(repeat: true, single: false), group: group)
                case let other: throw Failure.invalidParams("loopStatus must be none, track or playlist, not \(other)")
                }
            case "shuffle":
                guard case .bool(let on) = request.value else { throw Failure.invalidParams("shuffle must be true or false") }
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
