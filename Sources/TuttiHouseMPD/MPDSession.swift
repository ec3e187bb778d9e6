import NIOCore
import TuttiHouse

/// One MPD client's connection: the greeting, then each line as it comes, command lists, and
/// `idle`, which answers when the house changes in one of the subsystems asked for.
///
/// A malformed line or a refused command gets MPD's `ACK` line and the connection goes on; a
/// line too long, or anything but `noidle` while idle, closes it, as MPD does.
struct MPDSession {
    let house: House
    let configuration: MPDServer.Configuration
    var commands: MPDCommands
    /// Idle subsystems the commands raised themselves, not yet in `pending`.
    var pendingRaised = Set<String>()

    init(house: House, uris: MPDSongURIs, playlistVersion: MPDPlaylistVersion, partitionClients: MPDPartitionClients, updateJobs: MPDUpdateJobs,
         configuration: MPDServer.Configuration = MPDServer.Configuration()) {
        self.house = house
        self.configuration = configuration
        commands = MPDCommands(house: house, uris: uris, playlistVersion: playlistVersion, partitionClients: partitionClients, updateJobs: updateJobs)
    }

    /// The protocol version this server speaks (what MPD 0.23 says).
    static let greeting = "OK MPD 0.23.5\n"

    mutating func run(_ connection: NIOAsyncChannel<ByteBuffer, ByteBuffer>) async {
        // What only time changes (the next item starting) raises no change: look again.
        let peer = connection.channel.remoteAddress
        commands.passwords = configuration.passwords
        commands.permissions = MPDPermissions.initial(for: peer, local: connection.channel.localAddress, defaultPermissions: configuration.defaultPermissions)
        let who = "an MPD client at \(peer.map { "\($0)" } ?? "an unknown address")"
        await house.serveLines(connection, who: who, limits: configuration.limits, lookAgain: .milliseconds(500)) { events, outbound in
            // The first look before the greeting: a change the client makes or sees after it
            // is one its idle hears.
            let first = await commands.snapshot()
            try await outbound.write(ByteBuffer(string: Self.greeting))
            try await serve(events, outbound, from: first, who: who)
        }
        // Gone: its partition no longer has this client.
        commands.partition = nil
    }

