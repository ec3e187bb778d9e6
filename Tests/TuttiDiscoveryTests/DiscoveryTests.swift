import Foundation
import Testing
import TuttiCore
import TuttiDiagnostics
import TuttiDiscovery
import TuttiProtocol
import TuttiSimulation
import TuttiTestSupport

/// Zero-config discovery for real: `tutti server` announces itself through a real avahi-daemon,
/// a `tutti speaker` and `tutti ctl` with no `--server` find it, and the room's virtual card
/// plays what ctl asked for.
///
/// The daemons run in a network namespace of their own beside a private D-Bus, set up by
/// `scripts/avahi-sandbox.sh` (`make test` runs this suite through it), so nothing here reaches
/// the machine's network or its Avahi.
@Suite(.serialized) struct DiscoveryTests {
    init() throws {
        guard ProcessInfo.processInfo.environment["TUTTI_AVAHI_SANDBOX"] == "1" else {
            throw TestFailure("DiscoveryTests need a private avahi-daemon: run them as `scripts/avahi-sandbox.sh swift test --filter DiscoveryTests` (make test does)")
        }
    }

    /// A command-line run of `tutti`, to its end: exit status, stdout and stderr.
    struct Run {
        var status: Int32
        var output: String
        var errors: String
    }

    /// `token`: the house's controller token, given as a user gives it, in `TUTTI_TOKEN`.
    func tutti(_ arguments: [String], in directory: TemporaryDirectory, token: ControllerToken? = nil, timeout: Double = 30) throws -> Run {
        let label = UUID().uuidString.prefix(8)
        let out = directory.file("run-\(label).out"), err = directory.file("run-\(label).err")
        _ = FileManager.default.createFile(atPath: out, contents: nil)
        _ = FileManager.default.createFile(atPath: err, contents: nil)
        let process = Process()
        process.executableURL = URL(fileURLWithPath: ChildProcess.tuttiExecutable)
        process.arguments = arguments
        if let token { process.environment = ProcessInfo.processInfo.environment.merging(["TUTTI_TOKEN": token.text]) { $1 } }
        process.standardOutput = FileHandle(forWritingAtPath: out)
        process.standardError = FileHandle(forWritingAtPath: err)
        try process.run()
        let deadline = Date().addingTimeInterval(timeout)
        while process.isRunning && Date() < deadline { usleep(10_000) }
        if process.isRunning { process.send(SIGKILL); process.waitUntilExit(); throw TestFailure("tutti \(arguments) did not end within \(timeout) s") }
        return Run(status: process.terminationStatus, output: (try? String(contentsOfFile: out, encoding: .utf8)) ?? "",
                   errors: (try? String(contentsOfFile: err, encoding: .utf8)) ?? "")
    }

    /// Waits (guarded) for a line containing `text` in a process's log file.
    func waitForLog(_ path: String, containing text: String, timeout: Double = 30) throws -> String {
        let deadline = Date().addingTimeInterval(timeout)
        while Date() < deadline {
            if let line = ((try? String(contentsOfFile: path, encoding: .utf8)) ?? "").split(separator: "\n").first(where: { $0.contains(text) }) {
                return String(line)
            }
            usleep(20_000)
        }
        throw TestFailure("\(path): no line containing \"\(text)\" within \(timeout) s")
    }

    /// A house on every address (so it is announced), with its HTTP API on a free port.
    func startHouse(named name: String, label: String? = nil, in directory: TemporaryDirectory, http: Bool = true)
        throws -> (process: ChildProcess, port: Int, log: String, token: ControllerToken) {
        let label = label ?? name
        let log = directory.file("house-\(label).log")
        let process = try ChildProcess(name: name, arguments: ["server", "--listen", "0.0.0.0:0", "--http", http ? "0.0.0.0:0" : "off",
                                                               "--name", name, "--state-dir", directory.file("state-\(label)")],
                                       standardError: log)
        let line = try process.waitForLine(containing: "listening on")
        let port = Int(line.split(separator: ":").last!.split(separator: " ").first!)!
        return (process, port, log, try ControllerTokenFile.read(ControllerTokenFile.path(in: directory.file("state-\(label)"))))
    }

