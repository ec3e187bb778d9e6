/// The house's answer to a `ControlCommand`: one case per kind of command, each with a typed
/// report. On the wire a reply is the report's JSON object alone; which case it is follows from
/// the command it answers (`ControlJSON.decodeReply(_:to:)`). A refusal is a `ControlRefusal`.
public enum ControlReply: Sendable, Equatable {
    /// `play`: the new queue is starting.
    case started(PlayReport)
    /// `pause`.
    case paused(PauseReport)
    /// `resume`.
    case resumed(ResumeReport)
    /// `seek`, `next`, `previous`, `queue-add`, `queue-remove`, `queue-move`, `queue-clear`: what
    /// the edit did to the stream.
    case edited(EditReport)
    /// `rooms`.
    case rooms(RoomsReport)
    /// `join`, `leave`, `volume`: the room as it is now.
    case room(RoomChange)
    /// `group-volume`: the group's volume and its rooms'.
    case group(GroupVolumeReport)
    /// `groups`, `group-create`, `group-rename`, `group-remove`: the groups as they are now.
    case groups(GroupsReport)
    /// `queue`.
    case queue(QueueReport)
    /// `status`.
    case status(StatusReport)
    /// `library-search`, `library-browse`, `library-problems`.
    case library(LibraryBrowseReport)
    /// `playlists`, `playlist-save`, `playlist-remove`.
    case playlists(StoredPlaylistsReport)
    /// `pair-controller`.
    case pairing(PairingReport)

    /// The report, for encoding.
    var report: any Codable & Sendable {
        switch self {
        case .started(let r): r
        case .paused(let r): r
        case .resumed(let r): r
        case .edited(let r): r
        case .rooms(let r): r
        case .room(let r): r
        case .group(let r): r
        case .groups(let r): r
        case .queue(let r): r
        case .status(let r): r
        case .library(let r): r
        case .playlists(let r): r
        case .pairing(let r): r
        }
    }

    // Accessors for callers that know which command they sent.
    public var started: PlayReport? { if case .started(let r) = self { r } else { nil } }
    public var paused: PauseReport? { if case .paused(let r) = self { r } else { nil } }
    public var resumed: ResumeReport? { if case .resumed(let r) = self { r } else { nil } }
    public var edited: EditReport? { if case .edited(let r) = self { r } else { nil } }
    public var rooms: RoomsReport? { if case .rooms(let r) = self { r } else { nil } }
    public var room: RoomChange? { if case .room(let r) = self { r } else { nil } }
    public var group: GroupVolumeReport? { if case .group(let r) = self { r } else { nil } }
    public var groups: GroupsReport? { if case .groups(let r) = self { r } else { nil } }
    public var queue: QueueReport? { if case .queue(let r) = self { r } else { nil } }
    public var status: StatusReport? { if case .status(let r) = self { r } else { nil } }
    public var library: LibraryBrowseReport? { if case .library(let r) = self { r } else { nil } }
    public var playlists: StoredPlaylistsReport? { if case .playlists(let r) = self { r } else { nil } }
    public var pairing: PairingReport? { if case .pairing(let r) = self { r } else { nil } }

