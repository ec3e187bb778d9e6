import TuttiCommandLine
import ArgumentParser
import Foundation
import NIOCore
import NIOPosix
import TuttiProtocol
import TuttiDiscovery

struct Ctl: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "ctl",
        abstract: "Control a running house: play, pause, rooms, volume, queue.",
        discussion: """
            Without --server, ctl uses the house announced on the network (Avahi), or the one on this machine.
            Examples:
              tutti ctl houses
              tutti ctl play a.flac b.mp3 --rooms kitchen,office
              tutti ctl --house Attic status
              tutti ctl --server 127.0.0.1:7700 rooms
              tutti ctl --server 127.0.0.1:7700 volume kitchen 40
              tutti ctl --server 127.0.0.1:7700 group-volume 30
              tutti ctl --server 127.0.0.1:7700 queue add c.ogg --at 1
              tutti ctl --server 127.0.0.1:7700 status --json
            Groups: each plays its own music in its own rooms; a command that acts on a group acts on the default group, or on the one --group names.
              tutti ctl group create Kitchen
              tutti ctl move kitchen Kitchen
              tutti ctl --group Kitchen play radio.m3u8
              tutti ctl --group Kitchen pause
              tutti ctl groups
            A house takes commands only from a controller holding its controller token (docs/SECURITY.md). On the house's \
            machine ctl finds it; elsewhere give it with --token-file FILE or TUTTI_TOKEN. To sign a phone or browser in \
            at the web UI instead:
              tutti ctl pair-controller
            A new speaker waits until it is admitted (its log and `tutti ctl rooms` show the same code):
              tutti ctl admit kitchen
            """,
        subcommands: [CtlHouses.self, CtlPlay.self, CtlPause.self, CtlResume.self, CtlSeek.self, CtlNext.self, CtlPrevious.self, CtlRooms.self,
                      CtlGroups.self, CtlGroup.self, CtlMove.self,
                      CtlJoin.self, CtlLeave.self, CtlVolume.self, CtlLatency.self, CtlRename.self, CtlChannel.self, CtlPair.self, CtlUnpair.self, CtlGroupVolume.self, CtlQueue.self, CtlModes.self, CtlReplayGain.self, CtlCrossfade.self, CtlPlaylist.self, CtlLibrary.self,
                      CtlStatus.self, CtlPairController.self, CtlAdmit.self, CtlForget.self])

    @Option(help: ArgumentHelp("The house server's address.",
                               discussion: "Without it: the house announced on the network through Avahi, else 127.0.0.1:7700."))
    var server: HostPort?

    @Option(help: "Without --server: the name of the house to control, when the network has several (see `tutti ctl houses`).")
    var house: String?

    @Option(help: ArgumentHelp("The group a command acts on (its name or id; see `tutti ctl groups`).",
                               discussion: "Play, pause, resume, seek, next, previous, queue, modes, replay-gain, crossfade, status, group-volume, join, leave and playlist save and load act on one group: this one, or the default group."))
    var group: String?

    @Option(name: .customLong("token-file"), help: ArgumentHelp(
        "The house's controller token, as a file.",
        discussion: "Without it: $TUTTI_TOKEN, else the token of a house on this machine started without --state-dir (~/.local/state/tutti/house/controller-token). A house started with --state-dir DIR keeps its token in DIR/controller-token."))
    var tokenFile: String?

    /// The controller token: `--token-file`, `TUTTI_TOKEN`, or the default house's on this
    /// machine. Exits 2 with one line saying where it looked.
    func token() throws -> ControllerToken {
        if let tokenFile {
            do { return try ControllerTokenFile.read(tokenFile) } catch {
                Terminal.standardError("tutti ctl: --token-file: \(error)\n")
                throw ExitCode(2)
            }
        }
        // An empty variable is none (`TUTTI_TOKEN= tutti ctl …`).
        if let text = ProcessInfo.processInfo.environment["TUTTI_TOKEN"], !text.isEmpty {
            guard let token = ControllerToken(text: text) else {
                Terminal.standardError("tutti ctl: TUTTI_TOKEN is not a controller token (43 characters of base64url)\n")
                throw ExitCode(2)
            }
            return token
        }
        guard let directory = ControllerTokenFile.defaultDirectory() else {
            Terminal.standardError("tutti ctl: no controller token: give --token-file FILE or TUTTI_TOKEN\n")
            throw ExitCode(2)
        }
        let path = ControllerTokenFile.path(in: directory)
        guard FileManager.default.fileExists(atPath: path) else {
            Terminal.standardError("tutti ctl: no controller token: give --token-file FILE or TUTTI_TOKEN (a house keeps it in its state directory, "
                                   + "controller-token; \(path) if started without --state-dir)\n")
            throw ExitCode(2)
        }
        do { return try ControllerTokenFile.read(path) } catch {
            Terminal.standardError("tutti ctl: \(error)\n")
            throw ExitCode(2)
        }
    }

    /// Sends a command (to `--group`, for one that acts on a group); prints the refusal and
    /// exits 1 if the house refuses it, 2 if it cannot be reached or refuses the token.
    func send(_ command: ControlCommand, group: String? = nil) async throws -> ControlReply {
        do { return try await sendOrRefuse(command, group: group) } catch let refusal as ControlRefusal {
            Terminal.standardError("tutti ctl: \(refusal)\n")
            throw ExitCode(1)
        }
    }

    /// The same, but a refusal is thrown (`ControlRefusal`) for the caller to weigh.
    func sendOrRefuse(_ command: ControlCommand, group: String? = nil) async throws -> ControlReply {
        // Which house first: a wrong choice is the more useful message.
        let server = try self.server ?? HouseLocator.findHouse(named: house, program: "tutti ctl")
        let token = try token()
        do {
            let reply = try await ControlClient.send(ControlRequest(command, group: group ?? self.group), host: server.host, port: server.port,
                                                     token: token, group: MultiThreadedEventLoopGroup.singleton)
            // Done, but not kept: said on stderr, so scripts reading stdout are not disturbed.
            if let problem = reply.storeProblem { Terminal.standardError("tutti ctl: warning: not kept across a restart of the house: \(problem)\n") }
            return reply
        } catch let refusal as ControlRefusal {
            throw refusal
        } catch {
            Terminal.standardError("tutti ctl: \(error)\n")
            throw ExitCode(2)
        }
    }
}