    @Test(.timeLimit(.minutes(2)))
    func speakerAndCtlFindTheHouseAndPlay() async throws {
        let directory = try TemporaryDirectory("discovery")
        defer { directory.preserveLogs(as: "discovery"); directory.remove() }
        let music = directory.file("tone.flac")
        try TestMedia.ffmpeg(["-f", "lavfi", "-i", "sine=frequency=440:sample_rate=48000:duration=6", "-ac", "2", music])

        // The room starts first, as one often does: it waits for a house to appear.
        let speakerLog = directory.file("kitchen.log")
        let speaker = try ChildProcess(name: "kitchen", arguments: ["speaker", "--name", "kitchen", "--state-dir", directory.file("speaker-kitchen"),
                                                                    "--output", "virtual:" + directory.file("kitchen.wav")],
                                       standardError: speakerLog)
        defer { speaker.interrupt() }
        _ = try waitForLog(speakerLog, containing: "looking for a house on the network")
        let house = try startHouse(named: "Test House", in: directory)
        defer { house.process.interrupt() }
        let announced = try waitForLog(house.log, containing: "announced on the network as")
        #expect(announced.contains("'Test House' (_tutti._tcp port \(house.port), _http._tcp port"))
        _ = try speaker.waitForLine(containing: "server 10.77.0.1:\(house.port)")

        // ctl lists it, with what its TXT record says.
        let listed = try tutti(["ctl", "houses", "--json"], in: directory)
        #expect(listed.status == 0, "\(listed.errors)")
        let houses = try JSONDecoder().decode([DiscoveredHouse].self, from: Data(listed.output.utf8))
        #expect(houses.count == 1)
        #expect(houses.first?.name == "Test House" && houses.first?.port == house.port && houses.first?.host == "10.77.0.1")
        #expect(houses.first?.protocolVersion == Int(WireProtocol.version) && houses.first?.httpPort != nil && houses.first?.isLocal == true)

        // ctl without --server admits the speaker, which waits for it, sees its room, and plays to it.
        let admitted = try tutti(["ctl", "admit", "kitchen"], in: directory, token: house.token)
        #expect(admitted.status == 0 && admitted.output.hasPrefix("admitted kitchen (code "), "\(admitted.output) \(admitted.errors)")
        let deadline = Date().addingTimeInterval(30)
        while true {
            let rooms = try tutti(["ctl", "rooms", "--json"], in: directory, token: house.token)
            if rooms.output.contains("\"kitchen\"") { break }
            guard Date() < deadline else { throw TestFailure("the room never reached the house: \(rooms.output) \(rooms.errors)") }
            try await Task.sleep(nanoseconds: 100_000_000)
        }
        let play = try tutti(["ctl", "play", music, "--rooms", "kitchen", "--json"], in: directory, token: house.token)
        #expect(play.status == 0, "\(play.errors)")
        // Wait (guarded) until 3 s of the tone have been heard, by the house's account.
        let heardBy = Date().addingTimeInterval(30)
        while true {
            let status = try tutti(["ctl", "status", "--json"], in: directory, token: house.token)
            let object = try JSONSerialization.jsonObject(with: Data(status.output.utf8)) as? [String: Any]
            if let position = object?["positionSeconds"] as? Double, position > 3 { break }
            guard Date() < heardBy else { throw TestFailure("the house never got 3 s into the tone: \(status.output)") }
            try await Task.sleep(nanoseconds: 100_000_000)
        }
        speaker.interrupt()

        // The kitchen's card played the tone: ffmpeg's sine at amplitude 1/8, upmixed −3 dB a channel.
        let capture = try VirtualCapture(path: directory.file("kitchen.wav"))
        let first = try #require(capture.firstSoundFrame())
        let rms = SignalCheck.rms(capture.samples, channels: capture.channelCount, frames: (first + 4800)..<(first + 4800 + 48000))
        print("discovery: the room found the house at 10.77.0.1:\(house.port) through Avahi and played the tone at RMS \(rms)")
        #expect(abs(rms - 0.0625) < 0.002)
    }

