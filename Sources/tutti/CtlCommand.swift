import ArgumentParser
import Foundation
import NIOCore
import NIOPosix
import TuttiNet

struct Ctl: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "ctl",
        abstract: "Control a running house: play, pause, rooms, volume, queue.",
        discussion: """
            Examples:
              tutti ctl --server 127.0.0.1:7700 play a.flac b.mp3 --rooms kitchen,office
              tutti ctl --server 127.0.0.1:7700 rooms
              tutti ctl --server 127.0.0.1:7700 volume kitchen 40
              tutti ctl --server 127.0.0.1:7700 queue add c.ogg --at 1
              tutti ctl --server 127.0.0.1:7700 status --json
            """,
        subcommands: [CtlPlay.self, CtlPause.self, CtlResume.self, CtlSeek.self, CtlNext.self, CtlRooms.self,
                      CtlJoin.self, CtlLeave.self, CtlVolume.self, CtlQueue.self, CtlStatus.self])

    @Option(help: "The house server's address.")
    var server: HostPort = HostPort(argument: "127.0.0.1:7700")!

    /// Sends a command; prints the refusal and exits 1 if the house refuses it.
    func send(_ request: [String: Any]) async throws -> [String: Any] {
        let json = String(decoding: try JSONSerialization.data(withJSONObject: request, options: [.sortedKeys]), as: UTF8.self)
        let group = MultiThreadedEventLoopGroup.singleton
        let reply: (ok: Bool, json: String)
        do { reply = try await ControlClient.send(json, host: server.host, port: server.port, group: group) } catch {
            Terminal.standardError("tutti ctl: \(error)\n")
            throw ExitCode(2)
        }
        let object = (try? JSONSerialization.jsonObject(with: Data(reply.json.utf8)) as? [String: Any]) ?? [:]
        if !reply.ok {
            Terminal.standardError("tutti ctl: \(object["error"] as? String ?? reply.json)\n")
            throw ExitCode(1)
        }
        return object
    }
}

/// Prints a reply: JSON for scripts, else `key: value` lines.
func printReply(_ object: [String: Any], json: Bool) {
    if json {
        let data = (try? JSONSerialization.data(withJSONObject: object, options: [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes])) ?? Data()
        Terminal.standardOutput(String(decoding: data, as: UTF8.self) + "\n")
        return
    }
    for key in object.keys.sorted() where !(object[key] is [Any]) {
        Terminal.standardOutput("\(key): \(format(object[key]!))\n")
    }
}

func format(_ value: Any) -> String {
    if let d = value as? Double { return String(format: d.rounded() == d && abs(d) < 1e15 ? "%.0f" : "%.3f", d) }
    return "\(value)"
}

func absolutePath(_ path: String) -> String {
    if path.hasPrefix("/") || path.contains("://") { return path }
    return FileManager.default.currentDirectoryPath + "/" + path
}

struct CtlPlay: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "play", abstract: "Replace the queue and play it in the given rooms (default: all).")
    @ParentCommand var ctl: Ctl
    @Argument(help: "Files to play, in order (paths as seen by the server; relative ones are made absolute).") var files: [String]
    @Option(help: "Comma-separated rooms, e.g. kitchen,office.") var rooms: String?
    @Flag(help: "Print the reply as JSON.") var json = false

    func run() async throws {
        var request: [String: Any] = ["command": "play", "files": files.map(absolutePath)]
        if let rooms { request["rooms"] = rooms.split(separator: ",").map { String($0).trimmingCharacters(in: .whitespaces) } }
        printReply(try await ctl.send(request), json: json)
    }
}

struct CtlPause: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "pause", abstract: "Pause every room on the same sample.")
    @ParentCommand var ctl: Ctl
    func run() async throws { printReply(try await ctl.send(["command": "pause"]), json: false) }
}

struct CtlResume: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "resume", abstract: "Resume every room together.")
    @ParentCommand var ctl: Ctl
    func run() async throws { printReply(try await ctl.send(["command": "resume"]), json: false) }
}

struct CtlSeek: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "seek", abstract: "Jump to a position in the playing item.")
    @ParentCommand var ctl: Ctl
    @Argument(help: "Seconds from the start of the playing item.") var seconds: Double
    func run() async throws { printReply(try await ctl.send(["command": "seek", "seconds": seconds]), json: false) }
}

struct CtlNext: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "next", abstract: "Skip to the next queue item.")
    @ParentCommand var ctl: Ctl
    func run() async throws { printReply(try await ctl.send(["command": "next"]), json: false) }
}