/// Prints a reply: JSON for scripts, else `key: value` lines (nested objects as `cut.fromSeconds`;
/// lists are left to the commands that format them).
func printReply(_ reply: ControlReply, json: Bool) {
    let text = ControlJSON.prettyPrinted(reply)
    if json {
        Terminal.standardOutput(text + "\n")
        return
    }
    guard case .object(let object)? = try? JSONDecoder().decode(JSONValue.self, from: Data(text.utf8)) else { return }
    for (key, value) in flattened(object, prefix: "").sorted(by: { $0.key < $1.key }) {
        Terminal.standardOutput("\(key): \(value)\n")
    }
}

/// `key: text` for every scalar of a reply, nested keys joined with dots; lists are skipped.
func flattened(_ object: [String: JSONValue], prefix: String) -> [String: String] {
    var lines: [String: String] = [:]
    for (key, value) in object {
        switch value {
        case .object(let nested): lines.merge(flattened(nested, prefix: prefix + key + ".")) { $1 }
        case .array, .null: break
        case .string(let s): lines[prefix + key] = s
        case .bool(let b): lines[prefix + key] = b ? "true" : "false"
        case .integer(let i): lines[prefix + key] = String(i)
        case .number(let d): lines[prefix + key] = String(format: d.rounded() == d && abs(d) < 1e15 ? "%.0f" : "%.3f", d)
        }
    }
    return lines
}

func absolutePath(_ path: String) -> String {
    if path.hasPrefix("/") || path.contains("://") { return path }
    return FileManager.default.currentDirectoryPath + "/" + path
}

struct CtlPairController: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "pair-controller",
        abstract: "A 6-digit code that signs a phone or browser in at the web UI's login page, once, within 5 minutes.")
    @ParentCommand var ctl: Ctl
    @Flag(help: "Print the reply as JSON.") var json = false

    func run() async throws {
        guard let pairing = try await ctl.send(.pairController).pairing else { return }
        if json { return printReply(.pairing(pairing), json: true) }
        Terminal.standardOutput("\(pairing.code)\n")
        Terminal.standardError("tutti ctl: on the phone or browser, open the house's web UI and enter \(pairing.code) "
                               + "(valid \(pairing.validSeconds / 60) minutes, once)\n")
    }
}