    /// The report's `storeProblem`: a write of this command's that failed, or, for a status,
    /// the store's problem now.
    public var storeProblem: String? {
        get {
            switch self {
            case .started(let r): r.storeProblem
            case .paused(let r): r.storeProblem
            case .resumed(let r): r.storeProblem
            case .edited(let r): r.storeProblem
            case .rooms(let r): r.storeProblem
            case .room(let r): r.storeProblem
            case .group(let r): r.storeProblem
            case .groups(let r): r.storeProblem
            case .queue(let r): r.storeProblem
            case .status(let r): r.storeProblem
            case .library(let r): r.storeProblem
            case .playlists(let r): r.storeProblem
            case .pairing(let r): r.storeProblem
            }
        }
        set {
            switch self {
            case .started(var r): r.storeProblem = newValue; self = .started(r)
            case .paused(var r): r.storeProblem = newValue; self = .paused(r)
            case .resumed(var r): r.storeProblem = newValue; self = .resumed(r)
            case .edited(var r): r.storeProblem = newValue; self = .edited(r)
            case .rooms(var r): r.storeProblem = newValue; self = .rooms(r)
            case .room(var r): r.storeProblem = newValue; self = .room(r)
            case .group(var r): r.storeProblem = newValue; self = .group(r)
            case .groups(var r): r.storeProblem = newValue; self = .groups(r)
            case .queue(var r): r.storeProblem = newValue; self = .queue(r)
            case .status(var r): r.storeProblem = newValue; self = .status(r)
            case .library(var r): r.storeProblem = newValue; self = .library(r)
            case .playlists(var r): r.storeProblem = newValue; self = .playlists(r)
            case .pairing(var r): r.storeProblem = newValue; self = .pairing(r)
            }
        }
    }
}

/// `pair-controller`: a code the web UI's login page takes once, instead of the controller
/// token, until it expires.
public struct PairingReport: Codable, Sendable, Equatable {
    /// Set when a write to the house's store failed while this command was carried out: it
    /// took effect, but will not outlive a restart of the house (the status says so until the
    /// store takes writes again).
    public var storeProblem: String?
    /// Six digits.
    public var code: String
    /// How long it stays valid from now.
    public var validSeconds: Int
    public init(code: String, validSeconds: Int) {
        self.code = code
        self.validSeconds = validSeconds
    }
}

/// The house refused a command: one line saying why, and what kind of refusal it is
/// (`{"error": "…", "kind": "not-found"}` on the wire), so the HTTP API can answer with the
/// right status code.
public struct ControlRefusal: Error, Sendable, Equatable, CustomStringConvertible {
    public enum Kind: String, Codable, Sendable {
        /// The request itself is malformed or its values make no sense (HTTP 400).
        case invalid
        /// It names a room or a queue item that does not exist (HTTP 404).
        case notFound = "not-found"
        /// It does not fit what the house is doing now: nothing plays, or another command
        /// replaced the stream first (HTTP 409).
        case conflict
        /// It names media the house cannot play: a missing, unreadable or undecodable file
        /// (HTTP 422).
        case unplayable
        /// It names media the house will not play: a file outside the directories it plays
        /// from, or a URL of another scheme than http(s) (HTTP 403).
        case forbidden
        /// It came with no credential, or a wrong one: no controller token, session cookie or
        /// valid pairing code (HTTP 401).
        case unauthorized
    }

    public var error: String
    public var kind: Kind
    public init(_ error: String, kind: Kind = .invalid) {
        self.error = error
        self.kind = kind
    }
    public var description: String { error }
}

extension ControlRefusal: Codable {
    private enum Key: String, CodingKey { case error, kind }
    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: Key.self)
        error = try c.decode(String.self, forKey: .error)
        // A house before kinds sent none; an unknown kind is still a refusal.
        kind = (try? c.decodeIfPresent(Kind.self, forKey: .kind)) ?? .invalid
    }
    public func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: Key.self)
        try c.encode(error, forKey: .error)
        try c.encode(kind, forKey: .kind)
    }
}

public struct PlayReport: Codable, Sendable, Equatable {
    /// Set when a write to the house's store failed while this command was carried out: it
    /// took effect, but will not outlive a restart of the house (the status says so until the
    /// store takes writes again).
    public var storeProblem: String?
    /// Items in the new queue.
    public var items: Int
    /// The rooms that play it.
    public var rooms: [String]
    /// How long until the first sample is heard, from this reply.
    public var startsInMs: Int
    /// When the first sample is heard, on the house's clock (as `StatusReport.serverTimeNs`):
    /// exact, where `startsInMs` is rounded and counts from when the reply left.
    public var startsAtServerTimeNs: Int64?
    /// How long the house waited for the rooms to be ready before it anchored the start.
    public var waitedMs: Int?
    /// Rooms that were not ready when the wait ended, and why; they join in sync when they are.
    public var notReady: [UnreadyRoom]?
    /// How each room starts: in sync, or correcting its clock by slewing, or later (see
    /// `RoomStart`). Set when the house waited for its rooms.
    public var roomStarts: [RoomStart]?
    public init(items: Int, rooms: [String], startsInMs: Int) {
        self.items = items
        self.rooms = rooms
        self.startsInMs = startsInMs
    }
}

