import Foundation
import TuttiHouse
import TuttiMedia
import TuttiProtocol

/// MPD's commands, each performed through the house's typed control commands
/// (`House.perform`), as every front end does: the house's groups are MPD's partitions, rooms
/// are MPD's outputs (enabling one moves it into the partition's group), `setvol` is the group's
/// volume, and the queue and library are the house's.
///
/// Not thread-safe: one per connection, used by its session's task.
struct MPDCommands {
    let house: House
    let uris: MPDSongURIs
    let playlistVersion: MPDPlaylistVersion
    let partitionClients: MPDPartitionClients
    let updateJobs: MPDUpdateJobs
    /// The largest chunk of a picture sent at once (`binarylimit`).
    var binaryLimit = 8192
    /// The group this connection acts on (MPD's partition), by id so that a rename elsewhere
    /// is followed; nil: the default group, where every connection starts.
    var partition: UInt32? {
        didSet { partitionClients.move(from: oldValue, to: partition) }
    }
    /// Idle subsystems a command raised itself, for the session to report (`update` on a
    /// library that follows its disk: done at once).
    var raised = Set<String>()
    /// What this connection may do (`MPDPermissions`), and what each password gives.
    var permissions = MPDPermissions.all
    var passwords: [String: MPDPermissions] = [:]

    /// Every command this server knows, for `commands`.
    static let names = [
        "add", "addid", "albumart", "binarylimit", "channels", "clear", "close", "commands", "consume", "count", "crossfade", "currentsong", "decoders",
        "delete", "deleteid", "delpartition", "disableoutput", "enableoutput", "find", "findadd", "findaddpl", "getvol", "idle", "list",
        "listall", "listallinfo", "listpartitions", "listplaylist", "listplaylistinfo", "listplaylists", "load", "lsinfo",
        "move", "moveid", "moveoutput", "newpartition", "next", "noidle", "notcommands", "outputs", "partition", "password",
        "pause", "ping", "play", "playid", "playlistadd", "playlistfind", "playlistid", "playlistinfo", "playlistsearch", "plchanges", "plchangesposid", "previous", "random",
        "readpicture", "repeat", "replay_gain_mode", "replay_gain_status", "rescan", "rm", "save", "search", "searchadd", "searchaddpl", "seek", "seekcur", "seekid", "setvol", "shuffle",
        "single", "stats", "status", "stop", "swap", "swapid", "tagtypes", "toggleoutput", "update", "urlhandlers", "volume",
    ]

    // MARK: The house

    /// Performs `command` on this connection's partition (the commands that act on no group
    /// ignore it), with a refusal as MPD's ACK.
    func perform(_ command: ControlCommand, for name: String) async throws(MPDError) -> ControlReply {
        try await perform(command, in: partition, for: name)
    }

    func perform(_ command: ControlCommand, in group: UInt32?, for name: String) async throws(MPDError) -> ControlReply {
        switch await house.perform(command, group: group.map { String($0) }) {
        case .success(let reply): return reply
        case .failure(let refusal):
            let code: MPDError.Code = switch refusal.kind {
            case .notFound: .noExist
            case .invalid: .argument
            case .forbidden, .unauthorized: .permission
            case .conflict, .unplayable: .system
            }
            throw MPDError(code, refusal.error)
        }
    }

    /// The house as this connection's partition sees it. A partition whose group was removed
    /// elsewhere (MPD never removes one in use) hands its connection to the default group.
    mutating func snapshot() async -> MPDSnapshot? {
        guard case .success(.groups(let groups)) = await house.perform(.groups) else { return nil }
        if let partition, !groups.groups.contains(where: { $0.id == partition }) { self.partition = nil }
        let group = partition.map { String($0) }
        guard case .success(.status(let status)) = await house.perform(.status, group: group),
              case .success(.queue(let queue)) = await house.perform(.queue, group: group),
              case .success(.playlists(let playlists)) = await house.perform(.playlists) else { return nil }
        return MPDSnapshot(status: status, queue: queue, playlists: playlists, groups: groups.groups, updateJob: updateJobs.last)
    }

