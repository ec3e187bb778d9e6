import FoundationEssentials

/// What a controller asks the house to do: the one definition of every control request, used
/// by the house, `tutti ctl`, the tests and the benchmarks.
///
/// On the wire a command is a JSON object named by its `command` key
/// (`{"command":"queue-add","file":"/music/a.flac","at":1}`), carried in a
/// `WireMessage.ControlRequest`; `ControlJSON` is the only code that reads or writes it. A
/// command that acts on a group acts on the one its request names (`ControlRequest.group`), or
/// on the default group.
public enum ControlCommand: Sendable, Equatable {
    /// Replace the group's queue with `files` and play them; with `rooms`, in exactly those
    /// rooms (they move into the group, and its others leave it).
    case play(files: [String], rooms: [String]? = nil)
    /// Pause every room on the same sample.
    case pause
    /// Resume every room on the same sample.
    case resume
    /// Jump to `seconds` into the current item.
    case seek(seconds: Double)
    /// Skip to the next item.
    case next
    /// Back to the start of the item heard, or, within its first seconds, to the item before
    /// (`House.previousItemSeconds`), as CD players and MPD clients do.
    case previous
    /// Every connected room with its state, buffer and sync.
    case rooms
    /// Move a room into the group (out of the one it was in), in sync with the group's others.
    case join(room: String)
    /// Take a room out of the group into a group of its own (named after it), where it falls
    /// silent.
    case leave(room: String)
    /// The house's groups.
    case groups
    /// A new group, empty and silent, named `name`.
    case groupCreate(name: String)
    /// Rename the group.
    case groupRename(to: String)
    /// Remove the group; its rooms move to the default group, which cannot be removed.
    case groupRemove
    /// Set a room's volume, 0–100.
    case volume(room: String, percent: Int)
    /// Set the latency a room compensates (an amplifier's or a soundbar's delay after the DAC),
    /// 0–2000 ms, replacing its speaker's `--latency-ms`; the room plays that much earlier.
    case roomLatency(room: String, milliseconds: Double)
    /// Give a room another name; its volume, group membership and latency go with it, and its
    /// speaker keeps it across restarts.
    case roomRename(room: String, to: String)
    /// Which of the stream's channels a room plays: stereo (both, the default), left, right, or
    /// mono (their mean).
    case roomChannel(room: String, channel: ChannelMode)
    /// Bind two rooms as one stereo pair named `name`: `left` plays the left channel, `right`
    /// the right; to every controller the pair is one room (one volume, latency and group).
    case pair(left: String, right: String, name: String)
    /// Unbind a stereo pair: its halves are two rooms again, each in stereo.
    case unpair(room: String)
    /// Set the group's volume, 0–100: the mean of its rooms' volumes, each scaled in proportion
    /// (as Sonos does), so the rooms keep their balance.
    case groupVolume(percent: Int)
    /// The queue, with the item heard now.
    case queue
    /// Insert `file` at position `at` (nil: at the end).
    case queueAdd(file: String, at: Int? = nil)
    /// Remove the item at `index`.
    case queueRemove(index: Int)
    /// Move the item at `from` to position `to`.
    case queueMove(from: Int, to: Int)
    /// Empty the queue; every room stops on the same sample.
    case queueClear
    /// Stop playing, keeping the queue; every room stops on the same sample.
    case stop
    /// Play the queue from item `index` (MPD's `play POS`): a new stream from that item's start.
    case queuePlay(index: Int)
    /// Shuffle the queue's order; the item heard goes first and plays on.
    case queueShuffle
    /// Change the play modes given (`PlayModes`); the others stay.
    case playModes(repeat: Bool? = nil, random: Bool? = nil, single: Bool? = nil, consume: Bool? = nil)
    /// Change how the group evens out its items' loudness (`ReplayGainSettings`); what is not
    /// given stays. MPD's `replay_gain_mode`.
    case replayGain(mode: ReplayGainSettings.Mode? = nil, preampDB: Double? = nil, missingPreampDB: Double? = nil, limit: Bool? = nil,
                    measureAsPlayed: Bool? = nil)
    /// Set how long consecutive items crossfade, in seconds (0: gapless); an album's next track
    /// stays gapless. MPD's `crossfade`.
    case crossfade(seconds: Double)
    /// The stored playlists.
    case playlists
    /// Store the queue as the playlist `name`, replacing one of that name.
    case playlistSave(name: String)
    /// Add the stored playlist `name` to the end of the queue.
    case playlistLoad(name: String)
    /// Delete the stored playlist `name`.
    case playlistRemove(name: String)
    /// Append `files` to the stored playlist `name`, made if there is none (MPD's
    /// `playlistadd`, `findaddpl` and `searchaddpl`).
    case playlistAdd(name: String, files: [String])
    /// What the house is doing.
    case status
    /// Tracks of the library matching every word of `query` (as prefixes), best first.
    case librarySearch(query: String, limit: Int? = nil)
    /// The library's artists (no `artist`), an artist's albums, or an album's tracks.
    case libraryBrowse(artist: String? = nil, album: String? = nil)
    /// The files the library could not read, with their reasons.
    case libraryProblems
    /// A single-use 6-digit code that signs a browser or phone in at the web UI's login page,
    /// valid for 5 minutes (`tutti ctl pair-controller`, the web UI's "Pair a phone").
    case pairController
    /// Let in the speaker waiting under `speaker` (its name, or the code it shows), and keep
    /// its key: from then on it is sent the stream (`tutti ctl admit`, the web UI's Admit).
    /// With `code`, only if it shows that code: the one its own log shows, which tells it from a
    /// stranger's speaker of the same name.
    case admit(speaker: String, code: String? = nil)
    /// The speaker of room `speaker` is no longer admitted: its connection ends, and it waits
    /// again if it comes back (`tutti ctl forget`).
    case forget(speaker: String)