/// How one room takes a start, decided when the house anchors it.
///
/// A room whose clock bound is within the house's start target plays in sync from the first
/// sample. One whose bound is still over it (a young estimate on a jittery network) plays at
/// once and corrects as its estimate sharpens, by slewing at most
/// `PlayoutController.Configuration.maximumCorrection` (±500 ppm), never by a jump. One that
/// was not ready when the house's wait ended stays silent and joins in sync when it is.
public struct RoomStart: Codable, Sendable, Equatable {
    public enum Mode: String, Codable, Sendable, CaseIterable {
        case inSync = "in-sync"
        case slewing
        case later
    }
    public var room: String
    public var mode: Mode
    /// The room's clock error bound when the start was anchored, in µs; nil while it has none.
    public var clockBoundMicroseconds: Int?
    public init(room: String, mode: Mode, clockBoundMicroseconds: Int?) {
        self.room = room
        self.mode = mode
        self.clockBoundMicroseconds = clockBoundMicroseconds
    }
}

/// A room a start did not wait for any longer, and why it was not ready.
public struct UnreadyRoom: Codable, Sendable, Equatable {
    public var room: String
    /// A few words: "its clock is still settling", "it has sent no status yet"…
    public var reason: String
    public init(room: String, reason: String) {
        self.room = room
        self.reason = reason
    }
}

public struct PauseReport: Codable, Sendable, Equatable {
    /// Set when a write to the house's store failed while this command was carried out: it
    /// took effect, but will not outlive a restart of the house (the status says so until the
    /// store takes writes again).
    public var storeProblem: String?
    /// Timeline second every room stops at.
    public var pausedAtSeconds: Double
    public init(pausedAtSeconds: Double) { self.pausedAtSeconds = pausedAtSeconds }
}

public struct ResumeReport: Codable, Sendable, Equatable {
    /// Set when a write to the house's store failed while this command was carried out: it
    /// took effect, but will not outlive a restart of the house (the status says so until the
    /// store takes writes again).
    public var storeProblem: String?
    /// Timeline second every room resumes from.
    public var resumedAtSeconds: Double
    public var startsInMs: Int
    public init(resumedAtSeconds: Double, startsInMs: Int) {
        self.resumedAtSeconds = resumedAtSeconds
        self.startsInMs = startsInMs
    }
}

/// Where an edit cut the stream the rooms play: from a timeline second, some way ahead of the
/// playhead. Rooms drop what they hold from there and take the new audio.
public struct StreamCut: Codable, Sendable, Equatable {
    /// The first timeline second that changes.
    public var fromSeconds: Double
    /// How far ahead of the playhead that is.
    public var aheadSeconds: Double
    /// Whether it is beyond the flush margin, so every room surely switches on the same frame.
    public var seamless: Bool
    /// Why it may not be seamless.
    public var reason: String?
    public init(fromSeconds: Double, aheadSeconds: Double, seamless: Bool, reason: String? = nil) {
        self.fromSeconds = fromSeconds
        self.aheadSeconds = aheadSeconds
        self.seamless = seamless
        self.reason = reason
    }
}