struct CtlAdmit: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "admit",
        abstract: "Let a new speaker in: from then on it plays the house's stream, encrypted, and no other house's.",
        discussion: """
            A speaker the house does not know waits, and its log shows a 6-digit code; `tutti ctl rooms` lists it with \
            the house's code for it. Admit it only if the two match: a stranger's speaker may use the same name, and a \
            speaker that reached a fake house relaying it shows another code. At a terminal, admit shows the code and \
            asks; in a script, give the code with --code (or admit by the code itself).
              tutti ctl admit kitchen
              tutti ctl admit kitchen --code 123456
              tutti ctl admit 123456
            """)
    @ParentCommand var ctl: Ctl
    @Argument(help: "The waiting speaker's name, or its code.") var speaker: String
    @Option(help: "Admit it only if it shows this code (the one its own log shows).") var code: String?
    @Option(help: "Seconds to wait for a speaker that has not knocked yet (a speaker just started).") var wait: Double = 10
    @Flag(help: "Print the reply as JSON.") var json = false

    func run() async throws {
        // The one waiting under that name (or code), once it has knocked.
        let deadline = Date().addingTimeInterval(wait)
        var found: WaitingSpeakerReport?
        while found == nil {
            let waiting = try await ctl.send(.rooms).rooms?.waiting ?? []
            let named = waiting.filter { $0.name == speaker }
            let matches = !named.isEmpty || !AdmissionCode.looksLikeCode(speaker) ? named : waiting.filter { AdmissionCode.matches(speaker, $0.code) }
            if matches.count > 1 && code == nil {
                Terminal.standardError("tutti ctl: \(matches.count) speakers named \(speaker) wait, with codes \(matches.map(\.code).joined(separator: ", ")): "
                                       + "admit the one whose code its own log shows, with --code\n")
                throw ExitCode(1)
            }
            found = matches.first { code == nil || AdmissionCode.matches(code!, $0.code) }
            if found != nil { break }
            guard Date() < deadline else {
                let listed = waiting.map { "\($0.name) (\($0.code))" }
                Terminal.standardError("tutti ctl: no speaker named \(speaker)\(code.map { " with code \($0)" } ?? "") waits to be admitted "
                                       + "(waiting: \(listed.isEmpty ? "none" : listed.joined(separator: ", ")))\n")
                throw ExitCode(1)
            }
            // Not knocking yet: a speaker started a moment ago is still finding the house.
            try await Task.sleep(nanoseconds: 200_000_000)
        }
        let chosen = found!
        if code == nil && isatty(STDIN_FILENO) == 1 {
            Terminal.standardError("\(chosen.name) waits from \(chosen.address) with the code \(chosen.code). Does its log show the same code? Admit it [y/N]? ")
            guard let answer = readLine(), ["y", "yes"].contains(answer.lowercased()) else {
                Terminal.standardError("tutti ctl: not admitted\n")
                throw ExitCode(1)
            }
        }
        // By its code: the speaker the user saw, not another that knocked meanwhile.
        let reply = try await ctl.send(.admit(speaker: chosen.name, code: chosen.code))
        if json { return printReply(reply, json: true) }
        Terminal.standardOutput("admitted \(chosen.name) (code \(chosen.code))\n")
    }
}

struct CtlForget: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "forget",
        abstract: "Revoke a speaker's admission: its connection ends, and it waits to be admitted again if it returns.")
    @ParentCommand var ctl: Ctl
    @Argument(help: "The room (its name or id).") var room: String
    @Flag(help: "Print the reply as JSON.") var json = false

    func run() async throws {
        let reply = try await ctl.send(.forget(speaker: room))
        if json { return printReply(reply, json: true) }
        Terminal.standardOutput("forgot \(room): it is no longer admitted\n")
    }
}

struct CtlPlay: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "play", abstract: "Replace the queue and play it in the given rooms (default: all).")
    @ParentCommand var ctl: Ctl
    @Argument(help: "Files to play, in order (paths as seen by the server; relative ones are made absolute).") var files: [String]
    @Option(help: "Comma-separated rooms, e.g. kitchen,office.") var rooms: String?
    @Flag(help: "Print the reply as JSON.") var json = false

    func run() async throws {
        let rooms = rooms.map { $0.split(separator: ",").map { String($0).trimmingCharacters(in: .whitespaces) } }
        let reply = try await ctl.send(.play(files: files.map(absolutePath), rooms: rooms))
        printReply(reply, json: json)
        // Lists are not among the reply's lines: say which rooms start late, and why.
        if !json {
            for room in reply.started?.notReady ?? [] {
                Terminal.standardOutput("\(room.room) was not ready (\(room.reason)): it joins in sync when it is\n")
            }
            for room in reply.started?.roomStarts ?? [] where room.mode == .slewing {
                Terminal.standardOutput("\(room.room) starts on a young clock (±\(room.clockBoundMicroseconds ?? 0) µs): it slews into sync, never a jump\n")
            }
        }
    }
}