    /// The command's name on the wire and in `tutti ctl`.
    public var name: String {
        switch self {
        case .play: "play"
        case .pause: "pause"
        case .resume: "resume"
        case .seek: "seek"
        case .next: "next"
        case .previous: "previous"
        case .rooms: "rooms"
        case .join: "join"
        case .leave: "leave"
        case .groups: "groups"
        case .groupCreate: "group-create"
        case .groupRename: "group-rename"
        case .groupRemove: "group-remove"
        case .volume: "volume"
        case .groupVolume: "group-volume"
        case .roomLatency: "room-latency"
        case .roomRename: "room-rename"
        case .roomChannel: "room-channel"
        case .pair: "pair"
        case .unpair: "unpair"
        case .queue: "queue"
        case .queueAdd: "queue-add"
        case .queueRemove: "queue-remove"
        case .queueMove: "queue-move"
        case .queueClear: "queue-clear"
        case .queuePlay: "queue-play"
        case .queueShuffle: "queue-shuffle"
        case .playModes: "play-modes"
        case .replayGain: "replay-gain"
        case .crossfade: "crossfade"
        case .playlists: "playlists"
        case .playlistSave: "playlist-save"
        case .playlistLoad: "playlist-load"
        case .playlistRemove: "playlist-remove"
        case .playlistAdd: "playlist-add"
        case .stop: "stop"
        case .status: "status"
        case .librarySearch: "library-search"
        case .libraryBrowse: "library-browse"
        case .libraryProblems: "library-problems"
        case .pairController: "pair-controller"
        case .admit: "admit"
        case .forget: "forget"
        }
    }

    /// Whether the command only reads (`status`, `rooms`, `queue`): it changes nothing anyone
    /// sees, so it is no reason to tell observers (whose own reads would otherwise wake them
    /// again, without end).
    public var onlyReads: Bool {
        switch self {
        case .status, .rooms, .queue, .librarySearch, .libraryBrowse, .libraryProblems, .playlists, .groups, .pairController: true
        default: false
        }
    }