    mutating func current() async throws(MPDError) -> MPDSnapshot {
        guard let snapshot = await snapshot() else { throw MPDError(.system, "the house did not answer") }
        playlistVersion.observe(snapshot.queue, group: snapshot.status.groupId ?? 0)
        return snapshot
    }

    // MARK: Arguments

    private static func integer(_ text: String, _ name: String) throws(MPDError) -> Int {
        guard let value = Int(text) else { throw MPDError(.argument, "Integer expected: \(text)") }
        return value
    }

    private static func number(_ text: String) throws(MPDError) -> Double {
        guard let value = Double(text), value.isFinite else { throw MPDError(.argument, "Number expected: \(text)") }
        return value
    }

    private static func bool(_ text: String) throws(MPDError) -> Bool {
        switch text {
        case "0": return false
        case "1": return true
        default: throw MPDError(.argument, "Boolean (0/1) expected: \(text)")
        }
    }

    /// `START:END` or `POS` (END exclusive, open when absent).
    private static func range(_ text: String, count: Int) throws(MPDError) -> Range<Int> {
        if let colon = text.firstIndex(of: ":") {
            let start = try integer(String(text[..<colon]), "start")
            let endText = text[text.index(after: colon)...]
            let end = endText.isEmpty ? count : try integer(String(endText), "end")
            guard start >= 0, start <= end else { throw MPDError(.argument, "Bad range: \(text)") }
            return start..<min(end, count)
        }
        let position = try integer(text, "position")
        guard position >= 0 else { throw MPDError(.argument, "Number is negative: \(text)") }
        return position..<position + 1
    }

    static func expect(_ arguments: [String], _ range: ClosedRange<Int>, _ command: String) throws(MPDError) {
        guard range.contains(arguments.count) else {
            throw MPDError(.argument, arguments.count < range.lowerBound ? "too few arguments for \"\(command)\"" : "too many arguments for \"\(command)\"")
        }
    }

    // MARK: Dispatch

    /// Throws MPD's permission ACK, saying how to be granted more, for a command this
    /// connection may not run.
    func checkPermission(for command: String) throws(MPDError) {
        let needed = MPDPermissions.required(for: command)
        guard !permissions.isSuperset(of: needed) else { return }
        let how = passwords.isEmpty
            ? "clients on other machines may only read: the house grants more with tutti server --mpd-password PASS@\(MPDPermissions.all.words) or --mpd-default-permissions"
            : "send the password that grants \(needed.words)"
        throw MPDError(.permission, "you don't have permission for \"\(command)\" (it needs \(needed.words); \(how))")
    }