public struct EditReport: Codable, Sendable, Equatable {
    /// Set when a write to the house's store failed while this command was carried out: it
    /// took effect, but will not outlive a restart of the house (the status says so until the
    /// store takes writes again).
    public var storeProblem: String?
    /// Where the stream was cut; nil when nothing already decoded changed.
    public var cut: StreamCut?
    /// The queue position heard after the edit (`seek`, `next`), if any.
    public var item: Int?
    /// Playback stopped (`next` past the last item).
    public var stopped: Bool
    /// Items in the queue after the edit.
    public var queueLength: Int
    public init(cut: StreamCut? = nil, item: Int? = nil, stopped: Bool = false, queueLength: Int) {
        self.cut = cut
        self.item = item
        self.stopped = stopped
        self.queueLength = queueLength
    }
}

/// One room as the house sees it, with what the room reports about itself.
public struct RoomReport: Codable, Sendable, Equatable {
    /// The room's identity: the same across renames, restarts and reconnections (MPD's output
    /// id, Snapcast's client id).
    public var id: UInt32
    public var name: String
    /// The name of the group it plays in.
    public var group: String
    public var volume: Int
    public var latencyMs: Double
    /// "connecting" until the room's first status, then the room's own state ("idle", "buffering", "playing").
    public var state: String
    /// Audio the room holds beyond what it plays now.
    public var bufferSeconds: Double?
    /// The room's estimate of how far its playback is from the timeline.
    public var syncErrorMicroseconds: Double?
    /// The uncertainty of its clock estimate; nil while too young to play by.
    public var clockErrorMicroseconds: Double?
    public var underruns: Int?
    /// How much faster than real time the stream arrived, once it all has.
    public var fillRate: Double?
    /// The timeline second the room plays now.
    public var playheadSeconds: Double?
    /// How far the house has sent the stream to the room.
    public var sentSeconds: Double
    /// Why the room cannot play what it was sent, as the room says it.
    public var problem: String?
    /// How many times a room of this name connected again since the house started.
    public var reconnects: Int?
    /// Which of the stream's channels it plays; nil for both (`stereo`).
    public var channel: ChannelMode?
    /// For a stereo pair (one room to every controller): its two halves, each a speaker.
    public var pair: StereoPairReport?
    public init(id: UInt32, name: String, group: String, volume: Int, latencyMs: Double, state: String, bufferSeconds: Double? = nil,
                syncErrorMicroseconds: Double? = nil, clockErrorMicroseconds: Double? = nil, underruns: Int? = nil,
                fillRate: Double? = nil, playheadSeconds: Double? = nil, sentSeconds: Double, problem: String? = nil, reconnects: Int? = nil) {
        self.id = id
        self.name = name
        self.group = group
        self.volume = volume
        self.latencyMs = latencyMs
        self.state = state
        self.bufferSeconds = bufferSeconds
        self.syncErrorMicroseconds = syncErrorMicroseconds
        self.clockErrorMicroseconds = clockErrorMicroseconds
        self.underruns = underruns
        self.fillRate = fillRate
        self.playheadSeconds = playheadSeconds
        self.sentSeconds = sentSeconds
        self.problem = problem
        self.reconnects = reconnects
    }
}

public struct RoomsReport: Codable, Sendable, Equatable {
    /// Set when a write to the house's store failed while this command was carried out: it
    /// took effect, but will not outlive a restart of the house (the status says so until the
    /// store takes writes again).
    public var storeProblem: String?
    /// By name.
    public var rooms: [RoomReport]
    /// Speakers waiting to be admitted (`admit`), in the order they came.
    public var waiting: [WaitingSpeakerReport]?
    public init(rooms: [RoomReport], waiting: [WaitingSpeakerReport]? = nil) {
        self.rooms = rooms
        self.waiting = waiting
    }
    public subscript(name: String) -> RoomReport? { rooms.first { $0.name == name } }
}

/// A speaker the house does not know, waiting to be admitted (`tutti ctl admit NAME`).
public struct WaitingSpeakerReport: Codable, Sendable, Equatable {
    /// The name it says it has.
    public var name: String
    /// The six digits its own log shows too (`AdmissionCode`): admit it only if they match.
    public var code: String
    /// Where it connects from.
    public var address: String
    /// Its identity key's fingerprint (`PeerKey.fingerprint`).
    public var key: String
    public var waitingSeconds: Double
    public init(name: String, code: String, address: String, key: String, waitingSeconds: Double) {
        self.name = name
        self.code = code
        self.address = address
        self.key = key
        self.waitingSeconds = waitingSeconds
    }
}