    /// Every command name, for error messages.
    public static let names = ["play", "pause", "resume", "seek", "next", "previous", "rooms", "join", "leave", "groups", "group-create",
                               "group-rename", "group-remove", "volume", "group-volume",
                               "room-latency", "room-rename", "room-channel", "pair", "unpair", "queue", "queue-add", "queue-remove", "queue-move", "queue-clear", "queue-play", "queue-shuffle", "stop", "status",
                               "library-search", "library-browse", "library-problems", "play-modes", "replay-gain", "crossfade", "playlists", "playlist-save",
                               "playlist-load", "playlist-remove", "playlist-add", "pair-controller", "admit", "forget"]

    /// The longest crossfade (Music Assistant's longest is 10 s; longer overlaps hold much
    /// audio for no listener's benefit).
    public static let maximumCrossfadeSeconds = 30.0

    /// Far beyond any item (31 years), and far within what the timeline's frame arithmetic holds.
    public static let maximumSeekSeconds = 1e9

    /// Why the command's own values make no sense, whatever the house's state; nil when they do.
    public var problem: String? {
        switch self {
        case .play(let files, _) where files.isEmpty:
            "play needs at least one file"
        case .seek(let seconds) where !(seconds >= 0 && seconds <= Self.maximumSeekSeconds):
            "seek needs a number of seconds from 0 to \(Int(Self.maximumSeekSeconds))"
        case .volume(_, let percent) where !(0...100).contains(percent):
            "volume needs a percentage from 0 to 100"
        case .groupVolume(let percent) where !(0...100).contains(percent):
            "group-volume needs a percentage from 0 to 100"
        case .roomLatency(_, let milliseconds) where !(milliseconds >= 0 && milliseconds <= 2000):
            "room-latency needs milliseconds from 0 to 2000"
        case .admit(let speaker, _) where speaker.allSatisfy(\.isWhitespace) || speaker.utf8.count > 64:
            "admit needs a speaker's name or code"
        case .forget(let speaker) where speaker.allSatisfy(\.isWhitespace) || speaker.utf8.count > 64:
            "forget needs a room's name"
        case .roomRename(_, let name) where name.allSatisfy(\.isWhitespace) || name.utf8.count > 64:
            "room-rename needs a new name of 1 to 64 bytes"
        case .roomRename(_, let name) where name.filter({ !$0.isWhitespace }).allSatisfy(\.isNumber):
            "room-rename: a name of digits alone would read as a room's id: \(name)"
        case .pair(_, _, let name) where name.allSatisfy(\.isWhitespace) || name.utf8.count > 64 || name.contains("\n") || name.contains("\r"):
            "pair needs a name of 1 to 64 bytes on one line for the pair"
        case .pair(_, _, let name) where name.filter({ !$0.isWhitespace }).allSatisfy(\.isNumber):
            "pair: a name of digits alone would read as a room's id: \(name)"
        case .groupCreate(let name), .groupRename(let name):
            Self.groupNameProblem(name).map { "\(self.name): \($0)" }
        case .librarySearch(_, let limit?) where !(1...1000).contains(limit):
            "library-search needs a limit from 1 to 1000"
        case .libraryBrowse(nil, .some):
            "library-browse needs an artist to list an album"
        case .queuePlay(let index) where index < 0:
            "queue position \(index) is negative"
        case .queueAdd(_, let at?) where at < 0:
            "queue position \(at) is negative"
        case .playModes(nil, nil, nil, nil):
            "play-modes needs at least one of repeat, random, single and consume"
        case .replayGain(nil, nil, nil, nil, nil):
            "replay-gain needs at least one of mode, preamp, missingPreamp, limit and measureAsPlayed"
        case .replayGain(_, let preamp, let missing, _, _)
            where [preamp, missing].contains(where: { $0.map { !ReplayGainSettings.preampRange.contains($0) } ?? false }):
            "replay-gain needs preamps from \(Int(ReplayGainSettings.preampRange.lowerBound)) to \(Int(ReplayGainSettings.preampRange.upperBound)) dB"
        case .crossfade(let seconds) where !(seconds >= 0 && seconds <= Self.maximumCrossfadeSeconds):
            "crossfade needs seconds from 0 to \(Int(Self.maximumCrossfadeSeconds))"
        case .playlistSave(let name), .playlistLoad(let name), .playlistRemove(let name):
            Self.playlistNameProblem(name).map { "\(self.name): \($0)" }
        case .playlistAdd(let name, let files):
            Self.playlistNameProblem(name).map { "playlist-add: \($0)" } ?? (files.isEmpty ? "playlist-add needs at least one file" : nil)
        default:
            nil
        }
    }