    /// Performs one command (not `idle`, `noidle`, `close` or command lists: the session's).
    mutating func run(_ request: MPDRequest) async throws(MPDError) -> MPDResponse {
        let a = request.arguments
        var out = MPDResponse()
        if Self.names.contains(request.name) { try checkPermission(for: request.name) }
        switch request.name {
        case "ping":
            try Self.expect(a, 0...0, "ping")
        case "password":
            try Self.expect(a, 1...1, "password")
            guard let granted = passwords[a[0]] else { throw MPDError(.password, "incorrect password") }
            permissions = granted
        case "commands":
            for name in Self.names + ["command_list_begin", "command_list_ok_begin", "command_list_end"]
            where permissions.isSuperset(of: MPDPermissions.required(for: name)) {
                out.add("command", name)
            }
        case "notcommands":
            for name in Self.names where !permissions.isSuperset(of: MPDPermissions.required(for: name)) { out.add("command", name) }
        case "tagtypes":
            if a.isEmpty { for tag in ["Artist", "Album", "Title"] { out.add("tagtype", tag) } }
        case "urlhandlers":
            out.add("handler", "http://")
            out.add("handler", "https://")
        case "decoders":
            out.add("plugin", "ffmpeg")
            for suffix in ["flac", "mp3", "ogg", "oga", "opus", "m4a", "mp4", "aac", "wav", "aif", "aiff", "wv", "ape", "mka", "webm"] { out.add("suffix", suffix) }
        case "binarylimit":
            try Self.expect(a, 1...1, "binarylimit")
            let limit = try Self.integer(a[0], "limit")
            guard limit >= 64 else { throw MPDError(.argument, "Value too small") }
            binaryLimit = min(limit, 1 << 20)

        case "status":
            try await status(into: &out)
        case "currentsong":
            let now = try await current()
            if let item = now.status.item, let entry = now.queue.items.first(where: { $0.index == item }) {
                song(entry, status: now.status, tags: await house.libraryTracks(atPaths: [entry.path])[entry.path], into: &out)
            } else if let source = now.status.source {
                // A live source (an AirPlay sender) has no place in the queue: MPD describes
                // such a song as it does a radio stream, by a URI, its name and its tags.
                out.add("file", "\(source.kind)://\(source.sender)")
                if let artist = source.artist { out.add("Artist", artist) }
                if let album = source.album { out.add("Album", album) }
                if let title = source.title { out.add("Title", title) }
                out.add("Name", source.description)
            }
        case "stats":
            let now = try await current()
            let artists = (try? await perform(.libraryBrowse(), for: "stats")).flatMap { if case .library(let r) = $0 { r.artists?.count } else { nil } } ?? 0
            out.add("artists", artists)
            out.add("songs", now.status.library?.tracks ?? 0)
            out.add("uptime", Int(ProcessInfo.processInfo.systemUptime - MPDServer.started))
            out.add("playtime", 0)
            out.add("db_playtime", 0)

        case "play", "playid":
            try Self.expect(a, 0...1, request.name)
            let now = try await current()
            if let argument = a.first {
                let value = try Self.integer(argument, "position")
                let index = request.name == "play" ? value : try Self.index(ofID: value, in: now.queue)
                guard now.queue.items.indices.contains(index) else { throw MPDError(.argument, "Bad song index") }
                _ = try await perform(.queuePlay(index: index), for: request.name)
            } else if now.status.state == "paused" {
                _ = try await perform(.resume, for: request.name)
            } else if now.status.state == "stopped" {
                guard !now.queue.items.isEmpty else { break }
                _ = try await perform(.queuePlay(index: now.status.item ?? 0), for: request.name)
            }
        case "pause":
            try Self.expect(a, 0...1, "pause")
            let now = try await current()
            let pause = try a.first.map(Self.bool) ?? (now.status.state == "playing" || now.status.state == "starting")
            if pause, now.status.state == "playing" || now.status.state == "starting" {
                _ = try await perform(.pause, for: "pause")
            } else if !pause, now.status.state == "paused" {
                _ = try await perform(.resume, for: "pause")
            }
        case "stop":
            _ = try await perform(.stop, for: "stop")
        case "next":
            _ = try await perform(.next, for: "next")
        case "previous":
            _ = try await perform(.previous, for: "previous")
        case "seek", "seekid":
            try Self.expect(a, 2...2, request.name)
            let now = try await current()
            let value = try Self.integer(a[0], "position")
            let index = request.name == "seek" ? value : try Self.index(ofID: value, in: now.queue)
            let seconds = try Self.number(a[1])
            if index != now.status.item || now.status.state == "stopped" {
                guard now.queue.items.indices.contains(index) else { throw MPDError(.argument, "Bad song index") }
                _ = try await perform(.queuePlay(index: index), for: request.name)
            }
            _ = try await perform(.seek(seconds: max(0, seconds)), for: request.name)
        case "seekcur":
            try Self.expect(a, 1...1, "seekcur")
            let now = try await current()
            var seconds = try Self.number(a[0])
            if a[0].hasPrefix("+") || a[0].hasPrefix("-") { seconds += now.status.itemPositionSeconds ?? 0 }
            _ = try await perform(.seek(seconds: max(0, seconds)), for: "seekcur")

        case "setvol":
            try Self.expect(a, 1...1, "setvol")
            let percent = try Self.integer(a[0], "volume")
            guard (0...100).contains(percent) else { throw MPDError(.argument, "Invalid volume value") }
            _ = try await perform(.groupVolume(percent: percent), for: "setvol")
        case "volume":
            try Self.expect(a, 1...1, "volume")
            let change = try Self.integer(a[0], "change")
            let now = try await current()
            guard let volume = now.status.groupVolume else { throw MPDError(.system, "No mixer: no room of the group is connected") }
            _ = try await perform(.groupVolume(percent: min(100, max(0, volume + change))), for: "volume")
        case "getvol":
            let now = try await current()
            if let volume = now.status.groupVolume { out.add("volume", volume) }
        case "repeat", "random", "single", "consume":
            try Self.expect(a, 1...1, request.name)
            if request.name == "single", a[0] == "oneshot" { throw MPDError(.argument, "single oneshot is not supported; single 1 stops after the song") }
            let on = try Self.bool(a[0])
            let command: ControlCommand = switch request.name {
            case "repeat": .playModes(repeat: on)
            case "random": .playModes(random: on)
            case "single": .playModes(single: on)
            default: .playModes(consume: on)
            }
            _ = try await perform(command, for: request.name)
        case "shuffle":
            try Self.expect(a, 0...0, "shuffle")
            _ = try await perform(.queueShuffle, for: "shuffle")
        case "swap", "swapid":
            try Self.expect(a, 2...2, request.name)
            let now = try await current()
            var (first, second) = request.name == "swap"
                ? (try Self.integer(a[0], "position"), try Self.integer(a[1], "position"))
                : (try Self.index(ofID: Self.integer(a[0], "id"), in: now.queue), try Self.index(ofID: Self.integer(a[1], "id"), in: now.queue))
            guard now.queue.items.indices.contains(first), now.queue.items.indices.contains(second) else { throw MPDError(.argument, "Bad song index") }
            if first > second { swap(&first, &second) }
            // Two moves: the later item to the earlier place, then the earlier (now one further on) to the later's.
            if first != second {
                _ = try await perform(.queueMove(from: second, to: first), for: request.name)
                _ = try await perform(.queueMove(from: first + 1, to: second), for: request.name)
            }
        case "playlistfind", "playlistsearch":
            // The queue's songs that pass the filter, in queue order.
            let (filter, _) = try MPDFilter.parse(a, search: request.name == "playlistsearch")
            let now = try await current()
            let tags = await house.libraryTracks(atPaths: now.queue.items.map(\.path))
            for item in now.queue.items {
                let track = tags[item.path]
                let song = MPDFilter.Song(uri: uris.uri(forPath: item.path), artist: track?.artist, album: track?.album, title: track?.title ?? item.title)
                if filter.matches(song, foldCase: request.name == "playlistsearch") { self.song(item, status: now.status, tags: track, into: &out) }
            }
        case "replay_gain_status":
            try Self.expect(a, 0...0, "replay_gain_status")
            out.add("replay_gain_mode", (try await current()).status.replayGain?.mode.rawValue ?? "off")
        case "replay_gain_mode":
            try Self.expect(a, 1...1, "replay_gain_mode")
            // MPD's words for the modes are Tutti's.
            guard let mode = ReplayGainSettings.Mode(rawValue: a[0]) else { throw MPDError(.argument, "Unrecognized replay gain mode") }
            _ = try await perform(.replayGain(mode: mode), for: "replay_gain_mode")
        case "crossfade":
            try Self.expect(a, 1...1, "crossfade")
            let seconds = try Self.integer(a[0], "seconds")
            guard seconds >= 0 else { throw MPDError(.argument, "Number is negative: \(a[0])") }
            guard Double(seconds) <= ControlCommand.maximumCrossfadeSeconds else { throw MPDError(.argument, "Number too large: \(a[0])") }
            _ = try await perform(.crossfade(seconds: Double(seconds)), for: "crossfade")
        case "channels":
            // No client-to-client channels (MPD's subscribe/sendmessage): none to list.
            break

        case "add", "addid":
            try Self.expect(a, 1...2, request.name)
            var at: Int?
            if a.count > 1 { at = try await insertPosition(a[1]) }
            if request.name == "add", let songs = try songsOfDirectory(a[0]) {
                // A directory: its songs in MPD's database order.
                try await add(songs, at: at, for: "add")
                break
            }
            let before = try await current()
            _ = try await perform(.queueAdd(file: uris.path(forURI: a[0]), at: at), for: request.name)
            if request.name == "addid" {
                let after = try await current()
                let index = at ?? before.queue.items.count
                if let item = after.queue.items.first(where: { $0.index == index }) { out.add("Id", Self.songID(item)) }
            }
        case "delete":
            try Self.expect(a, 1...1, "delete")
            let now = try await current()
            let range = try Self.range(a[0], count: now.queue.items.count)
            guard range.upperBound <= now.queue.items.count, !range.isEmpty else { throw MPDError(.argument, "Bad song index") }
            for index in range.reversed() { _ = try await perform(.queueRemove(index: index), for: "delete") }
        case "deleteid":
            try Self.expect(a, 1...1, "deleteid")
            let now = try await current()
            _ = try await perform(.queueRemove(index: try Self.index(ofID: Self.integer(a[0], "id"), in: now.queue)), for: "deleteid")
        case "clear":
            _ = try await perform(.queueClear, for: "clear")
        case "move", "moveid":
            try Self.expect(a, 2...2, request.name)
            let now = try await current()
            let from = request.name == "move" ? try Self.integer(a[0], "from") : try Self.index(ofID: Self.integer(a[0], "id"), in: now.queue)
            _ = try await perform(.queueMove(from: from, to: try Self.integer(a[1], "to")), for: request.name)
        case "playlistinfo", "playlistid", "plchanges", "plchangesposid":
            try Self.expect(a, 0...2, request.name)
            let now = try await current()
            var items = now.queue.items
            switch request.name {
            case "playlistinfo":
                if let argument = a.first {
                    let range = try Self.range(argument, count: items.count)
                    guard range.lowerBound < items.count || (range.isEmpty && argument.contains(":")) else { throw MPDError(.argument, "Bad song index") }
                    items = Array(items[range.clamped(to: 0..<items.count)])
                }
            case "playlistid":
                if let argument = a.first {
                    let id = try Self.integer(argument, "id")
                    items = items.filter { Self.songID($0) == id }
                    guard !items.isEmpty else { throw MPDError(.noExist, "No such song") }
                }
            default:
                // Every item changed since any version older than now's.
                let version = try Self.integer(a.first ?? "0", "version")
                if version >= playlistVersion.current(group: now.status.groupId ?? 0) { items = [] }
            }
            let tags = request.name == "plchangesposid" ? [:] : await house.libraryTracks(atPaths: items.map(\.path))
            for item in items {
                if request.name == "plchangesposid" {
                    out.add("cpos", item.index)
                    out.add("Id", Self.songID(item))
                } else {
                    song(item, status: now.status, tags: tags[item.path], into: &out)
                }
            }

        case "outputs":
            let now = try await current()
            for room in Self.outputs(now.status) {
                out.add("outputid", Self.outputID(room))
                out.add("outputname", room.name)
                out.add("plugin", "tutti")
                out.add("outputenabled", room.group == now.status.group ? 1 : 0)
            }
        case "enableoutput", "disableoutput", "toggleoutput":
            try Self.expect(a, 1...1, request.name)
            let now = try await current()
            let id = try Self.integer(a[0], "id")
            guard let room = Self.outputs(now.status).first(where: { Self.outputID($0) == id }) else { throw MPDError(.noExist, "No such audio output") }
            let enabled = room.group == now.status.group
            let join = request.name == "enableoutput" || (request.name == "toggleoutput" && !enabled)
            // Enabled is in this partition's group; disabled, out of it, in a group of its own.
            if join != enabled {
                _ = try await perform(join ? .join(room: room.name) : .leave(room: room.name), for: request.name)
            }

        case "lsinfo", "listall", "listallinfo":
            try Self.expect(a, 0...1, request.name)
            try await list(a.first ?? "", recursive: request.name != "lsinfo", withTags: request.name != "listall", into: &out)
        case "find", "search", "count":
            let (songs, _) = try await matching(a, search: request.name == "search")
            if request.name == "count" {
                out.add("songs", songs.count)
                out.add("playtime", Int(songs.compactMap(\.tags?.durationSeconds).reduce(0, +).rounded()))
            } else {
                for found in songs {
                    if let tags = found.tags { describe(tags, into: &out) } else { out.add("file", uris.uri(forPath: found.path)) }
                }
            }
        case "list":
            try await listTag(a, into: &out)
        case "listplaylists":
            guard case .playlists(let report) = try await perform(.playlists, for: "listplaylists") else { break }
            for playlist in report.playlists {
                out.add("playlist", playlist.name)
                out.add("Last-Modified", Self.iso8601(playlist.modifiedSeconds))
            }
        case "listplaylist", "listplaylistinfo":
            try Self.expect(a, 1...1, request.name)
            let files = try await playlist(named: a[0], for: request.name)
            let tags = request.name == "listplaylistinfo" ? await house.libraryTracks(atPaths: files) : [:]
            for file in files {
                if let track = tags[file] { describe(track, into: &out) } else { out.add("file", uris.uri(forPath: file)) }
            }
        case "load":
            try Self.expect(a, 1...1, "load")
            _ = try await perform(.playlistLoad(name: a[0]), for: "load")
        case "save":
            try Self.expect(a, 1...1, "save")
            guard case .playlists(let report) = try await perform(.playlists, for: "save") else { break }
            // MPD 0.23 never replaces a playlist on save.
            guard !report.playlists.contains(where: { $0.name == a[0] }) else { throw MPDError(.exist, "Playlist already exists") }
            _ = try await perform(.playlistSave(name: a[0]), for: "save")
        case "rm":
            try Self.expect(a, 1...1, "rm")
            _ = try await perform(.playlistRemove(name: a[0]), for: "rm")
        case "albumart", "readpicture":
            try Self.expect(a, 2...2, request.name)
            let offset = try Self.integer(a[1], "offset")
            guard offset >= 0 else { throw MPDError(.argument, "Number is negative: \(a[1])") }
            let artwork: Artwork
            switch await house.artwork(forTrack: uris.path(forURI: a[0])) {
            case .success(let found): artwork = found
            case .failure(let refusal) where refusal.kind == .notFound:
                if request.name == "readpicture" { return out }  // MPD: an empty reply
                throw MPDError(.noExist, "No file exists")
            case .failure(let refusal):
                throw MPDError(refusal.kind == .forbidden ? .permission : .noExist, refusal.error)
            }
            guard offset <= artwork.bytes.count else { throw MPDError(.argument, "Offset too large") }
            let chunk = Array(artwork.bytes[offset..<min(artwork.bytes.count, offset + binaryLimit)])
            out.add("size", artwork.bytes.count)
            if request.name == "readpicture" { out.add("type", artwork.mimeType) }
            out.add("binary", chunk.count)
            out.binary = chunk
        case "partition", "listpartitions", "newpartition", "delpartition", "moveoutput":
            try await partitionCommand(request, into: &out)
        case "update", "rescan":
            // The library follows its directories on disk (inotify), so there is nothing to
            // start: MPD's job id, and its "update" event, at once for this client and at the
            // next look for the others.
            try Self.expect(a, 0...1, request.name)
            out.add("updating_db", updateJobs.next())
            raised.insert("update")
        case "findadd", "searchadd":
            try await addMatching(request, into: &out)
        case "findaddpl", "searchaddpl":
            // What find or search would list, appended to a stored playlist (made if none).
            guard let name = a.first else { throw MPDError(.argument, "too few arguments for \"\(request.name)\"") }
            let (songs, _) = try await matching(Array(a.dropFirst()), search: request.name == "searchaddpl")
            if !songs.isEmpty { _ = try await perform(.playlistAdd(name: name, files: songs.map(\.path)), for: request.name) }
        case "playlistadd":
            try Self.expect(a, 2...2, "playlistadd")
            // A song, or a directory's songs in database order.
            let files = try songsOfDirectory(a[1]) ?? [uris.path(forURI: a[1])]
            if !files.isEmpty { _ = try await perform(.playlistAdd(name: a[0], files: files), for: "playlistadd") }
        default:
            throw MPDError.unknownCommand(request.name)
        }
        return out
    }