    @Test(.timeLimit(.minutes(2)))
    func severalHousesAreListedAndChosenByName() async throws {
        let directory = try TemporaryDirectory("discovery-several")
        defer { directory.preserveLogs(as: "discovery-several"); directory.remove() }
        let attic = try startHouse(named: "Attic", in: directory, http: false)
        defer { attic.process.interrupt() }
        let cellar = try startHouse(named: "Cellar", in: directory)
        defer { cellar.process.interrupt() }
        // A second house that asks for a taken name gets Avahi's alternative.
        let twin = try startHouse(named: "Cellar", label: "twin", in: directory, http: false)
        defer { twin.process.interrupt() }
        _ = try waitForLog(attic.log, containing: "announced on the network as 'Attic'")
        _ = try waitForLog(cellar.log, containing: "announced on the network as 'Cellar'")
        let renamed = try waitForLog(twin.log, containing: "announced on the network as 'Cellar #2'")
        #expect(try waitForLog(twin.log, containing: "is taken").contains("the name 'Cellar' is taken on this network; announcing as 'Cellar #2'"))
        print("discovery: \(renamed)")

        let listed = try tutti(["ctl", "houses"], in: directory)
        print("discovery: tutti ctl houses:\n\(listed.output)")
        #expect(listed.output.split(separator: "\n").count == 3)
        #expect(listed.output.contains("Attic  10.77.0.1:\(attic.port)  (this machine)\n"))

        // Without --house, ctl and a speaker say which houses there are and how to choose.
        let ambiguous = try tutti(["ctl", "status"], in: directory)
        #expect(ambiguous.status == 2)
        #expect(ambiguous.errors == "tutti ctl: 3 houses on this network: 'Attic' at 10.77.0.1:\(attic.port), 'Cellar' at 10.77.0.1:\(cellar.port), 'Cellar #2' at 10.77.0.1:\(twin.port); choose one with --house NAME or --server HOST:PORT\n")
        let speaker = try tutti(["speaker", "--name", "den", "--state-dir", directory.file("speaker-den"), "--output", "null"], in: directory)
        #expect(speaker.status == 2)
        #expect(speaker.errors.contains("tutti speaker den: 3 houses on this network: 'Attic' at"), "\(speaker.errors)")

        // --house picks one: a queue edit made through it shows in that house, and only there.
        let music = directory.file("tone.flac")
        try TestMedia.ffmpeg(["-f", "lavfi", "-i", "sine=frequency=440:sample_rate=48000:duration=1", "-ac", "2", music])
        let added = try tutti(["ctl", "--house", "Cellar #2", "queue", "add", music], in: directory, token: twin.token)
        #expect(added.status == 0, "\(added.errors)")
        func queueLength(_ house: (process: ChildProcess, port: Int, log: String, token: ControllerToken)) throws -> Int? {
            let status = try tutti(["ctl", "--server", "127.0.0.1:\(house.port)", "status", "--json"], in: directory, token: house.token)
            return (try JSONSerialization.jsonObject(with: Data(status.output.utf8)) as? [String: Any])?["queueLength"] as? Int
        }
        #expect(try queueLength(twin) == 1)
        #expect(try queueLength(cellar) == 0 && queueLength(attic) == 0)
        // The token of one house does not open another.
        let crossed = try tutti(["ctl", "--house", "Cellar", "status"], in: directory, token: twin.token)
        #expect(crossed.status == 2 && crossed.errors.contains("the controller token does not match this house's"), "\(crossed.errors)")
        let unknown = try tutti(["ctl", "--house", "Garage", "status"], in: directory)
        #expect(unknown.status == 2 && unknown.errors.hasPrefix("tutti ctl: no house named 'Garage' on this network; found 'Attic' at"), "\(unknown.errors)")
    }
}