struct CtlPause: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "pause", abstract: "Pause every room on the same sample.")
    @ParentCommand var ctl: Ctl
    func run() async throws { printReply(try await ctl.send(.pause), json: false) }
}

struct CtlResume: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "resume", abstract: "Resume every room together.")
    @ParentCommand var ctl: Ctl
    func run() async throws { printReply(try await ctl.send(.resume), json: false) }
}

struct CtlSeek: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "seek", abstract: "Jump to a position in the playing item.")
    @ParentCommand var ctl: Ctl
    @Argument(help: "Seconds from the start of the playing item.") var seconds: Double
    func run() async throws { printReply(try await ctl.send(.seek(seconds: seconds)), json: false) }
}

struct CtlNext: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "next", abstract: "Skip to the next queue item.")
    @ParentCommand var ctl: Ctl
    func run() async throws { printReply(try await ctl.send(.next), json: false) }
}

struct CtlPrevious: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "previous",
                                                    abstract: "Back to the start of the item, or, within its first 3 seconds, to the item before.")
    @ParentCommand var ctl: Ctl
    func run() async throws { printReply(try await ctl.send(.previous), json: false) }
}

struct CtlRooms: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "rooms", abstract: "List rooms: state, buffer level and sync-error estimate.")
    @ParentCommand var ctl: Ctl
    @Flag(help: "Print JSON.") var json = false
    func run() async throws {
        let reply = try await ctl.send(.rooms)
        if json { printReply(reply, json: true); return }
        let rooms = reply.rooms?.rooms ?? []
        if rooms.isEmpty { Terminal.standardOutput("no rooms connected\n") }
        for speaker in reply.rooms?.waiting ?? [] {
            Terminal.standardOutput("\(speaker.name) waits to be admitted, code \(speaker.code), from \(speaker.address): tutti ctl admit \(speaker.name.contains(" ") ? "'\(speaker.name)'" : speaker.name)\n")
        }
        for room in rooms {
            let clock = room.clockErrorMicroseconds.map { String(format: "±%.1f µs", $0) } ?? "settling"
            Terminal.standardOutput(String(format: "%-12@ %-12@ %-10@ buffer %6.1f s  sync %+8.1f µs  clock %@  volume %d%%\n",
                                           room.name as NSString, room.group as NSString, room.state as NSString, room.bufferSeconds ?? 0,
                                           room.syncErrorMicroseconds ?? 0, clock as NSString, room.volume))
            if let problem = room.problem { Terminal.standardOutput("             problem: \(problem)\n") }
        }
    }
}

struct CtlJoin: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "join", abstract: "Move a room into the group (--group, or the default); it starts in sync.")
    @ParentCommand var ctl: Ctl
    @Argument var room: String
    func run() async throws { printReply(try await ctl.send(.join(room: room)), json: false) }
}

struct CtlLeave: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "leave", abstract: "Take a room out of its group (--group, or the default) into a group of its own, silent.")
    @ParentCommand var ctl: Ctl
    @Argument var room: String
    func run() async throws { printReply(try await ctl.send(.leave(room: room)), json: false) }
}

struct CtlMove: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "move", abstract: "Move a room into a group: it plays that group's music, in sync with its rooms, within a second.",
        discussion: "The rooms it leaves play on without a gap. Example: tutti ctl move kitchen Radio")
    @ParentCommand var ctl: Ctl
    @Argument var room: String
    @Argument(help: "The group's name or id.") var group: String
    func run() async throws { printReply(try await ctl.send(.join(room: room), group: group), json: false) }
}

struct CtlGroups: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "groups", abstract: "List the groups: their rooms and what they play.")
    @ParentCommand var ctl: Ctl
    @Flag(help: "Print JSON.") var json = false
    func run() async throws { printGroups(try await ctl.send(.groups), json: json) }
}