    // MARK: Replies

    private mutating func status(into out: inout MPDResponse) async throws(MPDError) {
        let now = try await current()
        let status = now.status
        out.add("volume", status.groupVolume ?? -1)
        let modes = status.playModes ?? PlayModes()
        out.add("repeat", modes.repeat ? 1 : 0)
        out.add("random", modes.random ? 1 : 0)
        out.add("single", modes.single ? 1 : 0)
        out.add("consume", modes.consume ? 1 : 0)
        out.add("partition", status.group ?? "default")
        out.add("playlist", playlistVersion.current(group: status.groupId ?? 0))
        out.add("playlistlength", now.queue.items.count)
        let state = switch status.state {
        case "playing", "starting": "play"
        case "paused": "pause"
        default: "stop"
        }
        out.add("state", state)
        // MPD's: only when crossfading, in whole seconds.
        if let crossfade = status.crossfadeSeconds, crossfade > 0 { out.add("xfade", Int(crossfade.rounded())) }
        if let item = status.item, let entry = now.queue.items.first(where: { $0.index == item }) {
            out.add("song", item)
            out.add("songid", Self.songID(entry))
            if state != "stop" {
                let elapsed = status.itemPositionSeconds ?? 0
                out.add("time", "\(Int(elapsed)):\(Int((status.itemDurationSeconds ?? 0).rounded()))")
                out.add("elapsed", String(format: "%.3f", elapsed))
                if let duration = status.itemDurationSeconds { out.add("duration", String(format: "%.3f", duration)) }
                // The house's timeline: 48 kHz, 24-bit FLAC chunks, stereo.
                out.add("audio", "48000:24:2")
            }
            if let nextItem = status.nextItem, let next = now.queue.items.first(where: { $0.index == nextItem }) {
                out.add("nextsong", next.index)
                out.add("nextsongid", Self.songID(next))
            }
        }
        if status.library?.scanning == true { out.add("updating_db", 1) }
        // MPD's clients show `error` (ncmpcpp in its status bar): a store that keeps nothing is one.
        if let problem = status.storeProblem { out.add("error", "not kept across a restart: " + problem) }
    }