extension DiscoveryTests {
    /// avahi-daemon restarts (an upgrade, a crash) under a running house: the house says so,
    /// announces itself again, and is found again, with no restart of its own.
    @Test(.timeLimit(.minutes(2)))
    func houseIsAnnouncedAgainAfterAvahiRestarts() async throws {
        let directory = try TemporaryDirectory("discovery-restart")
        defer { directory.preserveLogs(as: "discovery-restart"); directory.remove() }
        let house = try startHouse(named: "Steady", in: directory, http: false)
        defer { house.process.interrupt() }
        _ = try waitForLog(house.log, containing: "announced on the network as 'Steady'")
        let sandbox = try #require(ProcessInfo.processInfo.environment["TUTTI_AVAHI_SANDBOX_PID"].flatMap { Int32($0) })
        ChildSignal.send(SIGUSR1, to: sandbox)
        _ = try waitForLog(house.log, containing: "avahi-daemon went away; announcing again when it returns")
        let deadline = Date().addingTimeInterval(30)
        while true {
            let announcements = ((try? String(contentsOfFile: house.log, encoding: .utf8)) ?? "").components(separatedBy: "announced on the network as 'Steady'").count - 1
            if announcements == 2 { break }
            guard Date() < deadline else { throw TestFailure("the house was not announced again after avahi-daemon restarted") }
            try await Task.sleep(nanoseconds: 50_000_000)
        }
        let listed = try tutti(["ctl", "houses", "--json"], in: directory)
        let houses = try JSONDecoder().decode([DiscoveredHouse].self, from: Data(listed.output.utf8))
        #expect(houses.map(\.name) == ["Steady"] && houses.first?.port == house.port, "\(listed.output) \(listed.errors)")
    }

    /// One `_raop._tcp` service as `avahi-browse -rpt` resolves it.
    struct RAOPService: Equatable {
        var name: String
        var port: Int
        var text: [String]
    }

    /// The AirPlay receivers the sandbox's avahi-daemon knows now, through its own client.
    func browseRAOP(in directory: TemporaryDirectory, type: String = "_raop._tcp") throws -> [RAOPService] {
        let output = String(decoding: try TestMedia.run("avahi-browse", ["-rpt", type], timeout: 20), as: UTF8.self)
        return output.split(separator: "\n").compactMap { line -> RAOPService? in
            let fields = line.split(separator: ";", omittingEmptySubsequences: false)
            guard fields.first == "=", fields.count >= 10, let port = Int(fields[8]) else { return nil }
            // avahi-browse -p writes a name's unsafe characters as \DDD (decimal): '@' is \064.
            var name = "", rest = Substring(fields[3])
            while let slash = rest.firstIndex(of: "\\") {
                name += rest[..<slash]
                let digits = rest[rest.index(after: slash)...].prefix(3)
                if digits.count == 3, let code = UInt8(digits) { name.append(Character(Unicode.Scalar(code))) }
                rest = rest[rest.index(slash, offsetBy: 1 + digits.count)...]
            }
            name += rest
            let text = fields[9...].joined(separator: ";").split(separator: "\"").filter { !$0.trimmingCharacters(in: .whitespaces).isEmpty }.map(String.init)
            return RAOPService(name: name, port: port, text: text)
        }
    }

    /// Waits (guarded) until the AirPlay receivers browsed satisfy `condition`.
    func waitForRAOP(in directory: TemporaryDirectory, type: String = "_raop._tcp", _ what: String, _ condition: ([RAOPService]) -> Bool) async throws -> [RAOPService] {
        let deadline = Date().addingTimeInterval(30)
        while true {
            let services = try browseRAOP(in: directory, type: type)
            if condition(services) { return services }
            guard Date() < deadline else { throw TestFailure("\(what): avahi-browse found \(services)") }
            try await Task.sleep(nanoseconds: 100_000_000)
        }
    }

