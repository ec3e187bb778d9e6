import Foundation
import NIOPosix
import Testing
import TuttiCore
import TuttiDiagnostics
import TuttiProtocol
import TuttiSimulation
import TuttiTestSupport

/// Snapcast's control API for real: Home Assistant's Snapcast library (PyPI `snapcast`) drives a
/// real `tutti server` with two speakers on virtual cards and Debian's snapclient on an ALSA
/// virtual card, listed alike. The volume it sets is what room a's card then plays at; rooms
/// leave and rejoin the group; a change made by another controller reaches it as
/// Server.OnUpdate; a muted group falls silent on every card; the snapclient moved out of the
/// group falls silent while the others play on; and bad JSON-RPC gets JSON-RPC errors.
@Suite(.serialized) struct SnapcastControlTests {
    struct TestFailure: Error, CustomStringConvertible {
        var description: String
        init(_ description: String) { self.description = description }
    }

    @Test(.timeLimit(.minutes(2)))
    func homeAssistantsLibraryControlsTheHouse() async throws {
        let directory = try TemporaryDirectory("snapcast-control")
        defer { directory.preserveLogs(as: "snapcast-control"); directory.remove() }
        let music = directory.file("tone.flac")
        try TestMedia.ffmpeg(["-f", "lavfi", "-i", "sine=frequency=440:sample_rate=48000:duration=60", "-ac", "2", music])
        let alsa = try ALSAVirtualCard.configure([.init(name: "snapcard", path: directory.file("snap1.wav"), ppm: 0)], in: directory)
        let server = try ChildProcess(name: "server", arguments: ["server", "--listen", "127.0.0.1:0", "--http", "off", "--mpd", "off",
                                                                  "--snapcast-control", "127.0.0.1:0", "--snapcast", "127.0.0.1:0"],
                                      standardError: directory.file("server.log"))
        defer { server.interrupt() }
        let port = Int(try server.waitForLine(containing: "listening on").split(separator: ":").last!.split(separator: " ").first!)!
        let snapcastLine = try server.waitForLine(containing: "snapclients on")
        let snapcastPort = String(snapcastLine.split(separator: " ")[4].split(separator: ":").last!)
        let controlLine = try server.waitForLine(containing: "Snapcast controllers on")
        let controlPort = Int(controlLine.split(separator: ":")[2].prefix { $0.isNumber })!
        let snapclient = try Snapclient.start(hostID: "snap1", port: snapcastPort, card: "snapcard", alsa: alsa, log: directory.file("snapclient.log"))
        defer { _ = Snapclient.stop(snapclient) }
        var speakers: [ChildProcess] = []
        defer { for speaker in speakers { speaker.interrupt() } }
        for name in ["a", "b"] {
            speakers.append(try ChildProcess(name: name, arguments: ["speaker", "--server", "127.0.0.1:\(port)", "--name", name, "--state-dir", directory.file("speaker-\(name)"),
                                                                     "--output", "virtual:" + directory.file("\(name).wav")],
                                             standardError: directory.file("\(name).log")))
        }
        let token = try ControllerTokenFile.readDefault()
        func send(_ command: ControlCommand) async throws -> ControlReply {
            try await ControlClient.send(command, host: "127.0.0.1", port: port, token: token, group: MultiThreadedEventLoopGroup.singleton)
        }
        let deadline = Date().addingTimeInterval(30)
        while true {
            // The snapclient's room waits to be admitted like any speaker.
            let report = try await HouseControlPort.admitWaiting(port: port, token: token)
            if report.rooms.count == 3, report.rooms.allSatisfy(\.hasSettledClock) { break }
            guard Date() < deadline else { throw TestFailure("rooms did not connect") }
            try await Task.sleep(nanoseconds: 100_000_000)
        }
        _ = try await send(.play(files: [music], rooms: nil))
        while true {
            if case .status(let status) = try await send(.status), (status.positionSeconds ?? 0) > 1.5 { break }
            try await Task.sleep(nanoseconds: 50_000_000)
        }

        let script = PythonScript.path("snapcast_controller.py")
        let controller = try ChildProcess(name: "snapcast", executable: "/usr/bin/env", arguments: ["python3", script, "\(controlPort)"],
                                          standardError: directory.file("snapcast.log"))
        _ = try controller.waitForLine(containing: "\"waiting\"", timeout: 30)
        _ = try await send(.volume(room: "b", percent: 70))
        let status = await controller.exit(within: 60)
        let steps = controller.outputLines.compactMap { (try? JSONSerialization.jsonObject(with: Data($0.utf8))) as? [String: Any] }
        for step in steps { print("Snapcast: \(step)") }
        #expect(status == 0, "see out/test-logs/snapcast-control/snapcast.log")
        func step(_ name: String) -> [String: Any]? { steps.first { $0["step"] as? String == name } }
        let connected = try #require(step("connected"))
        #expect(connected["clients"] as? [String] == ["a", "b", "snap1"] && connected["version"] as? String == "0.26.0")
        #expect((connected["groups"] as? [String: [String]])?["default"] == ["a", "b", "snap1"])
        #expect(step("set")?["volume"] as? Int == 40 && step("set")?["latency"] as? Int == 25)
        #expect((step("removed")?["groups"] as? [String: [String]]) == ["default": ["a", "snap1"], "b": ["b"]])
        #expect((step("added")?["groups"] as? [String: [String]]) == ["default": ["a", "b", "snap1"]])
        #expect(step("updated")?["b"] as? Int == 70)
        #expect((step("muted")?["volumes"] as? [String: Int]) == ["a": 0, "b": 0, "snap1": 0])
        #expect((step("unmuted")?["volumes"] as? [String: Int]) == ["a": 40, "b": 70, "snap1": 100])
        #expect((step("moved")?["groups"] as? [String: [String]]) == ["default": ["a", "b"], "snap1": ["snap1"]])
        #expect((step("back")?["groups"] as? [String: [String]]) == ["default": ["a", "b", "snap1"]])

        // The house did what the library asked: a at 40 with 25 ms latency, b back in the group.
        guard case .rooms(let report) = try await send(.rooms) else { throw TestFailure("no rooms") }
        let a = report.rooms.first { $0.name == "a" }, b = report.rooms.first { $0.name == "b" }
        #expect(a?.volume == 40 && a?.latencyMs == 25 && b?.group == "default" && b?.volume == 70)

        // Bad requests get JSON-RPC errors, and the connection goes on.
        let socket = try Socket(port: controlPort)
        #expect(try socket.exchange("{oops").contains("\"code\":-32700"))
        #expect(try socket.exchange(#"{"id":1,"jsonrpc":"2.0","method":"Client.SetVolume","params":{"id":"999","volume":{"percent":10}}}"#).contains("-32602"))
        #expect(try socket.exchange(#"{"id":2,"jsonrpc":"2.0","method":"Client.SetLatency","params":{"id":"1","latency":"soon"}}"#).contains("-32602"))
        #expect(try socket.exchange(#"{"id":3,"jsonrpc":"2.0","method":"Server.GetRPCVersion"}"#).contains("\"major\":2"))
        // A second and a half more of the rooms, at their new volumes.
        guard case .status(let now) = try await send(.status) else { throw TestFailure("no status") }
        while true {
            if case .status(let status) = try await send(.status), (status.positionSeconds ?? 0) > (now.positionSeconds ?? 0) + 1.5 { break }
            try await Task.sleep(nanoseconds: 50_000_000)
        }
        for speaker in speakers { speaker.interrupt() }
        _ = Snapclient.stop(snapclient)

        // Each card half a second from 1.2 s after a step (the rooms apply a volume or a move a
        // few hundred ms ahead of what they play): muted, every card is silent; unmuted, each
        // plays at its volume again; snap1 moved out is silent while a plays on, and back, plays.
        let cards = try ["a", "b", "snap1"].reduce(into: [String: VirtualCapture]()) { $0[$1] = try VirtualCapture(path: directory.file("\($1).wav")) }
        func level(_ room: String, after stepName: String) throws -> Double {
            let card = cards[room]!
            let time = try #require(step(stepName)?["mono_ns"] as? NSNumber).doubleValue + 1.2e9
            // snapclient stops writing to its card when it has no audio: the card runs dry and
            // is silent, as a real one is.
            if card.isStopped(atEmissionTime: time) && card.isStopped(atEmissionTime: time + 0.5e9) { return 0 }
            let start = Int(card.frame(atEmissionTime: time))
            return SignalCheck.rms(card.samples, channels: 2, frames: start..<min(card.frameCount, start + 24000))
        }
        var levels: [String: Double] = [:]
        for room in ["a", "b", "snap1"] {
            for stepName in ["muted", "unmuted", "moved", "back"] { levels["\(room) \(stepName)"] = try level(room, after: stepName) }
        }
        // When snap1's card fell silent after the move, and became audible again after it came back.
        let snap1 = cards["snap1"]!
        func onset(after stepName: String, silent: Bool) throws -> Double? {
            let time = try #require(step(stepName)?["mono_ns"] as? NSNumber).doubleValue
            var frame = Int(snap1.frame(atEmissionTime: time))
            if silent && snap1.isStopped(atEmissionTime: time) { return 0 }
            while frame + 480 < snap1.frameCount {
                let at = snap1.emissionTime(ofFrame: Double(frame))
                let quiet = SignalCheck.rms(snap1.samples, channels: 2, frames: frame..<(frame + 480)) < 1e-4
                    || (silent && snap1.isStopped(atEmissionTime: at + 480 / 48000 * 1e9 + 1))
                if quiet == silent { return (snap1.emissionTime(ofFrame: Double(frame)) - time) / 1e6 }
                frame += 480
            }
            return nil
        }
        print("Snapcast: snap1 silent \(try onset(after: "moved", silent: true).map { String(format: "%.0f", $0) } ?? "never") ms after the move, audible \(try onset(after: "back", silent: false).map { String(format: "%.0f", $0) } ?? "never") ms after it came back")
        print("Snapcast: card levels \(levels.sorted { $0.key < $1.key }.map { "\($0.key) \(String(format: "%.5f", $0.value))" }.joined(separator: ", "))")
        let full = 0.0625
        for room in ["a", "b", "snap1"] { #expect(levels["\(room) muted"]! < 1e-4, "\(room) muted") }
        #expect(abs(levels["a unmuted"]! / full - pow(10, -36.0 / 20)) < 0.001 && abs(levels["b unmuted"]! / full - pow(10, -18.0 / 20)) < 0.001)
        #expect(abs(levels["snap1 unmuted"]! - full) < 0.002)
        #expect(levels["snap1 moved"]! < 1e-4 && abs(levels["a moved"]! / full - pow(10, -36.0 / 20)) < 0.001)
        #expect(abs(levels["snap1 back"]! - full) < 0.002)

        // Room a's card: the tone at full level, then at 40 % (−36 dB on the house's 60 dB scale).
        let capture = try VirtualCapture(path: directory.file("a.wav"))
        let first = try #require(capture.firstSoundFrame())
        let before = SignalCheck.rms(capture.samples, channels: 2, frames: (first + 12000)..<(first + 36000))
        let end = capture.frameCount
        let after = SignalCheck.rms(capture.samples, channels: 2, frames: (end - 36000)..<(end - 12000))
        print("Snapcast: room a's card RMS \(before) before, \(after) at the end (ratio \(after / before), expected \(pow(10, -36.0 / 20)))")
        #expect(abs(after / before - pow(10, -36.0 / 20)) < 0.001)
    }
}

/// A blocking line-oriented TCP client for a few requests.
struct Socket {
    let descriptor: Int32