public struct RoomChange: Codable, Sendable, Equatable {
    /// Set when a write to the house's store failed while this command was carried out: it
    /// took effect, but will not outlive a restart of the house (the status says so until the
    /// store takes writes again).
    public var storeProblem: String?
    public var id: UInt32
    public var room: String
    /// The name of the group it plays in.
    public var group: String
    public var volume: Int
    /// The latency it compensates, in ms.
    public var latencyMs: Double?
    /// Which of the stream's channels it plays; nil for both (`stereo`).
    public var channel: ChannelMode?
    /// For a stereo pair: its two halves.
    public var pair: StereoPairReport?
    public init(id: UInt32, room: String, group: String, volume: Int, latencyMs: Double? = nil, channel: ChannelMode? = nil, pair: StereoPairReport? = nil) {
        self.id = id
        self.room = room
        self.group = group
        self.volume = volume
        self.latencyMs = latencyMs
        self.channel = channel
        self.pair = pair
    }
}

/// The two halves of a stereo pair: two rooms bound as one (`pair`), the left playing the
/// stream's left channel, the right its right, in sync to within a sample.
public struct StereoPairReport: Codable, Sendable, Equatable {
    /// Each half's own name and id (what `unpair` gives back), and whether it is connected.
    public struct Half: Codable, Sendable, Equatable {
        public var id: UInt32
        public var name: String
        public var connected: Bool
        /// The half's own estimate of how far its playback is from the timeline.
        public var syncErrorMicroseconds: Double?
        public init(id: UInt32, name: String, connected: Bool, syncErrorMicroseconds: Double? = nil) {
            self.id = id
            self.name = name
            self.connected = connected
            self.syncErrorMicroseconds = syncErrorMicroseconds
        }
    }
    public var left: Half
    public var right: Half
    public init(left: Half, right: Half) {
        self.left = left
        self.right = right
    }
}

public struct GroupVolumeReport: Codable, Sendable, Equatable {
    /// Set when a write to the house's store failed while this command was carried out: it
    /// took effect, but will not outlive a restart of the house (the status says so until the
    /// store takes writes again).
    public var storeProblem: String?
    /// The group's volume now: the mean of its rooms', rounded.
    public var percent: Int
    /// Each room of the group, with its own volume.
    public var rooms: [RoomChange]
    public init(percent: Int, rooms: [RoomChange]) {
        self.percent = percent
        self.rooms = rooms
    }
}

/// A file of the music library.
public struct LibraryTrack: Codable, Sendable, Equatable {
    public var path: String
    public var title: String?
    public var artist: String?
    public var album: String?
    public var durationSeconds: Double?
    /// Codec and sample rate, e.g. "flac 44100 Hz".
    public var format: String
    /// Its integrated loudness (EBU R128, LUFS) and peak (linear), its tags' or measured; and
    /// its album's (its tags', else its album's tracks' combined). Absent for silence.
    public var loudnessLUFS: Double?
    public var peak: Double?
    public var albumLoudnessLUFS: Double?
    public init(path: String, title: String? = nil, artist: String? = nil, album: String? = nil, durationSeconds: Double? = nil, format: String) {
        self.path = path
        self.title = title
        self.artist = artist
        self.album = album
        self.durationSeconds = durationSeconds
        self.format = format
    }
}

/// A file the library could not read, and why.
public struct LibraryProblem: Codable, Sendable, Equatable {
    public var path: String
    public var reason: String
    public init(path: String, reason: String) {
        self.path = path
        self.reason = reason
    }
}

