import Hummingbird
import TuttiProtocol

/// One operation of the house's API: a method and a path, the `ControlCommand` it performs,
/// where that command's fields come from, and what it answers. `HouseAPIRoutes` registers the
/// routes from the list of them and `OpenAPIDocument` describes the same list, so the API
/// and `/openapi.json` cannot disagree.
struct APIOperation: Sendable {
    /// A field of the command, from the path or the body, with its JSON Schema.
    struct Field: Sendable {
        var name: String
        var schema: JSONSchema
        var required = true
        var summary: String
    }

    var method: HTTPRequest.Method
    /// The path, with `{name}` for a path field.
    var path: String
    /// The command performed; nil for `/api/control`, where the body names it.
    var command: String?
    var summary: String
    var pathFields: [Field] = []
    /// Fields of a GET, from the query string.
    var queryFields: [Field] = []
    var bodyFields: [Field] = []
    /// The schema of the reply (a name in `APISchemas.components`).
    var reply: String
    /// What it may be refused as, besides `invalid` (every operation may be).
    var refusals: [ControlRefusal.Kind] = []
    /// Whether this is the copy of an operation under `/api/groups/{group}`.
    var inGroup = false

    /// OpenAPI's unique name of the operation: the command's, and `-in-group` for the copy under
    /// `/api/groups/{group}`.
    var operationID: String { (command ?? "control") + (inGroup ? "-in-group" : "") }

    /// The group field of an operation under `/api/groups/{group}`.
    static let group = Field(name: "group", schema: .string(), summary: "The group's name or id.")

    /// The commands that act on one group: at their path they act on the default group, and
    /// under `/api/groups/{group}` on that group (`ControlCommand.actsOnAGroup`).
    static let groupCommands: Set<String> = ["status", "join", "leave", "group-volume", "play", "pause", "resume", "seek", "stop", "next", "previous",
                                             "queue", "queue-clear", "queue-add", "queue-move", "queue-play", "queue-remove", "queue-shuffle",
                                             "play-modes", "replay-gain", "crossfade", "playlist-save", "playlist-load"]

    /// The operations, in the order `/openapi.json` lists them: each that acts on a group at
    /// its path (the default group) and again under `/api/groups/{group}`.
    static let all: [APIOperation] = {
        var operations: [APIOperation] = []
        for operation in base {
            operations.append(operation)
            guard let command = operation.command, groupCommands.contains(command) else { continue }
            var scoped = operation
            scoped.path = operation.path == "/api/group/volume" ? "/api/groups/{group}/volume"
                : "/api/groups/{group}/" + operation.path.dropFirst("/api/".count)
            scoped.pathFields.insert(group, at: 0)
            scoped.inGroup = true
            scoped.summary = operation.summary.replacingOccurrences(of: "the default group", with: "the group") + " In this group."
            if !scoped.refusals.contains(.notFound) { scoped.refusals.append(.notFound) }
            operations.append(scoped)
        }
        return operations
    }()