struct CtlRooms: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "rooms", abstract: "List rooms: state, buffer level and sync-error estimate.")
    @ParentCommand var ctl: Ctl
    @Flag(help: "Print JSON.") var json = false
    func run() async throws {
        let reply = try await ctl.send(["command": "rooms"])
        if json { printReply(reply, json: true); return }
        let rooms = reply["rooms"] as? [[String: Any]] ?? []
        if rooms.isEmpty { Terminal.standardOutput("no rooms connected\n") }
        for room in rooms {
            let name = room["name"] as? String ?? "?"
            let state = room["state"] as? String ?? "?"
            let buffer = room["bufferSeconds"] as? Double ?? 0
            let sync = room["syncErrorMicroseconds"] as? Double ?? 0
            let clockError = room["clockErrorMicroseconds"] as? Double ?? 0
            let group = (room["inGroup"] as? Bool ?? false) ? "" : "  (not in group)"
            Terminal.standardOutput(String(format: "%-12@ %-10@ buffer %6.1f s  sync %+8.1f µs  clock ±%.1f µs  volume %d%%%@\n",
                                           name as NSString, state as NSString, buffer, sync, clockError, room["volume"] as? Int ?? 100, group as NSString))
        }
    }
}

struct CtlJoin: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "join", abstract: "Add a room to the playing group; it starts in sync.")
    @ParentCommand var ctl: Ctl
    @Argument var room: String
    func run() async throws { printReply(try await ctl.send(["command": "join", "room": room]), json: false) }
}

struct CtlLeave: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "leave", abstract: "Remove a room from the playing group.")
    @ParentCommand var ctl: Ctl
    @Argument var room: String
    func run() async throws { printReply(try await ctl.send(["command": "leave", "room": room]), json: false) }
}

struct CtlVolume: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "volume", abstract: "Set a room's volume (0–100), with a smooth ramp.")
    @ParentCommand var ctl: Ctl
    @Argument var room: String
    @Argument var percent: Int
    func validate() throws { guard (0...100).contains(percent) else { throw ValidationError("volume must be 0 to 100") } }
    func run() async throws { printReply(try await ctl.send(["command": "volume", "room": room, "percent": percent]), json: false) }
}

struct CtlQueue: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "queue", abstract: "Show or edit the queue.",
                                                    subcommands: [CtlQueueList.self, CtlQueueAdd.self, CtlQueueRemove.self, CtlQueueMove.self],
                                                    defaultSubcommand: CtlQueueList.self)
    @ParentCommand var ctl: Ctl
}

struct CtlQueueList: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "list", abstract: "List the queue.")
    @ParentCommand var queue: CtlQueue
    @Flag(help: "Print JSON.") var json = false
    func run() async throws {
        let reply = try await queue.ctl.send(["command": "queue"])
        if json { printReply(reply, json: true); return }
        for item in reply["items"] as? [[String: Any]] ?? [] {
            let marker = (item["current"] as? Bool ?? false) ? "▶" : " "
            Terminal.standardOutput("\(marker) \(item["index"] as? Int ?? 0)  \(item["title"] as? String ?? item["path"] as? String ?? "?")\n")
        }
    }
}

struct CtlQueueAdd: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "add", abstract: "Insert a file; while playing, later audio is replaced seamlessly.")
    @ParentCommand var queue: CtlQueue
    @Argument var file: String
    @Option(help: "Queue position (default: the end).") var at: Int?
    func run() async throws {
        var request: [String: Any] = ["command": "queue-add", "file": absolutePath(file)]
        if let at { request["at"] = at }
        printReply(try await queue.ctl.send(request), json: false)
    }
}

struct CtlQueueRemove: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "remove", abstract: "Remove the item at a queue position.")
    @ParentCommand var queue: CtlQueue
    @Argument var index: Int
    func run() async throws { printReply(try await queue.ctl.send(["command": "queue-remove", "index": index]), json: false) }
}

struct CtlQueueMove: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "move", abstract: "Move a queue item to another position; while playing, later audio is replaced.",
        discussion: "Example: `tutti ctl queue move 4 1` plays item 4 right after item 0.")
    @ParentCommand var queue: CtlQueue
    @Argument(help: "The item's position now.") var from: Int
    @Argument(help: "Its new position.") var to: Int
    func run() async throws { printReply(try await queue.ctl.send(["command": "queue-move", "from": from, "to": to]), json: false) }
}

struct CtlStatus: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "status", abstract: "What is playing, where, and in which rooms.")
    @ParentCommand var ctl: Ctl
    @Flag(help: "Print JSON for scripts.") var json = false
    func run() async throws { printReply(try await ctl.send(["command": "status"]), json: json) }
}