    /// Each group's AirPlay receiver is announced as `_raop._tcp` (and `_airplay._tcp`), found by Avahi's own browser:
    /// the default group's under the house's name, a group made later under its own, with the
    /// port `groups` gives and the TXT a sender reads; a removed group's is withdrawn.
    @Test(.timeLimit(.minutes(2)))
    func eachGroupsAirPlayReceiverIsAnnounced() async throws {
        let directory = try TemporaryDirectory("discovery-airplay")
        defer { directory.preserveLogs(as: "discovery-airplay"); directory.remove() }
        let house = try startHouse(named: "Airy", in: directory, http: false)
        defer { house.process.interrupt() }
        let line = try house.process.waitForLine(containing: "AirPlay senders on")
        let port = try #require(line.components(separatedBy: "AirPlay senders on ").last?.split(separator: " ").first?.split(separator: ":").last.flatMap { Int($0) }, "\(line)")
        let first = try await waitForRAOP(in: directory, "the default group's receiver") { $0.contains { $0.name.hasSuffix("@Airy") && $0.port == port } }
        let airy = try #require(first.first { $0.name.hasSuffix("@Airy") })
        #expect(airy.name.prefix(while: { $0 != "@" }).allSatisfy(\.isHexDigit) && airy.name.prefix(while: { $0 != "@" }).count == 12, "\(airy.name)")
        // With AirPlay 2's features (unified media control, CoreUtils pairing), as pyatv reads them.
        for entry in ["et=0", "cn=0,1", "tp=UDP", "sr=44100", "ss=16", "ch=2", "pw=false", "md=0,1,2", "ft=0x400F8200,0x10040"] {
            #expect(airy.text.contains(entry), "\(entry) not in \(airy.text)")
        }
        // And as AirPlay 2's own service, on the same port, under the group's name.
        let airPlay2 = try await waitForRAOP(in: directory, type: "_airplay._tcp", "the default group's AirPlay 2 service") { $0.contains { $0.name == "Airy" && $0.port == port } }
        let service = try #require(airPlay2.first { $0.name == "Airy" })
        #expect(service.text.contains("features=0x400F8200,0x10040") && service.text.contains("acl=0") && service.text.contains { $0.hasPrefix("deviceid=") }
                && service.text.contains { $0.hasPrefix("pk=") && $0.count == 3 + 64 }, "\(service.text)")

        let server = ["--server", "127.0.0.1:\(house.port)"]
        let made = try tutti(["ctl"] + server + ["group", "create", "Kitchen"], in: directory, token: house.token)
        #expect(made.status == 0, "\(made.errors)")
        var kitchenPort: Int?
        let deadline = Date().addingTimeInterval(10)
        while kitchenPort == nil, Date() < deadline {
            let groups = try tutti(["ctl"] + server + ["groups", "--json"], in: directory, token: house.token)
            kitchenPort = try JSONDecoder().decode(GroupsReport.self, from: Data(groups.output.utf8))["Kitchen"]?.airplay
                .flatMap { $0.split(separator: ":").last.flatMap { Int($0) } }
            if kitchenPort == nil { try await Task.sleep(nanoseconds: 50_000_000) }
        }
        let kitchen = try #require(kitchenPort, "the Kitchen group has no AirPlay address in groups --json")
        #expect(kitchen != port)
        let both = try await waitForRAOP(in: directory, "the Kitchen group's receiver") { $0.contains { $0.name.hasSuffix("@Kitchen") && $0.port == kitchen } }
        // Two receivers, two device ids: a sender tells them apart.
        let ids = Set(both.map { $0.name.prefix(while: { $0 != "@" }) })
        #expect(ids.count == 2, "\(both)")

        let removed = try tutti(["ctl"] + server + ["group", "remove", "Kitchen"], in: directory, token: house.token)
        #expect(removed.status == 0, "\(removed.errors)")
        _ = try await waitForRAOP(in: directory, "the removed group's receiver withdrawn") { services in
            !services.contains { $0.name.hasSuffix("@Kitchen") } && services.contains { $0.name.hasSuffix("@Airy") }
        }
    }
}