/// Prints the groups, one line each: JSON for scripts.
func printGroups(_ reply: ControlReply, json: Bool) {
    if json { return printReply(reply, json: true) }
    for group in reply.groups?.groups ?? [] {
        let rooms = group.rooms.isEmpty ? "no room connected" : group.rooms.joined(separator: ", ")
        let playing = group.title.map { "  \(group.state): \($0)" } ?? "  \(group.state)"
        let airplay = group.airplay.map { "  AirPlay \($0)" } ?? ""
        Terminal.standardOutput("\(group.name)\(group.isDefault ? " (default)" : "")  [\(rooms)]\(playing)  queue \(group.queueLength)\(airplay)\n")
    }
}

struct CtlGroup: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "group", abstract: "Create, rename or remove a group.",
                                                    subcommands: [CtlGroupCreate.self, CtlGroupRename.self, CtlGroupRemove.self])
    @ParentCommand var ctl: Ctl
}

struct CtlGroupCreate: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "create", abstract: "A new group, empty and silent: move rooms into it, then play.")
    @ParentCommand var parent: CtlGroup
    @Argument var name: String
    @Flag(help: "Print JSON.") var json = false
    func run() async throws { printGroups(try await parent.ctl.send(.groupCreate(name: name)), json: json) }
}

struct CtlGroupRename: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "rename", abstract: "Rename a group.")
    @ParentCommand var parent: CtlGroup
    @Argument(help: "The group's name or id.") var group: String
    @Argument(help: "Its new name.") var name: String
    @Flag(help: "Print JSON.") var json = false
    func run() async throws { printGroups(try await parent.ctl.send(.groupRename(to: name), group: group), json: json) }
}

struct CtlGroupRemove: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "remove", abstract: "Remove a group; its rooms move to the default group.")
    @ParentCommand var parent: CtlGroup
    @Argument(help: "The group's name or id.") var group: String
    @Flag(help: "Print JSON.") var json = false
    func run() async throws { printGroups(try await parent.ctl.send(.groupRemove, group: group), json: json) }
}

struct CtlVolume: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "volume", abstract: "Set a room's volume (0–100), with a smooth ramp.")
    @ParentCommand var ctl: Ctl
    @Argument var room: String
    @Argument var percent: Int
    func validate() throws { guard (0...100).contains(percent) else { throw ValidationError("volume must be 0 to 100") } }
    func run() async throws { printReply(try await ctl.send(.volume(room: room, percent: percent)), json: false) }
}

struct CtlLatency: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "latency", abstract: "Set the delay a room compensates after its DAC (an amplifier, a soundbar), in ms.",
        discussion: "The room plays that much earlier, so that it is heard with the others. It replaces the speaker's --latency-ms and is kept across restarts. Example: tutti ctl latency living-room 80")
    @ParentCommand var ctl: Ctl
    @Argument var room: String
    @Argument var milliseconds: Double
    func validate() throws { guard milliseconds >= 0 && milliseconds <= 2000 else { throw ValidationError("latency must be 0 to 2000 ms") } }
    func run() async throws { printReply(try await ctl.send(.roomLatency(room: room, milliseconds: milliseconds)), json: false) }
}

struct CtlRename: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "rename", abstract: "Give a room another name; its volume, group and latency go with it.",
        discussion: "The house remembers it for the room's speaker, across restarts of either. Example: tutti ctl rename kitchen \"Kitchen left\"")
    @ParentCommand var ctl: Ctl
    @Argument var room: String
    @Argument(help: "The new name.") var name: String
    func run() async throws { printReply(try await ctl.send(.roomRename(room: room, to: name)), json: false) }
}

struct CtlChannel: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "channel", abstract: "Choose which of the music's channels a room plays: stereo, left, right or mono.",
        discussion: """
            stereo plays both (the default); left or right plays that channel on every output of the room's card (a \
            speaker at one side of a room); mono plays their mean, at half of each so that it cannot clip. For two \
            speakers as one stereo pair, use `tutti ctl pair`. Example: tutti ctl channel bathroom mono
            """)
    @ParentCommand var ctl: Ctl
    @Argument var room: String
    @Argument(help: "stereo, left, right or mono.") var channel: ChannelMode
    func run() async throws { printReply(try await ctl.send(.roomChannel(room: room, channel: channel)), json: false) }
}

extension ChannelMode: ExpressibleByArgument {}

