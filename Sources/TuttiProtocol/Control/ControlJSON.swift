import FoundationEssentials

/// The JSON of control commands and replies: the one place where they are encoded and decoded,
/// by the house and by every client (`tutti ctl`, tests, benchmarks).
///
/// Bad input is answered with a `ControlRefusal` naming the command and the field:
/// `seek: "seconds" must be a number`, never with a decoder's dump.
public enum ControlJSON {
    private static func makeEncoder() -> JSONEncoder {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        return encoder
    }

    public static func encode(_ command: ControlCommand) -> String {
        encodeValue(command)
    }

    public static func encode(_ request: ControlRequest) -> String {
        encodeValue(request)
    }

    public static func encode(_ reply: ControlReply) -> String {
        encodeValue(reply.report)
    }

    public static func encode(_ refusal: ControlRefusal) -> String {
        encodeValue(refusal)
    }

    /// Pretty-printed JSON of a reply, for `--json` output.
    public static func prettyPrinted(_ reply: ControlReply) -> String {
        let encoder = makeEncoder()
        encoder.outputFormatting.insert(.prettyPrinted)
        return (try? encoder.encode(reply.report)).map { String(decoding: $0, as: UTF8.self) } ?? "{}"
    }

    private static func encodeValue(_ value: some Encodable) -> String {
        // Every control type encodes strings, numbers, bools and arrays of them: it cannot fail.
        String(decoding: try! makeEncoder().encode(value), as: UTF8.self)
    }

    /// Reads a request; one that is not one is refused with one line saying why.
    public static func decodeRequest(_ json: String) throws(ControlRefusal) -> ControlRequest {
        let data = Data(json.utf8)
        struct Envelope: Decodable { var command: String? }
        guard let envelope = try? JSONDecoder().decode(Envelope.self, from: data), let name = envelope.command else {
            throw ControlRefusal("request is not a JSON object with a \"command\"")
        }
        do {
            return try JSONDecoder().decode(ControlRequest.self, from: data)
        } catch let error as DecodingError {
            throw ControlRefusal(describe(error, in: name))
        } catch {
            throw ControlRefusal("\(name): \(error)")
        }
    }

    /// An HTTP API request (docs/HTTP-API.md): the body, a JSON object or nothing; the fields
    /// the route's path and query string give, which win over the body's; the command the route
    /// names (nil for `/api/control`, whose body names it). A body that is not a JSON object is
    /// refused naming the command.
    public static func decodeRequest(body: some Collection<UInt8>, command: String?, fields: [String: JSONValue]) throws(ControlRefusal) -> ControlRequest {
        let name = command ?? "control"
        var object: [String: JSONValue] = [:]
        if !body.isEmpty {
            guard case .object(let read)? = try? JSONDecoder().decode(JSONValue.self, from: Data(body)) else {
                throw ControlRefusal("\(name): the body is not a JSON object")
            }
            object = read
        }
        object.merge(fields) { _, fromRoute in fromRoute }
        if let command { object["command"] = .string(command) }
        let json: Data
        do { json = try makeEncoder().encode(JSONValue.object(object)) } catch {
            // Only a number JSON cannot carry (infinite, not a number) fails, and no parsed
            // body or route field holds one; refused rather than trusted.
            throw ControlRefusal("\(name): the request cannot be written as JSON: \(error)")
        }
        return try decodeRequest(String(decoding: json, as: UTF8.self))
    }

    /// Reads a request's command, whatever group it names.
    public static func decodeCommand(_ json: String) throws(ControlRefusal) -> ControlCommand {
        try decodeRequest(json).command
    }

    /// Reads the reply to `command`.
    /// - Throws: `ControlRefusal` if the JSON is not the report that command gets.
    public static func decodeReply(_ json: String, to command: ControlCommand) throws(ControlRefusal) -> ControlReply {
        let data = Data(json.utf8)
        let decoder = JSONDecoder()
        do {
            switch command {
            case .play: return .started(try decoder.decode(PlayReport.self, from: data))
            case .pause: return .paused(try decoder.decode(PauseReport.self, from: data))
            case .resume: return .resumed(try decoder.decode(ResumeReport.self, from: data))
            case .seek, .next, .previous, .queueAdd, .queueRemove, .queueMove, .queueClear, .queuePlay, .queueShuffle, .stop, .playlistLoad:
                return .edited(try decoder.decode(EditReport.self, from: data))
            case .rooms, .admit, .forget, .unpair: return .rooms(try decoder.decode(RoomsReport.self, from: data))
            case .join, .leave, .volume, .roomLatency, .roomRename, .roomChannel, .pair: return .room(try decoder.decode(RoomChange.self, from: data))
            case .groups, .groupCreate, .groupRename, .groupRemove: return .groups(try decoder.decode(GroupsReport.self, from: data))
            case .groupVolume: return .group(try decoder.decode(GroupVolumeReport.self, from: data))
            case .queue: return .queue(try decoder.decode(QueueReport.self, from: data))
            case .status, .playModes, .replayGain, .crossfade: return .status(try decoder.decode(StatusReport.self, from: data))
            case .playlists, .playlistSave, .playlistRemove, .playlistAdd: return .playlists(try decoder.decode(StoredPlaylistsReport.self, from: data))
            case .librarySearch, .libraryBrowse, .libraryProblems: return .library(try decoder.decode(LibraryBrowseReport.self, from: data))
            case .pairController: return .pairing(try decoder.decode(PairingReport.self, from: data))
            }
        } catch let error as DecodingError {
            throw ControlRefusal("reply to \(command.name): \(describe(error, in: command.name))")
        } catch {
            throw ControlRefusal("reply to \(command.name): \(error)")
        }
    }

    /// Reads a refusal; any other text is taken as the reason itself.
    public static func decodeRefusal(_ json: String) -> ControlRefusal {
        (try? JSONDecoder().decode(ControlRefusal.self, from: Data(json.utf8))) ?? ControlRefusal(json)
    }

    /// One line for a decoding error: which field of which command, and what is wrong with it.
    static func describe(_ error: DecodingError, in command: String) -> String {
        func path(_ context: DecodingError.Context, _ key: (any CodingKey)? = nil) -> String {
            let keys = context.codingPath.map { $0.intValue.map { "[\($0)]" } ?? $0.stringValue } + (key.map { [$0.stringValue] } ?? [])
            return keys.joined(separator: ".")
        }
        func name(_ type: Any.Type) -> String {
            switch type {
            case is String.Type: "a string"
            case is Int.Type, is Int64.Type, is UInt32.Type: "a whole number"
            case is Double.Type: "a number"
            case is Bool.Type: "true or false"
            case is [String].Type, is [Any].Type: "a list"
            default: "\(type)"
            }
        }
        switch error {
        case .keyNotFound(let key, let context):
            return "\(command): missing \"\(path(context, key))\""
        case .typeMismatch(let type, let context):
            return "\(command): \"\(path(context))\" must be \(name(type))"
        case .valueNotFound(let type, let context):
            return "\(command): \"\(path(context))\" must be \(name(type)), not null"
        case .dataCorrupted(let context):
            return context.codingPath.last?.stringValue == "command" ? context.debugDescription
                                                                       : "\(command): \(context.debugDescription)"
        @unknown default:
            return "\(command): \(error)"
        }
    }
}