    /// A stored playlist's files; MPD's "No such playlist" for one that is not.
    private func playlist(named name: String, for command: String) async throws(MPDError) -> [String] {
        guard case .playlists(let report) = try await perform(.playlists, for: command) else { return [] }
        guard let playlist = report.playlists.first(where: { $0.name == name }) else { throw MPDError(.noExist, "No such playlist") }
        return playlist.files
    }

    /// MPD's time stamps: ISO 8601 in UTC, to the second.
    static func iso8601(_ seconds: Double) -> String {
        Date(timeIntervalSince1970: seconds.rounded(.down)).ISO8601Format()
    }

    /// The rooms as outputs, by output id.
    static func outputs(_ status: StatusReport) -> [RoomReport] {
        status.rooms.sorted { $0.id < $1.id }
    }

    /// A room's MPD output id: its stable id less one (MPD's outputs count from 0, and mpc
    /// shows the first as "Output 1").
    static func outputID(_ room: RoomReport) -> Int {
        Int(room.id) - 1
    }

    /// A queue entry's MPD song id: its house tag plus one. MPD's ids start at 1, and ncmpcpp
    /// takes a song id of 0 for "no song", never asking which song plays.
    static func songID(_ entry: QueueEntryReport) -> Int {
        (entry.id ?? entry.index) + 1
    }