struct CtlPair: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "pair", abstract: "Bind two rooms as one stereo pair: the first plays the left channel, the second the right.",
        discussion: """
            The pair is one room from then on, named by --as: one volume, one latency, one group, one MPD output and \
            one Snapcast client. Each half picks its channel from the stream it already receives, and the two play \
            within a sample of each other. `tutti ctl unpair NAME` gives back the two rooms. Example: \
            tutti ctl pair kitchen-left kitchen-right --as Kitchen
            """)
    @ParentCommand var ctl: Ctl
    @Argument(help: "The room that plays the left channel.") var left: String
    @Argument(help: "The room that plays the right channel.") var right: String
    @Option(name: .customLong("as"), help: ArgumentHelp("The pair's name.", valueName: "name")) var name: String
    func run() async throws { printReply(try await ctl.send(.pair(left: left, right: right, name: name)), json: false) }
}

struct CtlUnpair: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "unpair", abstract: "Unbind a stereo pair: its halves are two rooms again, each playing stereo.",
        discussion: "Example: tutti ctl unpair Kitchen")
    @ParentCommand var ctl: Ctl
    @Argument(help: "The pair's name (or id).") var room: String
    func run() async throws { printReply(try await ctl.send(.unpair(room: room)), json: false) }
}

struct CtlGroupVolume: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "group-volume", abstract: "Set the group's volume (0–100); its rooms keep their balance.",
        discussion: "The group's volume is the mean of its rooms'. Each room is scaled in proportion: kitchen 40 and office 80 (group 60) at group-volume 30 become 20 and 40.")
    @ParentCommand var ctl: Ctl
    @Argument var percent: Int
    func validate() throws { guard (0...100).contains(percent) else { throw ValidationError("group volume must be 0 to 100") } }
    func run() async throws {
        let reply = try await ctl.send(.groupVolume(percent: percent))
        guard let group = reply.group else { return }
        Terminal.standardOutput("group volume \(group.percent)%: " + group.rooms.map { "\($0.room) \($0.volume)%" }.joined(separator: ", ") + "\n")
    }
}

struct CtlQueue: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "queue", abstract: "Show or edit the queue.",
                                                    subcommands: [CtlQueueList.self, CtlQueueAdd.self, CtlQueueRemove.self, CtlQueueMove.self,
                                                                  CtlQueueClear.self, CtlQueueShuffle.self],
                                                    defaultSubcommand: CtlQueueList.self)
    @ParentCommand var ctl: Ctl
}

struct CtlQueueList: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "list", abstract: "List the queue.")
    @ParentCommand var queue: CtlQueue
    @Flag(help: "Print JSON.") var json = false
    func run() async throws {
        let reply = try await queue.ctl.send(.queue)
        if json { printReply(reply, json: true); return }
        for item in reply.queue?.items ?? [] {
            Terminal.standardOutput("\(item.current ? "▶" : " ") \(item.index)  \(item.title ?? item.path)\n")
        }
    }
}

struct CtlQueueAdd: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "add", abstract: "Insert a file; while playing, later audio is replaced seamlessly.")
    @ParentCommand var queue: CtlQueue
    @Argument var file: String
    @Option(help: "Queue position (default: the end).") var at: Int?
    func run() async throws {
        printReply(try await queue.ctl.send(.queueAdd(file: absolutePath(file), at: at)), json: false)
    }
}

struct CtlQueueRemove: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "remove", abstract: "Remove the item at a queue position.")
    @ParentCommand var queue: CtlQueue
    @Argument var index: Int
    func run() async throws { printReply(try await queue.ctl.send(.queueRemove(index: index)), json: false) }
}

struct CtlQueueMove: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "move", abstract: "Move a queue item to another position; while playing, later audio is replaced.",
        discussion: "Example: `tutti ctl queue move 4 1` plays item 4 right after item 0.")
    @ParentCommand var queue: CtlQueue
    @Argument(help: "The item's position now.") var from: Int
    @Argument(help: "Its new position.") var to: Int
    func run() async throws { printReply(try await queue.ctl.send(.queueMove(from: from, to: to)), json: false) }
}

struct CtlQueueClear: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "clear", abstract: "Empty the queue; every room stops on the same sample.")
    @ParentCommand var queue: CtlQueue
    func run() async throws { printReply(try await queue.ctl.send(.queueClear), json: false) }
}

