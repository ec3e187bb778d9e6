import TuttiCommandLine
import ArgumentParser
import TuttiProtocol

/// `tutti ctl modes`, `tutti ctl queue shuffle` and `tutti ctl playlist …`: the play modes and
/// stored playlists, as MPD clients know them.
struct CtlModes: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "modes", abstract: "Show or change how the queue plays on: repeat, random, single, consume.",
        discussion: """
            Each is on or off; the ones not given stay as they are. A change while playing cuts the \
            stream only where what is heard next changes.
              repeat   the queue starts again after its last item (with single: the item heard does)
              random   items play in a shuffled order
              single   playing stops after the item heard
              consume  an item leaves the queue once heard
            Examples:
              tutti ctl modes                         show them
              tutti ctl modes --repeat on --random on
            """)
    @ParentCommand var ctl: Ctl
    @Option(help: "on or off.") var `repeat`: Switch?
    @Option(help: "on or off.") var random: Switch?
    @Option(help: "on or off.") var single: Switch?
    @Option(help: "on or off.") var consume: Switch?
    @Flag(help: "Print JSON.") var json = false

    enum Switch: String, ExpressibleByArgument, CaseIterable {
        case on, off
        var isOn: Bool { self == .on }
    }

    func run() async throws {
        let change: ControlCommand = .playModes(repeat: `repeat`?.isOn, random: random?.isOn, single: single?.isOn, consume: consume?.isOn)
        let reply = try await ctl.send(change.problem == nil ? change : .status)
        if json { return printReply(.status(reply.status!), json: true) }
        let modes = reply.status?.playModes ?? PlayModes()
        Terminal.standardOutput("repeat \(modes.repeat ? "on" : "off"), random \(modes.random ? "on" : "off"), single \(modes.single ? "on" : "off"), consume \(modes.consume ? "on" : "off")\n")
    }
}

struct CtlReplayGain: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "replay-gain", abstract: "Show or change how the group evens out loudness (MPD's replay_gain_mode).",
        discussion: """
            Each item is brought to ReplayGain's reference, -18 LUFS, from the loudness the library knows of it: \
            its ReplayGain or R128 tags, else what the scan measured (EBU R128, with libebur128). The gain is \
            applied in the house, so every room hears the same; a change while playing is cut seamlessly.
              off     items play as they are (the default)
              track   each item to -18 LUFS
              album   each album to -18 LUFS: its tracks keep their levels relative to one another
              auto    album, unless the queue plays in random order
            Examples:
              tutti ctl replay-gain                   show it
              tutti ctl replay-gain track --preamp 3
              tutti ctl replay-gain album --missing-preamp -6   files outside the library, URLs, pipes
            A file outside the library, or a URL of one, plays at the missing preamp until it has played through \
            once; it is measured as it plays and its own gain applies from then on (--measure-as-played off: never). \
            Pipes, standard input and HLS streams change from one play to the next and are never measured.
            """)
    @ParentCommand var ctl: Ctl
    @Argument(help: "off, track, album or auto.") var mode: ReplayGainSettings.Mode?
    @Option(help: "dB added to a known loudness's gain (-15 to 15).") var preamp: Double?
    @Option(help: "dB for an item whose loudness is not known (-15 to 15).") var missingPreamp: Double?
    @Option(help: "on: no gain lifts an item's peak over full scale (the default); off: it may clip.") var limit: CtlModes.Switch?
    @Option(help: "on: a file outside the library or a URL is measured the first time it plays through, its gain right from its next play (the default); off: it always plays at the missing preamp.")
    var measureAsPlayed: CtlModes.Switch?
    @Flag(help: "Print JSON.") var json = false

    func run() async throws {
        let change: ControlCommand = .replayGain(mode: mode, preampDB: preamp, missingPreampDB: missingPreamp, limit: limit?.isOn,
                                                 measureAsPlayed: measureAsPlayed?.isOn)
        let nothingGiven = mode == nil && preamp == nil && missingPreamp == nil && limit == nil && measureAsPlayed == nil
        let reply = try await ctl.send(nothingGiven ? .status : change)
        if json { return printReply(.status(reply.status!), json: true) }
        let settings = reply.status?.replayGain ?? ReplayGainSettings()
        Terminal.standardOutput("replay gain \(settings.mode.rawValue), preamp \(settings.preampDB) dB, missing preamp \(settings.missingPreampDB) dB, "
                                + "peaks \(settings.limit ? "limited to full scale" : "not limited"), "
                                + "items outside the library \(settings.measureAsPlayed ? "measured as they play" : "left at the missing preamp")\n")
    }
}