    private static let base: [APIOperation] = {
        let room = Field(name: "room", schema: .string(), summary: "The room's name or id.")
        let index = Field(name: "index", schema: .integer(minimum: 0), summary: "A position in the queue, from 0.")
        let playlist = Field(name: "name", schema: .string(), summary: "The playlist's name: 1-255 bytes, no slash or line break.")
        let files = Field(name: "files", schema: .array(of: .string(), minItems: 1), summary: "Paths on the house's disk, or URLs.")
        let rooms = Field(name: "rooms", schema: .array(of: .string()), required: false,
                          summary: "Exactly the rooms to play in (they move into the group, its others leave it); the group's rooms if absent.")
        return [
            APIOperation(method: .get, path: "/api/status", command: "status", summary: "What the default group is doing: its state, the playhead, the item heard; and every room of the house.",
                         reply: "StatusReport"),
            APIOperation(method: .get, path: "/api/rooms", command: "rooms", summary: "Every connected room with its group, state, buffer, sync error and clock bound.",
                         reply: "RoomsReport"),
            APIOperation(method: .post, path: "/api/speakers/{speaker}/admit", command: "admit",
                         summary: "Let in a speaker waiting to be admitted (its name, or the code its log shows); from then on it is sent the stream, encrypted.",
                         pathFields: [Field(name: "speaker", schema: .string(), summary: "The waiting speaker's name or code.")],
                         bodyFields: [Field(name: "code", schema: .string(), required: false,
                                            summary: "Admit it only if it shows this code (the one its own log shows).")],
                         reply: "RoomsReport", refusals: [.notFound, .conflict]),
            APIOperation(method: .post, path: "/api/speakers/{speaker}/forget", command: "forget",
                         summary: "Revoke the admission of a room's speaker: its connection ends, and it waits to be admitted again if it returns.",
                         pathFields: [Field(name: "speaker", schema: .string(), summary: "The room's name or id.")],
                         reply: "RoomsReport", refusals: [.notFound]),
            APIOperation(method: .post, path: "/api/rooms/{room}/join", command: "join",
                         summary: "Move a room into the default group (out of the one it is in); it starts in sync with the group's rooms.",
                         pathFields: [room], reply: "RoomChange", refusals: [.notFound, .conflict]),
            APIOperation(method: .post, path: "/api/rooms/{room}/leave", command: "leave",
                         summary: "Take a room out of the default group into a group of its own, where it falls silent.",
                         pathFields: [room], reply: "RoomChange", refusals: [.notFound, .conflict]),
            APIOperation(method: .get, path: "/api/groups", command: "groups", summary: "The house's groups: each one's rooms and what it plays.",
                         reply: "GroupsReport"),
            APIOperation(method: .post, path: "/api/groups", command: "group-create", summary: "A new group, empty and silent.",
                         bodyFields: [Field(name: "name", schema: .string(), summary: "Its name, 1-64 bytes.")], reply: "GroupsReport", refusals: [.conflict]),
            APIOperation(method: .put, path: "/api/groups/{group}/name", command: "group-rename", summary: "Rename a group.",
                         pathFields: [group], bodyFields: [Field(name: "to", schema: .string(), summary: "The new name, 1-64 bytes.")],
                         reply: "GroupsReport", refusals: [.notFound, .conflict]),
            APIOperation(method: .delete, path: "/api/groups/{group}", command: "group-remove",
                         summary: "Remove a group: its rooms move to the default group, which cannot be removed.",
                         pathFields: [group], reply: "GroupsReport", refusals: [.notFound, .conflict]),
            APIOperation(method: .put, path: "/api/rooms/{room}/volume", command: "volume", summary: "Set a room's volume (60 dB across 0-100; 0 is silence).",
                         pathFields: [room], bodyFields: [Field(name: "percent", schema: .integer(minimum: 0, maximum: 100), summary: "The volume, 0-100.")],
                         reply: "RoomChange", refusals: [.notFound]),
            APIOperation(method: .put, path: "/api/rooms/{room}/latency", command: "room-latency",
                         summary: "Set the delay a room compensates after its DAC (an amplifier, a soundbar): it plays that much earlier. Replaces its speaker's --latency-ms.",
                         pathFields: [room], bodyFields: [Field(name: "milliseconds", schema: .number(minimum: 0, maximum: 2000), summary: "The latency, 0-2000 ms.")],
                         reply: "RoomChange", refusals: [.notFound]),
            APIOperation(method: .post, path: "/api/rooms/{room}/rename", command: "room-rename",
                         summary: "Give a room another name; its volume, group membership and latency go with it, and its speaker keeps it across restarts.",
                         pathFields: [room], bodyFields: [Field(name: "to", schema: .string(), summary: "The new name, 1-64 bytes.")],
                         reply: "RoomChange", refusals: [.notFound, .conflict]),
            APIOperation(method: .put, path: "/api/rooms/{room}/channel", command: "room-channel",
                         summary: "Choose which of the music's channels a room plays: stereo (both), left, right, or mono (their mean, at half of each).",
                         pathFields: [room], bodyFields: [Field(name: "channel", schema: .string(oneOf: ChannelMode.allCases.map(\.rawValue)),
                                                                summary: "stereo, left, right or mono.")],
                         reply: "RoomChange", refusals: [.notFound, .conflict]),
            APIOperation(method: .post, path: "/api/pairs", command: "pair",
                         summary: "Bind two rooms as one stereo pair: left plays the left channel, right the right. The pair is one room from then on (one volume, latency and group).",
                         bodyFields: [Field(name: "left", schema: .string(), summary: "The room that plays the left channel (name or id)."),
                                      Field(name: "right", schema: .string(), summary: "The room that plays the right channel (name or id)."),
                                      Field(name: "name", schema: .string(), summary: "The pair's name, 1-64 bytes.")],
                         reply: "RoomChange", refusals: [.notFound, .conflict]),
            APIOperation(method: .delete, path: "/api/pairs/{room}", command: "unpair",
                         summary: "Unbind a stereo pair: its halves are two rooms again, each playing stereo.",
                         pathFields: [room], reply: "RoomsReport", refusals: [.notFound, .conflict]),
            APIOperation(method: .put, path: "/api/group/volume", command: "group-volume",
                         summary: "Set the group's volume: the mean of its rooms', each scaled in proportion so they keep their balance.",
                         bodyFields: [Field(name: "percent", schema: .integer(minimum: 0, maximum: 100), summary: "The group's volume, 0-100.")],
                         reply: "GroupVolumeReport", refusals: [.conflict]),
            APIOperation(method: .post, path: "/api/transport/play", command: "play",
                         summary: "Replace the queue and play it; answers once the rooms are ready (or the wait for them ended).",
                         bodyFields: [files, rooms], reply: "PlayReport", refusals: [.notFound, .conflict, .unplayable, .forbidden]),
            APIOperation(method: .post, path: "/api/transport/pause", command: "pause", summary: "Pause every room on the same sample.",
                         reply: "PauseReport", refusals: [.conflict]),
            APIOperation(method: .post, path: "/api/transport/resume", command: "resume", summary: "Resume every room on the same sample.",
                         reply: "ResumeReport", refusals: [.conflict]),
            APIOperation(method: .post, path: "/api/transport/seek", command: "seek", summary: "Jump within the item heard now.",
                         bodyFields: [Field(name: "seconds", schema: .number(minimum: 0, maximum: ControlCommand.maximumSeekSeconds), summary: "Seconds into the item.")],
                         reply: "EditReport", refusals: [.conflict, .unplayable]),
            APIOperation(method: .post, path: "/api/transport/stop", command: "stop", summary: "Stop playing, keeping the queue; every room stops on the same sample.",
                         reply: "EditReport"),
            APIOperation(method: .post, path: "/api/transport/next", command: "next", summary: "Skip to the next item.",
                         reply: "EditReport", refusals: [.conflict, .unplayable]),
            APIOperation(method: .post, path: "/api/transport/previous", command: "previous",
                         summary: "Back to the start of the item heard, or, within its first 3 seconds, to the item before.",
                         reply: "EditReport", refusals: [.conflict, .unplayable]),
            APIOperation(method: .get, path: "/api/queue", command: "queue", summary: "The queue, with the item heard now.", reply: "QueueReport"),
            APIOperation(method: .delete, path: "/api/queue", command: "queue-clear", summary: "Empty the queue; every room stops on the same sample.",
                         reply: "EditReport"),
            APIOperation(method: .post, path: "/api/queue", command: "queue-add", summary: "Insert an item; while playing, cut in seamlessly where it changes what is heard.",
                         bodyFields: [Field(name: "file", schema: .string(), summary: "A path on the house's disk, or a URL."),
                                      Field(name: "at", schema: .integer(minimum: 0), required: false, summary: "The position to insert at; the end if absent.")],
                         reply: "EditReport", refusals: [.conflict, .unplayable, .forbidden]),
            APIOperation(method: .post, path: "/api/queue/move", command: "queue-move", summary: "Move an item to another position.",
                         bodyFields: [Field(name: "from", schema: .integer(minimum: 0), summary: "The item's position."),
                                      Field(name: "to", schema: .integer(minimum: 0), summary: "Its new position.")],
                         reply: "EditReport", refusals: [.notFound, .conflict, .unplayable]),
            APIOperation(method: .post, path: "/api/queue/{index}/play", command: "queue-play", summary: "Play the queue from this item.",
                         pathFields: [index], reply: "EditReport", refusals: [.notFound, .unplayable]),
            APIOperation(method: .delete, path: "/api/queue/{index}", command: "queue-remove", summary: "Remove an item.",
                         pathFields: [index], reply: "EditReport", refusals: [.notFound, .conflict, .unplayable]),
            APIOperation(method: .post, path: "/api/queue/shuffle", command: "queue-shuffle", summary: "Shuffle the queue; the item heard goes first and plays on.",
                         reply: "EditReport", refusals: [.conflict, .unplayable]),
            APIOperation(method: .post, path: "/api/play-modes", command: "play-modes",
                         summary: "Change how the queue plays on (MPD's options); the modes not given stay. Answers with the status.",
                         bodyFields: [Field(name: "repeat", schema: .boolean, required: false, summary: "The queue (with single, the item) starts again at its end."),
                                      Field(name: "random", schema: .boolean, required: false, summary: "Items play in a shuffled order."),
                                      Field(name: "single", schema: .boolean, required: false, summary: "Playing stops after the item heard."),
                                      Field(name: "consume", schema: .boolean, required: false, summary: "An item leaves the queue once heard.")],
                         reply: "StatusReport"),
            APIOperation(method: .post, path: "/api/replay-gain", command: "replay-gain",
                         summary: "Change how the group evens out its items' loudness (MPD's replay_gain_mode); what is not given stays. Answers with the status.",
                         bodyFields: [Field(name: "mode", schema: .string(oneOf: ReplayGainSettings.Mode.allCases.map(\.rawValue)), required: false,
                                            summary: "off, track (each item to -18 LUFS), album (its album to -18 LUFS) or auto (album unless random)."),
                                      Field(name: "preamp", schema: .number(minimum: -15, maximum: 15), required: false, summary: "dB added to a known loudness's gain."),
                                      Field(name: "missingPreamp", schema: .number(minimum: -15, maximum: 15), required: false,
                                            summary: "dB for an item whose loudness is not known."),
                                      Field(name: "limit", schema: .boolean, required: false, summary: "No gain lifts an item's peak over full scale."),
                                      Field(name: "measureAsPlayed", schema: .boolean, required: false,
                                            summary: "A file outside the library, or a URL of one, is measured the first time it plays through; its gain applies from its next play.")],
                         reply: "StatusReport", refusals: [.conflict]),
            APIOperation(method: .post, path: "/api/crossfade", command: "crossfade",
                         summary: "Set how long consecutive items crossfade (MPD's crossfade); 0 joins them gapless, and an album's next track always is. Answers with the status.",
                         bodyFields: [Field(name: "seconds", schema: .number(minimum: 0, maximum: ControlCommand.maximumCrossfadeSeconds), summary: "The overlap, equal power.")],
                         reply: "StatusReport"),
            APIOperation(method: .get, path: "/api/playlists", command: "playlists", summary: "The stored playlists, by name.", reply: "StoredPlaylistsReport"),
            APIOperation(method: .post, path: "/api/playlists", command: "playlist-save", summary: "Store the queue as a playlist, replacing one of that name.",
                         bodyFields: [playlist], reply: "StoredPlaylistsReport"),
            APIOperation(method: .post, path: "/api/playlists/{name}/load", command: "playlist-load", summary: "Add a stored playlist to the end of the queue.",
                         pathFields: [playlist], reply: "EditReport", refusals: [.notFound, .conflict, .unplayable]),
            APIOperation(method: .post, path: "/api/playlists/{name}/add", command: "playlist-add",
                         summary: "Append files to a stored playlist, made if there is none.",
                         pathFields: [playlist], bodyFields: [files], reply: "StoredPlaylistsReport", refusals: [.unplayable, .forbidden]),
            APIOperation(method: .delete, path: "/api/playlists/{name}", command: "playlist-remove", summary: "Delete a stored playlist.",
                         pathFields: [playlist], reply: "StoredPlaylistsReport", refusals: [.notFound]),
            APIOperation(method: .get, path: "/api/library/search", command: "library-search",
                         summary: "Tracks of the library matching every word (each as a prefix) in title, artist, album or path, best first.",
                         queryFields: [Field(name: "query", schema: .string(), summary: "The words."),
                                       Field(name: "limit", schema: .integer(minimum: 1, maximum: 1000), required: false, summary: "At most this many (100).")],
                         reply: "LibraryBrowseReport", refusals: [.conflict]),
            APIOperation(method: .get, path: "/api/library/browse", command: "library-browse",
                         summary: "The library's artists; with an artist, its albums; with an album too, its tracks.",
                         queryFields: [Field(name: "artist", schema: .string(), required: false, summary: "An artist (\"\" for tracks without one)."),
                                       Field(name: "album", schema: .string(), required: false, summary: "One of its albums.")],
                         reply: "LibraryBrowseReport", refusals: [.conflict]),
            APIOperation(method: .get, path: "/api/library/problems", command: "library-problems",
                         summary: "The files the library could not read, with their reasons.", reply: "LibraryBrowseReport", refusals: [.conflict]),
            APIOperation(method: .post, path: "/api/pair-controller", command: "pair-controller",
                         summary: "A single-use 6-digit code that signs a browser or phone in at the login page (POST /api/login), valid for 5 minutes.",
                         reply: "PairingReport"),
            APIOperation(method: .post, path: "/api/control", command: nil,
                         summary: "Any command as `tutti ctl` sends it: {\"command\": \"seek\", \"seconds\": 30}.",
                         bodyFields: [Field(name: "command", schema: .string(oneOf: ControlCommand.names), summary: "The command's name.")],
                         reply: "AnyReply", refusals: [.notFound, .conflict, .unplayable, .forbidden]),
        ]
    }()
}