    static func index(ofID id: Int, in queue: QueueReport) throws(MPDError) -> Int {
        guard let item = queue.items.first(where: { songID($0) == id }) else { throw MPDError(.noExist, "No such song") }
        return item.index
    }

    /// A queue entry as MPD describes a song: its tags from the library, else from what the
    /// house read of it while playing it.
    private func song(_ entry: QueueEntryReport, status: StatusReport?, tags: LibraryTrack?, into out: inout MPDResponse) {
        out.add("file", uris.uri(forPath: entry.path))
        if let tags {
            if let artist = tags.artist { out.add("Artist", artist) }
            if let album = tags.album { out.add("Album", album) }
            if let title = tags.title { out.add("Title", title) }
        } else if let status, status.path == entry.path {
            if let artist = status.artist { out.add("Artist", artist) }
            if let album = status.album { out.add("Album", album) }
            let title = status.title.map { title in status.artist.map { title.hasPrefix($0 + " – ") ? String(title.dropFirst($0.count + 3)) : title } ?? title }
            if let title { out.add("Title", title) }
        } else if let title = entry.title {
            out.add("Title", title)
        }
        if let duration = entry.durationSeconds ?? tags?.durationSeconds {
            out.add("Time", Int(duration.rounded()))
            out.add("duration", String(format: "%.3f", duration))
        }
        out.add("Pos", entry.index)
        out.add("Id", Self.songID(entry))
    }