    private mutating func serve(_ events: FrontEndEvents, _ outbound: NIOAsyncChannelOutboundWriter<ByteBuffer>,
                                from first: MPDSnapshot?, who: String) async throws {
        var last = first
        // When the client last sent a line: one silent past `connectionTimeout`, and not in
        // idle, is closed, as MPD does (MPD writes nothing before closing).
        let clock = ContinuousClock()
        var lastHeard = clock.now
        var pending = Set<String>()
        var idleFor: Set<String>?
        var list: [MPDRequest]?
        var listOK = false
        // A list refused for its length: its lines up to its end are dropped unanswered.
        var overflowed = false
        for await event in events {
            switch event {
            case .closed:
                return
            case .changed:
                if idleFor == nil && clock.now - lastHeard > configuration.connectionTimeout {
                    house.note("\(who) closed: silent for over \(configuration.connectionTimeout.components.seconds) s (the --mpd-timeout limit)")
                    return
                }
                guard let now = await commands.snapshot() else { continue }
                if let last { pending.formUnion(last.changes(to: now)) }
                last = now
                if let wanted = idleFor {
                    let hit = pending.intersection(wanted)
                    guard !hit.isEmpty else { continue }
                    try await outbound.write(ByteBuffer(string: hit.sorted().map { "changed: \($0)\n" }.joined() + "OK\n"))
                    pending.subtract(hit)
                    idleFor = nil
                }
            case .line(let buffer):
                lastHeard = clock.now
                var line = String(decoding: buffer.readableBytesView, as: UTF8.self)
                if line.hasSuffix("\r") { line.removeLast() }
                if idleFor != nil {
                    // Only noidle may interrupt idle; anything else ends the connection.
                    guard line == "noidle" else { return }
                    idleFor = nil
                    try await outbound.write(ByteBuffer(string: "OK\n"))
                    continue
                }
                if overflowed {
                    if line == "command_list_end" { overflowed = false }
                    continue
                }
                let request: MPDRequest
                do { request = try MPDRequest.parse(line) } catch {
                    try await outbound.write(ByteBuffer(string: error.line(command: "", index: 0)))
                    continue
                }
                if var pendingList = list {
                    if request.name != "command_list_end" && pendingList.count >= configuration.maximumCommandListLength {
                        // Refused whole, and its remaining lines with it: they are its commands, not commands of their own.
                        list = nil
                        overflowed = true
                        let reason = "command list too long: over \(configuration.maximumCommandListLength) commands (the --mpd-max-command-list limit)"
                        try await outbound.write(ByteBuffer(string: MPDError(.argument, reason).line(command: "command_list_begin", index: 0)))
                        continue
                    }
                    if request.name == "command_list_end" {
                        list = nil
                        let partition = commands.partition
                        try await runList(pendingList, verbose: listOK, outbound)
                        if commands.partition != partition { last = await commands.snapshot() }
                    } else {
                        pendingList.append(request)
                        list = pendingList
                    }
                    continue
                }
                switch request.name {
                case "command_list_begin", "command_list_ok_begin":
                    list = []
                    listOK = request.name == "command_list_ok_begin"
                case "command_list_end":
                    try await outbound.write(ByteBuffer(string: MPDError(.notList, "not in command list mode").line(command: "command_list_end", index: 0)))
                case "close":
                    return
                case "idle":
                    do throws(MPDError) { try commands.checkPermission(for: "idle") } catch {
                        try await outbound.write(ByteBuffer(string: error.line(command: "idle", index: 0)))
                        continue
                    }
                    let wanted = request.arguments.isEmpty ? MPDSnapshot.subsystems : Set(request.arguments.map { $0.lowercased() })
                    if let unknown = wanted.first(where: { !MPDSnapshot.subsystems.contains($0) }) {
                        try await outbound.write(ByteBuffer(string: MPDError(.argument, "Unrecognized idle event: \(unknown)").line(command: "idle", index: 0)))
                        continue
                    }
                    pending.formUnion(pendingRaised)
                    pendingRaised = []
                    let hit = pending.intersection(wanted)
                    if hit.isEmpty {
                        idleFor = wanted
                    } else {
                        try await outbound.write(ByteBuffer(string: hit.sorted().map { "changed: \($0)\n" }.joined() + "OK\n"))
                        pending.subtract(hit)
                    }
                case "noidle":
                    // Not idle: the idle's answer crossed this noidle on the wire, and the
                    // client reads that answer as the noidle's. Another reply would shift every
                    // later one by a command (ncmpcpp then loops, showing nothing). MPD ignores it too.
                    continue
                default:
                    let partition = commands.partition
                    try await runList([request], verbose: false, outbound)
                    if commands.partition != partition { last = await commands.snapshot() }
                }
            }
        }
    }

    /// Runs commands in order, stopping at the first refused; `list_OK` after each if `verbose`.
    private mutating func runList(_ requests: [MPDRequest], verbose: Bool, _ outbound: NIOAsyncChannelOutboundWriter<ByteBuffer>) async throws {
        var reply = ByteBuffer()
        for (index, request) in requests.enumerated() {
            do throws(MPDError) {
                if ["idle", "noidle", "close", "command_list_begin", "command_list_ok_begin"].contains(request.name) {
                    throw MPDError(.argument, "\(request.name) is not allowed in a command list")
                }
                let response = try await commands.run(request)
                pendingRaised.formUnion(commands.raised)
                commands.raised = []
                reply.writeString(response.text)
                if let binary = response.binary {
                    reply.writeBytes(binary)
                    reply.writeString("\n")
                }
                if verbose { reply.writeString("list_OK\n") }
            } catch {
                reply.writeString(error.line(command: error.namesCommand ? request.name : "", index: index))
                try await outbound.write(reply)
                return
            }
        }
        reply.writeString("OK\n")
        try await outbound.write(reply)
    }
}