extension ReplayGainSettings.Mode: ExpressibleByArgument {}

struct CtlCrossfade: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "crossfade", abstract: "Show or set how long consecutive items crossfade (MPD's crossfade).",
        discussion: """
            The end of each item fades out as the next fades in, on an equal-power curve, computed in the \
            house on the one stream, so every room of the group fades alike. 0 joins items gapless (the \
            default). Consecutive tracks of one album, in album order (by their track and disc tags), \
            always join gapless: a live album or a DJ mix plays on unbroken. A change while playing \
            applies from the next join, seamlessly.
            Examples:
              tutti ctl crossfade                     show it
              tutti ctl crossfade 4                   4 s fades
              tutti ctl crossfade 0                   gapless again
            """)
    @ParentCommand var ctl: Ctl
    @Argument(help: "Seconds, 0 to 30 (fractions allowed).") var seconds: Double?
    @Flag(help: "Print JSON.") var json = false

    func run() async throws {
        let reply = try await ctl.send(seconds.map { .crossfade(seconds: $0) } ?? .status)
        if json { return printReply(.status(reply.status!), json: true) }
        let crossfade = reply.status?.crossfadeSeconds ?? 0
        Terminal.standardOutput(crossfade == 0 ? "crossfade off: items join gapless\n"
                                : "crossfade \(crossfade) s; an album's next track joins gapless\n")
    }
}

struct CtlQueueShuffle: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "shuffle", abstract: "Shuffle the queue; the item heard goes first and plays on.")
    @ParentCommand var queue: CtlQueue
    func run() async throws { printReply(try await queue.ctl.send(.queueShuffle), json: false) }
}

struct CtlPlaylist: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "playlist", abstract: "Stored playlists: the queue kept by name.",
        discussion: """
            Examples:
              tutti ctl playlist save Sunday     keep the queue as "Sunday" (replacing one of that name)
              tutti ctl playlist load Sunday     add it to the end of the queue
              tutti ctl playlist add Sunday a.flac b.flac   append files (making "Sunday" if need be)
              tutti ctl playlist list            every stored playlist
              tutti ctl playlist remove Sunday
            """,
        subcommands: [CtlPlaylistList.self, CtlPlaylistSave.self, CtlPlaylistLoad.self, CtlPlaylistAdd.self, CtlPlaylistRemove.self],
        defaultSubcommand: CtlPlaylistList.self)
    @ParentCommand var ctl: Ctl
}

/// One line per stored playlist, or JSON.
func printPlaylists(_ reply: ControlReply, json: Bool) {
    if json { return printReply(reply, json: true) }
    for playlist in reply.playlists?.playlists ?? [] {
        Terminal.standardOutput("\(playlist.name)  (\(playlist.files.count) item\(playlist.files.count == 1 ? "" : "s"))\n")
    }
}

struct CtlPlaylistList: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "list", abstract: "List the stored playlists.")
    @ParentCommand var playlist: CtlPlaylist
    @Flag(help: "Print JSON.") var json = false
    func run() async throws { printPlaylists(try await playlist.ctl.send(.playlists), json: json) }
}

struct CtlPlaylistSave: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "save", abstract: "Keep the queue under a name, replacing a playlist of that name.")
    @ParentCommand var playlist: CtlPlaylist
    @Argument var name: String
    func run() async throws { printPlaylists(try await playlist.ctl.send(.playlistSave(name: name)), json: false) }
}

struct CtlPlaylistLoad: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "load", abstract: "Add a stored playlist to the end of the queue.")
    @ParentCommand var playlist: CtlPlaylist
    @Argument var name: String
    func run() async throws { printReply(try await playlist.ctl.send(.playlistLoad(name: name)), json: false) }
}

struct CtlPlaylistAdd: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "add", abstract: "Append files or URLs to a stored playlist, made if there is none.")
    @ParentCommand var playlist: CtlPlaylist
    @Argument(help: "The playlist's name.") var name: String
    @Argument(help: "Files on the house (relative to here) or URLs.") var files: [String]
    func run() async throws {
        let paths = files.map { $0.contains("://") ? $0 : absolutePath($0) }
        printPlaylists(try await playlist.ctl.send(.playlistAdd(name: name, files: paths)), json: false)
    }
}

struct CtlPlaylistRemove: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "remove", abstract: "Delete a stored playlist.")
    @ParentCommand var playlist: CtlPlaylist
    @Argument var name: String
    func run() async throws { printPlaylists(try await playlist.ctl.send(.playlistRemove(name: name)), json: false) }
}