    init(port: Int) throws {
        descriptor = Glibc.socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        var timeout = timeval(tv_sec: 10, tv_usec: 0)
        setsockopt(descriptor, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        let connected = withUnsafePointer(to: &address) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(descriptor, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) } }
        guard connected == 0 else { throw SnapcastControlTests.TestFailure("cannot connect to port \(port)") }
    }

    /// Sends one line and returns the next line received that is not a notification.
    func exchange(_ line: String) throws -> String {
        _ = (line + "\n").withCString { send(descriptor, $0, strlen($0), 0) }
        var received = [UInt8]()
        var byte: UInt8 = 0
        while true {
            guard recv(descriptor, &byte, 1, 0) == 1 else { throw SnapcastControlTests.TestFailure("no reply to \(line)") }
            if byte == UInt8(ascii: "\n") {
                let text = String(decoding: received, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
                if !text.contains("\"method\"") { return text }
                received.removeAll()
            } else {
                received.append(byte)
            }
        }
    }

}

extension SnapcastControlTests {
    /// A TCP port free on loopback now (for snapserver, which cannot pick its own).
    static func freePort() throws -> Int {
        let socket = Glibc.socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(socket) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(socket, $0, length) == 0 && getsockname(socket, $0, &length) == 0 }
        }
        guard bound else { throw TestFailure("no free port") }
        return Int(UInt16(bigEndian: address.sin_port))
    }

    /// Snapcast's JSON-RPC on the HTTP port (POST and WebSocket `/jsonrpc`, where Snapweb and
    /// Home Assistant's HTTP transport speak it), run by Tests/Python/snapcast_jsonrpc_http.py
    /// against the house and against snapserver 0.26: the same answers to a request, a batch, a
    /// notification, bad JSON and an unknown method; and on the house, a client's volume set
    /// through POST is pushed on the WebSocket.
    @Test(.timeLimit(.minutes(2)))
    func jsonRPCOverHTTPAnswersAsSnapserverDoes() async throws {
        let directory = try TemporaryDirectory("snapcast-jsonrpc-http")
        defer { directory.preserveLogs(as: "snapcast-jsonrpc-http"); directory.remove() }
        let server = try ChildProcess(name: "server", arguments: ["server", "--listen", "127.0.0.1:0", "--http", "127.0.0.1:0", "--mpd", "off",
                                                                  "--snapcast-control", "off", "--snapcast", "off", "--state-dir", directory.file("state")],
                                      standardError: directory.file("server.log"))
        defer { server.interrupt() }
        let port = Int(try server.waitForLine(containing: "listening on").split(separator: ":").last!.split(separator: " ").first!)!
        let webLine = try server.waitForLine(containing: "web UI on http://")
        let httpPort = Int(webLine.split(separator: ":")[3].prefix { $0.isNumber })!
        let speaker = try ChildProcess(name: "a", arguments: ["speaker", "--server", "127.0.0.1:\(port)", "--name", "a", "--state-dir", directory.file("speaker-a"),
                                                              "--output", "virtual:" + directory.file("a.wav")], standardError: directory.file("a.log"))
        defer { speaker.interrupt() }
        let token = try ControllerTokenFile.read(ControllerTokenFile.path(in: directory.file("state")))
        let deadline = Date().addingTimeInterval(30)
        while try await HouseControlPort.admitWaiting(port: port, token: token).rooms.count != 1 {
            guard Date() < deadline else { throw TestFailure("room a did not connect") }
            try await Task.sleep(nanoseconds: 100_000_000)
        }
        try "".write(toFile: directory.file("snapserver.conf"), atomically: true, encoding: .utf8)
        let snapHTTP = try Self.freePort(), snapControl = try Self.freePort(), snapStream = try Self.freePort()
        let snapserver = try ChildProcess(name: "snapserver", executable: "/usr/bin/snapserver", arguments: [
            "-c", directory.file("snapserver.conf"), "--http.port", "\(snapHTTP)", "--tcp.port", "\(snapControl)", "--stream.port", "\(snapStream)",
            "--http.bind_to_address", "127.0.0.1", "--tcp.bind_to_address", "127.0.0.1", "--stream.bind_to_address", "127.0.0.1",
            "--stream.source", "pipe://\(directory.file("fifo"))?name=default&mode=create", "--server.datadir", directory.file("snapserver"),
        ], standardError: directory.file("snapserver.log"))
        defer { snapserver.interrupt() }
        _ = try snapserver.waitForLine(containing: "ControlServer", timeout: 20)

        let script = PythonScript.path("snapcast_jsonrpc_http.py")
        // The house's HTTP port takes controllers only: the script sends the token to it as a
        // bearer token; snapserver ignores the header.
        func converse(_ port: Int, change: Bool) async throws -> [String: String] {
            let process = try ChildProcess(name: "jsonrpc-http", executable: "/usr/bin/env",
                                           arguments: ["python3", script, "\(port)"] + (change ? ["--change"] : []),
                                           standardError: directory.file("jsonrpc-\(port).log"), environment: ["TUTTI_TOKEN": token.text])
            #expect(await process.exit(within: 60) == 0, "see out/test-logs/snapcast-jsonrpc-http/jsonrpc-\(port).log")
            var steps: [String: String] = [:]
            for line in process.outputLines {
                guard let object = try? JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any], let name = object["step"] as? String else { continue }
                steps[name] = String(decoding: try JSONSerialization.data(withJSONObject: object, options: [.sortedKeys]), as: UTF8.self)
            }
            return steps
        }
        let house = try await converse(httpPort, change: true)
        let snapcast = try await converse(snapHTTP, change: false)
        for name in ["version", "batch", "notification", "parse", "unknown", "status", "ws-version"] {
            print("jsonrpc over HTTP: \(name): house \(house[name] ?? "missing"), snapserver \(snapcast[name] ?? "missing")")
            #expect(house[name] != nil && house[name] == snapcast[name], "\(name): house \(house[name] ?? "missing"), snapserver \(snapcast[name] ?? "missing")")
        }
        print("jsonrpc over HTTP: \(house["ws-notified"] ?? "no notification")")
        #expect(house["ws-notified"]?.contains("\"volume\":33") == true, "\(house["ws-notified"] ?? "no notification")")
    }
}