    func describe(_ track: LibraryTrack, into out: inout MPDResponse) {
        out.add("file", uris.uri(forPath: track.path))
        if let artist = track.artist { out.add("Artist", artist) }
        if let album = track.album { out.add("Album", album) }
        if let title = track.title { out.add("Title", title) }
        if let duration = track.durationSeconds {
            out.add("Time", Int(duration.rounded()))
            out.add("duration", String(format: "%.3f", duration))
        }
    }

    /// `lsinfo`/`listall`: the music directory's entries, as MPD lists its database.
    private func list(_ uri: String, recursive: Bool, withTags: Bool, into out: inout MPDResponse) async throws(MPDError) {
        guard !uri.contains("://") else { throw MPDError(.noExist, "Unsupported URI scheme") }
        guard !uri.split(separator: "/").contains(".."), let directory = uris.directory(forURI: uri) else {
            throw MPDError(.noExist, "No such directory")
        }
        var isDirectory: ObjCBool = false
        guard FileManager.default.fileExists(atPath: directory, isDirectory: &isDirectory) else { throw MPDError(.noExist, "No such directory") }
        /// Directories and music files, in the order MPD lists them.
        var entries: [(isDirectory: Bool, path: String)] = []
        func walk(_ directory: String) {
            let names = ((try? FileManager.default.contentsOfDirectory(atPath: directory)) ?? []).filter { !$0.hasPrefix(".") }.sorted()
            for name in names {
                let path = directory + "/" + name
                var isDirectory: ObjCBool = false
                guard FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory) else { continue }
                if isDirectory.boolValue {
                    entries.append((true, path))
                    if recursive { walk(path) }
                } else if Self.musicExtensions.contains((name as NSString).pathExtension.lowercased()) {
                    entries.append((false, path))
                }
            }
        }
        if isDirectory.boolValue { walk(directory) } else { entries = [(false, directory)] }
        // lsinfo and listallinfo give each song's tags, as the library knows them.
        let tags = withTags ? await house.libraryTracks(atPaths: entries.filter { !$0.isDirectory }.map(\.path)) : [:]
        for entry in entries {
            if entry.isDirectory {
                out.add("directory", uris.uri(forPath: entry.path))
            } else if let track = tags[entry.path] {
                describe(track, into: &out)
            } else {
                out.add("file", uris.uri(forPath: entry.path))
            }
        }
    }

    static let musicExtensions: Set<String> = ["flac", "mp3", "ogg", "oga", "opus", "m4a", "mp4", "aac", "wav", "aif", "aiff", "wv", "ape", "mka", "webm", "alac"]

    /// `list Artist`, `list Album [Artist X]`, `list Title …`.
    private func listTag(_ arguments: [String], into out: inout MPDResponse) async throws(MPDError) {
        guard let type = arguments.first?.lowercased() else { throw MPDError(.argument, "too few arguments for \"list\"") }
        let filters = Array(arguments.dropFirst())
        switch type {
        case "artist", "albumartist":
            guard case .library(let report) = try await perform(.libraryBrowse(), for: "list") else { return }
            for artist in report.artists ?? [] where !artist.isEmpty { out.add(type == "artist" ? "Artist" : "AlbumArtist", artist) }
        case "album":
            let artists: [String]
            if filters.count == 2, filters[0].lowercased() == "artist" {
                artists = [filters[1]]
            } else if filters.count == 1 {
                artists = [filters[0]]  // the old form: list album ARTIST
            } else {
                guard case .library(let report) = try await perform(.libraryBrowse(), for: "list") else { return }
                artists = report.artists ?? []
            }
            var seen = Set<String>()
            for artist in artists {
                guard case .library(let report) = try await perform(.libraryBrowse(artist: artist), for: "list") else { continue }
                for album in report.albums ?? [] where !album.isEmpty && seen.insert(album).inserted { out.add("Album", album) }
            }
        default:
            throw MPDError(.argument, "Unknown tag type: \(arguments[0])")
        }
    }
}