/// What the library holds: artists, an artist's albums, tracks (of an album or a search), or
/// the files it could not read; only the part asked for is present. An artist or album of ""
/// gathers the tracks without that tag.
public struct LibraryBrowseReport: Codable, Sendable, Equatable {
    /// Set when a write to the house's store failed while this command was carried out: it
    /// took effect, but will not outlive a restart of the house (the status says so until the
    /// store takes writes again).
    public var storeProblem: String?
    public var artists: [String]?
    public var albums: [String]?
    public var tracks: [LibraryTrack]?
    public var problems: [LibraryProblem]?
    public init(artists: [String]? = nil, albums: [String]? = nil, tracks: [LibraryTrack]? = nil, problems: [LibraryProblem]? = nil) {
        self.artists = artists
        self.albums = albums
        self.tracks = tracks
        self.problems = problems
    }
}

/// The library in the house's status: its size and its scan.
public struct LibraryStatus: Codable, Sendable, Equatable {
    public var tracks: Int
    public var unreadable: Int
    /// While a scan runs: files looked at, of those found.
    public var scanning: Bool
    public var scannedFiles: Int
    public var foundFiles: Int
    public init(tracks: Int, unreadable: Int, scanning: Bool, scannedFiles: Int, foundFiles: Int) {
        self.tracks = tracks
        self.unreadable = unreadable
        self.scanning = scanning
        self.scannedFiles = scannedFiles
        self.foundFiles = foundFiles
    }
}

public struct QueueEntryReport: Codable, Sendable, Equatable {
    public var index: Int
    /// Stays the entry's while it is in the queue, whatever moves around it, and across
    /// restarts (MPD's song id).
    public var id: Int?
    public var path: String
    public var current: Bool
    public var title: String?
    public var durationSeconds: Double?
    public init(index: Int, path: String, current: Bool, title: String? = nil, durationSeconds: Double? = nil) {
        self.index = index
        self.path = path
        self.current = current
        self.title = title
        self.durationSeconds = durationSeconds
    }
}

public struct QueueReport: Codable, Sendable, Equatable {
    /// Set when a write to the house's store failed while this command was carried out: it
    /// took effect, but will not outlive a restart of the house (the status says so until the
    /// store takes writes again).
    public var storeProblem: String?
    public var items: [QueueEntryReport]
    /// The position heard now; nil when nothing plays (or it was removed).
    public var current: Int?
    public init(items: [QueueEntryReport], current: Int?) {
        self.items = items
        self.current = current
    }
}

public struct StatusReport: Codable, Sendable, Equatable {
    public var server: String
    /// The group this status is of (the request's, or the default group): its state, queue,
    /// item and volume. `rooms` lists every room of the house.
    public var group: String?
    public var groupId: UInt32?
    /// "stopped", "starting" (a play waiting for its rooms), "playing" or "paused".
    public var state: String
    public var roomCount: Int
    public var queueLength: Int
    /// The house's clock when it answered.
    public var serverTimeNs: Int64
    public var stream: UInt32?
    public var positionSeconds: Double?
    public var bufferedAheadSeconds: Double?
    public var item: Int?
    /// The item heard: its display title ("Artist – Title", or the file name), its path or URL,
    /// and its artist and album tags.
    public var title: String?
    public var path: String?
    public var artist: String?
    public var album: String?
    public var itemPositionSeconds: Double?
    public var itemDurationSeconds: Double?
    /// The mean volume of the group's connected rooms; nil when none is connected.
    public var groupVolume: Int?
    /// The music library, when the house has one (`--music`).
    public var library: LibraryStatus?
    /// How the queue plays on (nil from a house before play modes).
    public var playModes: PlayModes?
    /// How the group evens out its items' loudness (nil from a house before it could).
    public var replayGain: ReplayGainSettings?
    /// How long consecutive items crossfade, in seconds; 0 gapless (nil from a house before
    /// crossfade).
    public var crossfadeSeconds: Double?
    /// The queue item that plays after the one heard, in play order (nil: none, the queue or
    /// `single` ends there).
    public var nextItem: Int?
    /// Why changes are not being kept across a restart (a write to the house's store failed:
    /// a full disk, say), until the store takes writes again; nil while it does.
    public var storeProblem: String?
    public var rooms: [RoomReport]
    /// Speakers waiting to be admitted (`admit`): the web UI's Admit buttons.
    public var waiting: [WaitingSpeakerReport]?
    /// The live source the group plays in place of its queue (an AirPlay sender), if one does;
    /// `title`, `artist` and `album` then describe what it plays.
    public var source: LiveSourceReport?
    public init(server: String, state: String, roomCount: Int, queueLength: Int, serverTimeNs: Int64, stream: UInt32? = nil,
                positionSeconds: Double? = nil, bufferedAheadSeconds: Double? = nil, item: Int? = nil, title: String? = nil,
                itemPositionSeconds: Double? = nil, itemDurationSeconds: Double? = nil, rooms: [RoomReport] = []) {
        self.server = server
        self.state = state
        self.roomCount = roomCount
        self.queueLength = queueLength
        self.serverTimeNs = serverTimeNs
        self.stream = stream
        self.positionSeconds = positionSeconds
        self.bufferedAheadSeconds = bufferedAheadSeconds
        self.item = item
        self.title = title
        self.itemPositionSeconds = itemPositionSeconds
        self.itemDurationSeconds = itemDurationSeconds
        self.rooms = rooms
    }
}