    /// Why `name` cannot name a group (1 to 64 bytes, not only spaces, no line break), or nil.
    public static func groupNameProblem(_ name: String) -> String? {
        if name.allSatisfy(\.isWhitespace) || name.utf8.count > 64 { return "a group name needs 1 to 64 bytes, not only spaces" }
        if name.contains("\n") || name.contains("\r") { return "a group name cannot contain a line break: \(name.debugDescription)" }
        if name.filter({ !$0.isWhitespace }).allSatisfy(\.isNumber) { return "a name of digits alone would read as a group's id: \(name)" }
        return nil
    }

    /// Whether the command acts on one group (the request's, or the default group): the
    /// others do not notice it.
    public var actsOnAGroup: Bool {
        switch self {
        case .rooms, .groups, .groupCreate, .volume, .roomLatency, .roomRename, .roomChannel, .pair, .unpair, .playlists, .playlistRemove, .playlistAdd,
             .librarySearch, .libraryBrowse, .libraryProblems, .pairController, .admit, .forget:
            false
        default:
            true
        }
    }

    /// Why `name` cannot name a stored playlist (MPD's rule: no slash, no newline), or nil.
    public static func playlistNameProblem(_ name: String) -> String? {
        if name.isEmpty || name.utf8.count > 255 { return "a playlist name needs 1 to 255 bytes" }
        if name.contains("/") || name.contains("\n") || name.contains("\r") { return "a playlist name cannot contain a slash or a line break: \(name.debugDescription)" }
        return nil
    }
}

