import TuttiProtocol

/// The JSON Schemas of the API's replies: the reports of `ControlReply` as `ControlJSON` writes
/// them (a nil optional is left out, so optionals are never required). `APISchemaTests` encodes
/// every report with every field set and checks its keys against these, so a field added to a
/// report and not here fails a test.
enum APISchemas {
    private static func property(_ name: String, _ schema: JSONSchema, required: Bool = true) -> (name: String, schema: JSONSchema, required: Bool) {
        (name, schema, required)
    }

    static let components: [String: JSONSchema] = {
        let number = JSONSchema.number(), integer = JSONSchema.integer(), string = JSONSchema.string()
        let channel = JSONSchema.string(oneOf: ChannelMode.allCases.map(\.rawValue))
        let half: JSONSchema = .object([property("id", .integer(minimum: 1)), property("name", string), property("connected", .boolean),
                                        property("syncErrorMicroseconds", number, required: false)])
        let pair: JSONSchema = .object([property("left", half), property("right", half)])
        let room: JSONSchema = .object([
            property("id", .integer(minimum: 1)), property("name", string), property("group", string), property("volume", .integer(minimum: 0, maximum: 100)),
            property("latencyMs", number), property("state", string),
            property("bufferSeconds", number, required: false), property("syncErrorMicroseconds", number, required: false),
            property("clockErrorMicroseconds", number, required: false), property("underruns", integer, required: false),
            property("fillRate", number, required: false), property("playheadSeconds", number, required: false),
            property("reconnects", .integer(minimum: 0), required: false),
            property("sentSeconds", number), property("problem", string, required: false),
            property("channel", channel, required: false), property("pair", pair, required: false),
        ])
        var schemas: [String: JSONSchema] = [
            "RoomReport": room,
            "RoomsReport": .object([property("rooms", .array(of: .reference("RoomReport"))),
                                    property("waiting", .array(of: .reference("WaitingSpeakerReport")), required: false)]),
            "WaitingSpeakerReport": .object([property("name", string), property("code", string), property("address", string), property("key", string),
                                             property("waitingSeconds", .number(minimum: 0))]),
            "RoomChange": .object([property("id", .integer(minimum: 1)), property("room", string), property("group", string),
                                   property("volume", .integer(minimum: 0, maximum: 100)),
                                   property("latencyMs", .number(minimum: 0, maximum: 2000), required: false),
                                   property("channel", channel, required: false), property("pair", pair, required: false)]),
            "LibraryTrack": .object([
                property("path", string), property("title", string, required: false), property("artist", string, required: false),
                property("album", string, required: false), property("durationSeconds", number, required: false), property("format", string),
                property("loudnessLUFS", number, required: false), property("peak", .number(minimum: 0), required: false),
                property("albumLoudnessLUFS", number, required: false),
            ]),
            "LibraryProblem": .object([property("path", string), property("reason", string)]),
            "LibraryBrowseReport": .object([
                property("artists", .array(of: string), required: false), property("albums", .array(of: string), required: false),
                property("tracks", .array(of: .reference("LibraryTrack")), required: false),
                property("problems", .array(of: .reference("LibraryProblem")), required: false),
            ]),
            "LibraryStatus": .object([
                property("tracks", .integer(minimum: 0)), property("unreadable", .integer(minimum: 0)), property("scanning", .boolean),
                property("scannedFiles", .integer(minimum: 0)), property("foundFiles", .integer(minimum: 0)),
            ]),
            "GroupVolumeReport": .object([property("percent", .integer(minimum: 0, maximum: 100)), property("rooms", .array(of: .reference("RoomChange")))]),
            "PlayReport": .object([
                property("items", integer), property("rooms", .array(of: string)), property("startsInMs", integer),
                property("startsAtServerTimeNs", integer, required: false),
                property("waitedMs", integer, required: false), property("notReady", .array(of: .reference("UnreadyRoom")), required: false),
                property("roomStarts", .array(of: .reference("RoomStart")), required: false),
            ]),
            "RoomStart": .object([
                property("room", string), property("mode", .string(oneOf: RoomStart.Mode.allCases.map(\.rawValue))),
                property("clockBoundMicroseconds", .integer(minimum: 0), required: false),
            ]),
            "UnreadyRoom": .object([property("room", string), property("reason", string)]),
            "PauseReport": .object([property("pausedAtSeconds", number)]),
            "ResumeReport": .object([property("resumedAtSeconds", number), property("startsInMs", integer)]),
            "StreamCut": .object([
                property("fromSeconds", number), property("aheadSeconds", number), property("seamless", .boolean),
                property("reason", string, required: false),
            ]),
            "EditReport": .object([
                property("cut", .reference("StreamCut"), required: false), property("item", integer, required: false),
                property("stopped", .boolean), property("queueLength", integer),
            ]),
            "QueueEntryReport": .object([
                property("index", integer), property("id", integer, required: false), property("path", string), property("current", .boolean),
                property("title", string, required: false), property("durationSeconds", number, required: false),
            ]),
            "QueueReport": .object([property("items", .array(of: .reference("QueueEntryReport"))), property("current", integer, required: false)]),
            "StatusReport": .object([
                property("server", string), property("group", string, required: false), property("groupId", .integer(minimum: 1), required: false),
                property("state", .string(oneOf: ["stopped", "starting", "playing", "paused"])),
                property("roomCount", integer), property("queueLength", integer), property("serverTimeNs", integer),
                property("stream", integer, required: false), property("positionSeconds", number, required: false),
                property("bufferedAheadSeconds", number, required: false), property("item", integer, required: false),
                property("title", string, required: false), property("path", string, required: false),
                property("artist", string, required: false), property("album", string, required: false),
                property("itemPositionSeconds", number, required: false),
                property("itemDurationSeconds", number, required: false), property("groupVolume", .integer(minimum: 0, maximum: 100), required: false),
                property("library", .reference("LibraryStatus"), required: false),
                property("playModes", .reference("PlayModes"), required: false), property("nextItem", integer, required: false),
                property("replayGain", .reference("ReplayGainSettings"), required: false),
                property("crossfadeSeconds", .number(minimum: 0, maximum: ControlCommand.maximumCrossfadeSeconds), required: false),
                property("storeProblem", string, required: false),
                property("rooms", .array(of: .reference("RoomReport"))),
                property("waiting", .array(of: .reference("WaitingSpeakerReport")), required: false),
                property("source", .reference("LiveSourceReport"), required: false),
            ]),
            "LiveSourceReport": .object([
                property("kind", string), property("sender", string), property("senderName", string, required: false),
                property("title", string, required: false), property("artist", string, required: false), property("album", string, required: false),
                property("artworkRevision", .integer(minimum: 1), required: false),
            ]),
            "GroupReport": .object([
                property("id", .integer(minimum: 1)), property("name", string), property("isDefault", .boolean),
                property("rooms", .array(of: string)), property("knownRooms", .array(of: string)),
                property("state", .string(oneOf: ["stopped", "starting", "playing", "paused"])), property("queueLength", integer),
                property("stream", integer, required: false), property("title", string, required: false),
                property("positionSeconds", number, required: false), property("volume", .integer(minimum: 0, maximum: 100), required: false),
                property("source", .reference("LiveSourceReport"), required: false), property("airplay", string, required: false),
            ]),
            "GroupsReport": .object([property("groups", .array(of: .reference("GroupReport")))]),
            "ReplayGainSettings": .object([property("mode", .string(oneOf: ReplayGainSettings.Mode.allCases.map(\.rawValue))),
                                           property("preampDB", number), property("missingPreampDB", number), property("limit", .boolean),
                                           property("measureAsPlayed", .boolean)]),
            "PlayModes": .object([property("repeat", .boolean), property("random", .boolean), property("single", .boolean), property("consume", .boolean)]),
            "StoredPlaylist": .object([property("name", string), property("files", .array(of: string)), property("modifiedSeconds", number)]),
            "StoredPlaylistsReport": .object([property("playlists", .array(of: .reference("StoredPlaylist")))]),
            "PairingReport": .object([property("code", string), property("validSeconds", .integer(minimum: 1))]),
            "SessionReport": .object([property("signedIn", .boolean), property("localName", string, required: false)]),
            "Refusal": .object([
                property("error", string),
                property("kind", .string(oneOf: [ControlRefusal.Kind.invalid, .notFound, .conflict, .unplayable, .forbidden, .unauthorized].map(\.rawValue))),
            ]),
        ]
        // Every reply may say that the command's write to the store failed (the status says
        // the store's problem anyway).
        for name in ["PlayReport", "PauseReport", "ResumeReport", "EditReport", "RoomsReport", "RoomChange", "GroupVolumeReport", "GroupsReport",
                     "QueueReport", "LibraryBrowseReport", "StoredPlaylistsReport", "PairingReport"] {
            guard case .object(let properties)? = schemas[name] else { preconditionFailure("\(name) is not an object schema") }
            schemas[name] = .object(properties + [property("storeProblem", string, required: false)])
        }
        schemas["AnyReply"] = .anyOf(["PlayReport", "PauseReport", "ResumeReport", "EditReport", "RoomsReport", "RoomChange",
                                      "GroupVolumeReport", "GroupsReport", "QueueReport", "StatusReport", "LibraryBrowseReport", "StoredPlaylistsReport", "PairingReport"].map { .reference($0) })
        return schemas
    }()
}