/// A live source a group plays in place of its queue: who sends it and what it says it plays.
public struct LiveSourceReport: Codable, Sendable, Equatable, CustomStringConvertible {
    /// "airplay".
    public var kind: String
    /// The sender's address, and the name it gives, if any.
    public var sender: String
    public var senderName: String?
    public var title: String?
    public var artist: String?
    public var album: String?
    /// Set when the source sent a cover: `GET /api/artwork?live=GROUP` gives it; a new number,
    /// a new cover.
    public var artworkRevision: Int?
    public init(kind: String, sender: String) {
        self.kind = kind
        self.sender = sender
    }

    /// "AirPlay from NAME" (or the address), what a status shows when the sender names no title.
    public var description: String { "\(kind == "airplay" ? "AirPlay" : kind) from \(senderName ?? sender)" }
}

/// One group of the house: its rooms and what it plays.
public struct GroupReport: Codable, Sendable, Equatable {
    /// The group's identity: the same across renames and restarts.
    public var id: UInt32
    public var name: String
    /// The group new rooms join, which cannot be removed (MPD's "default" partition).
    public var isDefault: Bool
    /// Its rooms that are connected, by name; `knownRooms` also those that are not.
    public var rooms: [String]
    public var knownRooms: [String]
    /// As `StatusReport.state`.
    public var state: String
    public var queueLength: Int
    /// The stream it plays (Snapcast's stream id), if any.
    public var stream: UInt32?
    public var title: String?
    public var positionSeconds: Double?
    /// The mean volume of its connected rooms.
    public var volume: Int?
    /// The live source it plays in place of its queue, if one does.
    public var source: LiveSourceReport?
    /// Where its AirPlay receiver listens ("HOST:PORT"), if the house has one for it.
    public var airplay: String?
    public init(id: UInt32, name: String, isDefault: Bool, rooms: [String], knownRooms: [String], state: String, queueLength: Int) {
        self.id = id
        self.name = name
        self.isDefault = isDefault
        self.rooms = rooms
        self.knownRooms = knownRooms
        self.state = state
        self.queueLength = queueLength
    }
}

public struct GroupsReport: Codable, Sendable, Equatable {
    /// Set when a write to the house's store failed while this command was carried out: it
    /// took effect, but will not outlive a restart of the house (the status says so until the
    /// store takes writes again).
    public var storeProblem: String?
    /// The default group first, then by name.
    public var groups: [GroupReport]
    public init(groups: [GroupReport]) { self.groups = groups }
    public subscript(name: String) -> GroupReport? { groups.first { $0.name == name } }
}