extension ControlCommand: Codable {
    private enum Key: String, CodingKey {
        case command, speaker, code, files, rooms, seconds, room, percent, file, at, index, from, to, query, limit, artist, album, milliseconds, name, `repeat`, random, single, consume
        case channel, left, right, mode, preamp, missingPreamp, measureAsPlayed
    }

    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: Key.self)
        let name = try c.decode(String.self, forKey: .command)
        switch name {
        case "play": self = .play(files: try c.decode([String].self, forKey: .files), rooms: try c.decodeIfPresent([String].self, forKey: .rooms))
        case "pause": self = .pause
        case "resume": self = .resume
        case "seek": self = .seek(seconds: try c.decode(Double.self, forKey: .seconds))
        case "next": self = .next
        case "previous": self = .previous
        case "rooms": self = .rooms
        case "join": self = .join(room: try c.decode(String.self, forKey: .room))
        case "leave": self = .leave(room: try c.decode(String.self, forKey: .room))
        case "groups": self = .groups
        case "group-create": self = .groupCreate(name: try c.decode(String.self, forKey: .name))
        case "group-rename": self = .groupRename(to: try c.decode(String.self, forKey: .to))
        case "group-remove": self = .groupRemove
        case "volume": self = .volume(room: try c.decode(String.self, forKey: .room), percent: try c.decode(Int.self, forKey: .percent))
        case "group-volume": self = .groupVolume(percent: try c.decode(Int.self, forKey: .percent))
        case "room-latency": self = .roomLatency(room: try c.decode(String.self, forKey: .room), milliseconds: try c.decode(Double.self, forKey: .milliseconds))
        case "room-rename": self = .roomRename(room: try c.decode(String.self, forKey: .room), to: try c.decode(String.self, forKey: .to))
        case "room-channel": self = .roomChannel(room: try c.decode(String.self, forKey: .room), channel: try c.decode(ChannelMode.self, forKey: .channel))
        case "pair": self = .pair(left: try c.decode(String.self, forKey: .left), right: try c.decode(String.self, forKey: .right),
                                  name: try c.decode(String.self, forKey: .name))
        case "unpair": self = .unpair(room: try c.decode(String.self, forKey: .room))
        case "queue": self = .queue
        case "queue-add": self = .queueAdd(file: try c.decode(String.self, forKey: .file), at: try c.decodeIfPresent(Int.self, forKey: .at))
        case "queue-remove": self = .queueRemove(index: try c.decode(Int.self, forKey: .index))
        case "queue-move": self = .queueMove(from: try c.decode(Int.self, forKey: .from), to: try c.decode(Int.self, forKey: .to))
        case "queue-clear": self = .queueClear
        case "stop": self = .stop
        case "queue-play": self = .queuePlay(index: try c.decode(Int.self, forKey: .index))
        case "queue-shuffle": self = .queueShuffle
        case "replay-gain": self = .replayGain(mode: try c.decodeIfPresent(ReplayGainSettings.Mode.self, forKey: .mode),
                                               preampDB: try c.decodeIfPresent(Double.self, forKey: .preamp),
                                               missingPreampDB: try c.decodeIfPresent(Double.self, forKey: .missingPreamp),
                                               limit: try c.decodeIfPresent(Bool.self, forKey: .limit),
                                               measureAsPlayed: try c.decodeIfPresent(Bool.self, forKey: .measureAsPlayed))
        case "crossfade": self = .crossfade(seconds: try c.decode(Double.self, forKey: .seconds))
        case "play-modes": self = .playModes(repeat: try c.decodeIfPresent(Bool.self, forKey: .repeat), random: try c.decodeIfPresent(Bool.self, forKey: .random),
                                             single: try c.decodeIfPresent(Bool.self, forKey: .single), consume: try c.decodeIfPresent(Bool.self, forKey: .consume))
        case "playlists": self = .playlists
        case "playlist-save": self = .playlistSave(name: try c.decode(String.self, forKey: .name))
        case "playlist-load": self = .playlistLoad(name: try c.decode(String.self, forKey: .name))
        case "playlist-remove": self = .playlistRemove(name: try c.decode(String.self, forKey: .name))
        case "playlist-add": self = .playlistAdd(name: try c.decode(String.self, forKey: .name), files: try c.decode([String].self, forKey: .files))
        case "status": self = .status
        case "library-search": self = .librarySearch(query: try c.decode(String.self, forKey: .query), limit: try c.decodeIfPresent(Int.self, forKey: .limit))
        case "library-browse": self = .libraryBrowse(artist: try c.decodeIfPresent(String.self, forKey: .artist),
                                                      album: try c.decodeIfPresent(String.self, forKey: .album))
        case "library-problems": self = .libraryProblems
        case "pair-controller": self = .pairController
        case "admit": self = .admit(speaker: try c.decode(String.self, forKey: .speaker), code: try c.decodeIfPresent(String.self, forKey: .code))
        case "forget": self = .forget(speaker: try c.decode(String.self, forKey: .speaker))
        default:
            throw DecodingError.dataCorruptedError(forKey: .command, in: c,
                                                   debugDescription: "unknown command \(Self.quotedOnOneLine(String(name.prefix(64)))) (known: \(Self.names.joined(separator: ", ")))")
        }
    }

    /// `text` quoted for a one-line refusal: quotes, backslashes, control characters and line
    /// breaks escaped (`String(reflecting:)` leaves U+0085, NEL, as it is, and a name with one
    /// made a refusal of two lines: found by fuzz-httpbody).
    static func quotedOnOneLine(_ text: String) -> String {
        var out = "\""
        for scalar in text.unicodeScalars {
            switch scalar {
            case "\"": out += "\\\""
            case "\\": out += "\\\\"
            default:
                let category = scalar.properties.generalCategory
                if category == .control || category == .lineSeparator || category == .paragraphSeparator {
                    out += "\\u{" + String(scalar.value, radix: 16) + "}"
                } else {
                    out.unicodeScalars.append(scalar)
                }
            }
        }
        return out + "\""
    }

    public func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: Key.self)
        try c.encode(name, forKey: .command)
        switch self {
        case .play(let files, let rooms):
            try c.encode(files, forKey: .files)
            try c.encodeIfPresent(rooms, forKey: .rooms)
        case .seek(let seconds), .crossfade(let seconds):
            try c.encode(seconds, forKey: .seconds)
        case .join(let room), .leave(let room):
            try c.encode(room, forKey: .room)
        case .volume(let room, let percent):
            try c.encode(room, forKey: .room)
            try c.encode(percent, forKey: .percent)
        case .groupVolume(let percent):
            try c.encode(percent, forKey: .percent)
        case .roomLatency(let room, let milliseconds):
            try c.encode(room, forKey: .room)
            try c.encode(milliseconds, forKey: .milliseconds)
        case .roomRename(let room, let name):
            try c.encode(room, forKey: .room)
            try c.encode(name, forKey: .to)
        case .roomChannel(let room, let channel):
            try c.encode(room, forKey: .room)
            try c.encode(channel, forKey: .channel)
        case .pair(let left, let right, let name):
            try c.encode(left, forKey: .left)
            try c.encode(right, forKey: .right)
            try c.encode(name, forKey: .name)
        case .unpair(let room):
            try c.encode(room, forKey: .room)
        case .queueAdd(let file, let at):
            try c.encode(file, forKey: .file)
            try c.encodeIfPresent(at, forKey: .at)
        case .queueRemove(let index), .queuePlay(let index):
            try c.encode(index, forKey: .index)
        case .queueMove(let from, let to):
            try c.encode(from, forKey: .from)
            try c.encode(to, forKey: .to)
        case .librarySearch(let query, let limit):
            try c.encode(query, forKey: .query)
            try c.encodeIfPresent(limit, forKey: .limit)
        case .libraryBrowse(let artist, let album):
            try c.encodeIfPresent(artist, forKey: .artist)
            try c.encodeIfPresent(album, forKey: .album)
        case .replayGain(let mode, let preamp, let missing, let limit, let measureAsPlayed):
            try c.encodeIfPresent(mode, forKey: .mode)
            try c.encodeIfPresent(preamp, forKey: .preamp)
            try c.encodeIfPresent(missing, forKey: .missingPreamp)
            try c.encodeIfPresent(limit, forKey: .limit)
            try c.encodeIfPresent(measureAsPlayed, forKey: .measureAsPlayed)
        case .playModes(let `repeat`, let random, let single, let consume):
            try c.encodeIfPresent(`repeat`, forKey: .repeat)
            try c.encodeIfPresent(random, forKey: .random)
            try c.encodeIfPresent(single, forKey: .single)
            try c.encodeIfPresent(consume, forKey: .consume)
        case .playlistSave(let name), .playlistLoad(let name), .playlistRemove(let name), .groupCreate(let name):
            try c.encode(name, forKey: .name)
        case .groupRename(let name):
            try c.encode(name, forKey: .to)
        case .playlistAdd(let name, let files):
            try c.encode(name, forKey: .name)
            try c.encode(files, forKey: .files)
        case .admit(let speaker, let code):
            try c.encode(speaker, forKey: .speaker)
            try c.encodeIfPresent(code, forKey: .code)
        case .forget(let speaker):
            try c.encode(speaker, forKey: .speaker)
        case .pause, .resume, .next, .previous, .rooms, .queue, .queueClear, .queueShuffle, .stop, .status, .libraryProblems, .playlists,
             .groups, .groupRemove, .pairController:
            break
        }
    }
}