struct CtlLibrary: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "library", abstract: "Search and browse the house's music library (tutti server --music DIR).",
        discussion: """
            Examples:
              tutti ctl library search beatles help        every word, as a prefix, in title, artist, album or path
              tutti ctl library browse                     artists
              tutti ctl library browse "The Beatles"       their albums
              tutti ctl library browse "The Beatles" Help! the album's tracks
              tutti ctl library problems                   files that could not be read, and why
            """,
        subcommands: [CtlLibrarySearch.self, CtlLibraryBrowse.self, CtlLibraryProblems.self])
    @ParentCommand var ctl: Ctl
}

/// Prints a library reply: JSON, or one line per artist, album, track or problem.
func printLibrary(_ reply: ControlReply, json: Bool) {
    if json { return printReply(reply, json: true) }
    guard let library = reply.library else { return }
    for name in library.artists ?? [] { Terminal.standardOutput((name.isEmpty ? "(no artist)" : name) + "\n") }
    for name in library.albums ?? [] { Terminal.standardOutput((name.isEmpty ? "(no album)" : name) + "\n") }
    for track in library.tracks ?? [] {
        let length = track.durationSeconds.map { String(format: "%d:%02d", Int($0) / 60, Int($0) % 60) } ?? "?:??"
        Terminal.standardOutput("\(track.artist ?? "?") – \(track.title ?? "?")  [\(track.album ?? "?"), \(length)]  \(track.path)\n")
    }
    for problem in library.problems ?? [] { Terminal.standardOutput("\(problem.path): \(problem.reason)\n") }
}

struct CtlLibrarySearch: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "search", abstract: "Tracks matching every word.")
    @ParentCommand var library: CtlLibrary
    @Argument(help: "Words to find in titles, artists, albums and paths.") var words: [String]
    @Option(help: "At most this many tracks (1–1000).") var limit = 100
    @Flag(help: "Print JSON.") var json = false
    func run() async throws {
        printLibrary(try await library.ctl.send(.librarySearch(query: words.joined(separator: " "), limit: limit)), json: json)
    }
}

struct CtlLibraryBrowse: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "browse", abstract: "Artists, an artist's albums, or an album's tracks.")
    @ParentCommand var library: CtlLibrary
    @Argument var artist: String?
    @Argument var album: String?
    @Flag(help: "Print JSON.") var json = false
    func run() async throws { printLibrary(try await library.ctl.send(.libraryBrowse(artist: artist, album: album)), json: json) }
}

struct CtlLibraryProblems: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "problems", abstract: "Files the library could not read, and why.")
    @ParentCommand var library: CtlLibrary
    @Flag(help: "Print JSON.") var json = false
    func run() async throws { printLibrary(try await library.ctl.send(.libraryProblems), json: json) }
}

struct CtlStatus: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "status", abstract: "What is playing, where, and in which rooms.")
    @ParentCommand var ctl: Ctl
    @Flag(help: "Print JSON for scripts.") var json = false
    func run() async throws { printReply(try await ctl.send(.status), json: json) }
}

struct CtlHouses: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "houses", abstract: "List the houses announced on the network (Avahi), to choose one with --house NAME.")
    @Flag(help: "Print JSON for scripts.") var json = false
    @Option(help: "How long to look, in seconds.") var timeout: Double = 2

    func validate() throws {
        guard timeout > 0, timeout <= 60 else { throw ValidationError("--timeout must be between 0 and 60 seconds") }
    }

    func run() async throws {
        let houses: [DiscoveredHouse]
        do { houses = try HouseBrowser.browse(timeoutSeconds: timeout) } catch {
            Terminal.standardError("tutti ctl: \(error)\n")
            throw ExitCode(2)
        }
        if json {
            let encoder = JSONEncoder()
            encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
            Terminal.standardOutput(String(decoding: try encoder.encode(houses), as: UTF8.self) + "\n")
            return
        }
        if houses.isEmpty { Terminal.standardOutput("no house announced on this network\n") }
        for house in houses {
            let web = house.httpPort.map { "  web UI http://\(house.host.contains(":") ? "[\(house.host)]" : house.host):\($0)/" } ?? ""
            let version = house.protocolVersion == Int(WireProtocol.version) ? "" : "  (protocol \(house.protocolVersion), this tutti \(WireProtocol.version))"
            Terminal.standardOutput("\(house.name)  \(house.address)\(house.isLocal ? "  (this machine)" : "")\(web)\(version)\n")
        }
    }
}
