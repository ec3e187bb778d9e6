import AsyncHTTPClient
import Foundation
import Synchronization
import NIOCore
import NIOHTTP1
import Testing
import TuttiCore
import TuttiDiagnostics
import TuttiProtocol
import TuttiSimulation
import TuttiTestSupport

/// The HTTP API and its event feed against a real `tutti server` and a real speaker process on a
/// virtual sound card: commands sent as a browser or `curl` sends them, the feed read by a real
/// WebSocket client, and what the card emitted checked.
@Suite(.serialized) struct HouseAPITests {
    /// A house with its HTTP API on a free port, and one room "a" on a virtual card.
    struct House {
        var server: ChildProcess
        var speaker: ChildProcess
        /// Rooms besides "a", by name.
        var others: [String: ChildProcess] = [:]
        var api: String
        var events: String
        /// The house's own port, where speakers connect.
        var port: Int
        /// Its controller token, read from its state directory as `tutti ctl` reads it.
        var token: ControllerToken
        var tokenFile: String

        init(in directory: TemporaryDirectory, otherRooms: [String] = [], music: String? = nil) throws {
            server = try ChildProcess(name: "server", arguments: ["server", "--listen", "127.0.0.1:0", "--http", "127.0.0.1:0",
                                                                  "--state-dir", directory.file("state")] + (music.map { ["--music", $0] } ?? []),
                                      standardError: directory.file("server.log"))
            let line = try server.waitForLine(containing: "listening on")
            port = Int(line.split(separator: ":").last!.split(separator: " ").first!)!
            tokenFile = ControllerTokenFile.path(in: directory.file("state"))
            token = try ControllerTokenFile.read(tokenFile)
            let httpLine = try server.waitForLine(containing: "web UI on")
            let httpPort = httpLine.split(separator: ":")[safe: 3].flatMap { Int($0.prefix { $0.isNumber }) }!
            api = "http://127.0.0.1:\(httpPort)/api"
            events = "ws://127.0.0.1:\(httpPort)/api/events"
            speaker = try Self.speaker(port: port, in: directory)
            for name in otherRooms { others[name] = try Self.speaker(name, port: port, in: directory) }
        }

        static func speaker(_ name: String = "a", port: Int, in directory: TemporaryDirectory, log: String? = nil) throws -> ChildProcess {
            try ChildProcess(name: name, arguments: ["speaker", "--server", "127.0.0.1:\(port)", "--name", name, "--state-dir", directory.file("speaker-\(name)"),
                                                     "--output", "virtual:" + directory.file("\(name).wav")],
                             standardError: directory.file(log ?? "\(name).log"))
        }

        func stop() {
            speaker.interrupt()
            for other in others.values { other.interrupt() }
            server.interrupt()
        }

        /// A pairing code from `tutti ctl pair-controller`, run as a user of the house's machine
        /// runs it (given the house's token file).
        func pairingCode() throws -> String {
            let output = try TestMedia.run(ChildProcess.tuttiExecutable, ["ctl", "--server", "127.0.0.1:\(port)", "--token-file", tokenFile, "pair-controller"],
                                           timeout: 30)
            let code = String(decoding: output, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
            guard code.count == 6, code.allSatisfy(\.isNumber) else { throw TestFailure("pair-controller printed \(code.debugDescription)") }
            return code
        }

        /// `Authorization: Bearer` with the house's token.
        var credential: (String, String) { ("Authorization", "Bearer \(token.text)") }

        /// A request as a controller sends it (with the token), or as a stranger (`signedIn`
        /// false: no credential, or only those in `headers`).
        func request(_ method: HTTPMethod, _ url: String, body: String? = nil, headers: [(String, String)] = [],
                     signedIn: Bool = true) async throws -> Reply {
            try await HouseAPITests.request(method, url, body: body, headers: (signedIn ? [credential] : []) + headers)
        }
    }

    struct Reply {
        var status: Int
        var json: [String: Any]
        var headers: HTTPHeaders = [:]
    }

    static func request(_ method: HTTPMethod, _ url: String, body: String? = nil, headers: [(String, String)] = []) async throws -> Reply {
        var request = HTTPClientRequest(url: url)
        request.method = method
        for (name, value) in headers { request.headers.replaceOrAdd(name: name, value: value) }
        if let body { request.body = .bytes(ByteBuffer(string: body)) }
        let response = try await HTTPClient.shared.execute(request, timeout: .seconds(30))
        let bytes = try await response.body.collect(upTo: 1 << 20)
        let object = (try? JSONSerialization.jsonObject(with: Data(bytes.readableBytesView))) as? [String: Any] ?? [:]
        #expect(response.headers["content-type"].first == "application/json", "\(method) \(url)")
        return Reply(status: Int(response.status.code), json: object, headers: response.headers)
    }

    /// Waits (guarded) until the house reports `names` with clocks good enough to play by,
    /// admitting those of them that wait to be admitted (through the API, as the web UI does).
    func waitForRoom(_ house: House, _ names: [String] = ["a"]) async throws {
        let deadline = Date().addingTimeInterval(30)
        while Date() < deadline {
            let reply = try await house.request(.GET, house.api + "/rooms").json
            for speaker in reply["waiting"] as? [[String: Any]] ?? [] {
                guard let name = speaker["name"] as? String, names.contains(name), let code = speaker["code"] as? String else { continue }
                _ = try await house.request(.POST, house.api + "/speakers/\(code.filter(\.isNumber))/admit")
            }
            let rooms = reply["rooms"] as? [[String: Any]] ?? []
            let settled = names.allSatisfy { name in
                rooms.contains { $0["name"] as? String == name && $0["clockErrorMicroseconds"] is Double && $0["problem"] == nil }
            }
            if settled { return }
            try await Task.sleep(nanoseconds: 50_000_000)
        }
        throw TestFailure("rooms \(names) did not connect with settled clocks")
    }

    @Test(.timeLimit(.minutes(2)))
    func playsVolumeAndFeedThroughHTTP() async throws {
        let directory = try TemporaryDirectory("http-api")
        defer { directory.preserveLogs(as: "http-api"); directory.remove() }
        let music = directory.file("tone.flac")
        try TestMedia.ffmpeg(["-f", "lavfi", "-i", "sine=frequency=440:sample_rate=48000:duration=8", "-ac", "2", music])
        let house = try House(in: directory)
        defer { house.stop() }
        let feed = try FeedListener(url: house.events, token: house.token)
        defer { feed.close() }
        try await waitForRoom(house)
        // The feed's first messages are the status and the queue as they are.
        _ = try await feed.first(timeout: 10) { $0["event"] as? String == "queue" }

        let play = try await house.request(.POST, house.api + "/transport/play", body: #"{"files":["\#(music)"],"rooms":["a"]}"#)
        #expect(play.status == 200, "\(play.json)")
        #expect(play.json["rooms"] as? [String] == ["a"])
        let playing = try await feed.first(timeout: 10) { status($0)?["state"] as? String == "playing" }
        #expect(status(playing.json)?["rooms"] as? [[String: Any]] != nil)
        try await waitForPlayhead(house, beyond: 2)

        let sent = MonotonicClock().now()
        let volume = try await house.request(.PUT, house.api + "/rooms/a/volume", body: #"{"percent":50}"#)
        #expect(volume.status == 200 && volume.json["volume"] as? Int == 50, "\(volume.json)")
        let seen = try await feed.first(timeout: 10) { message in
            (status(message)?["rooms"] as? [[String: Any]])?.contains { $0["name"] as? String == "a" && $0["volume"] as? Int == 50 } ?? false
        }
        let latencyMs = Double(seen.time - sent) / 1e6
        print("HTTP API: the volume change reached the event feed \(String(format: "%.1f", latencyMs)) ms after the request was sent")
        #expect(latencyMs < 100)
        // The metrics say what the card plays: room a, in the group, playing, at 50 %.
        let scraped = try await metrics(house)
        print("HTTP API: /metrics for room a: \(scraped.filter { $0.key.hasSuffix("{a}") }.sorted { $0.key < $1.key })")
        #expect(scraped["tutti_room_volume_percent{a}"] == 50)
        #expect(scraped["tutti_room_group{a}"] == 1 && scraped["tutti_room_playing{a}"] == 1)
        #expect((scraped["tutti_room_buffer_seconds{a}"] ?? 0) > 1)
        // In seconds (tens of microseconds, more on a loaded machine), not microseconds.
        #expect(scraped["tutti_room_clock_error_bound_seconds{a}"].map { $0 > 0 && $0 < 0.01 } ?? false)
        #expect(scraped["tutti_room_underruns_total{a}"] == 0 && scraped["tutti_room_reconnects_total{a}"] == 0)
        #expect(scraped["tutti_house_rooms{}"] == 1 && scraped["tutti_house_playing{}"] == 1)
        #expect((scraped["tutti_house_stream_position_seconds{}"] ?? 0) > 2)
        try await waitForPlayhead(house, beyond: 4)

        // Previous, more than 3 s into the only item: back to its start.
        let previous = try await house.request(.POST, house.api + "/transport/previous")
        #expect(previous.status == 200 && previous.json["item"] as? Int == 0 && previous.json["cut"] != nil, "\(previous.json)")
        // Clearing the queue stops the room; the feed says so.
        let cleared = MonotonicClock().now()
        let clear = try await house.request(.DELETE, house.api + "/queue")
        #expect(clear.status == 200 && clear.json["stopped"] as? Bool == true && clear.json["queueLength"] as? Int == 0, "\(clear.json)")
        _ = try await feed.first(timeout: 10) { message in
            (status(message)?["rooms"] as? [[String: Any]])?.contains { $0["name"] as? String == "a" && $0["state"] as? String == "idle" } ?? false
        }
        #expect(try await house.request(.GET, house.api + "/queue").json["items"] as? [Any] != nil)
        house.speaker.interrupt()

        // The card played the tone, then the same tone 30 dB down (50 % on a 60 dB scale), then
        // nothing once the queue was cleared.
        let capture = try VirtualCapture(path: directory.file("a.wav"))
        let first = try #require(capture.firstSoundFrame())
        func rms(from start: Int, seconds: Double) -> Double {
            SignalCheck.rms(capture.samples, channels: capture.channelCount, frames: start..<min(capture.frameCount, start + Int(seconds * 48000)))
        }
        let before = rms(from: first + 24000, seconds: 0.5)
        let after = rms(from: Int(capture.frame(atEmissionTime: Double(seen.time) + 0.5e9)), seconds: 0.4)
        // The room stopped at the pause anchor the clear set (the group's commitment and 50 ms
        // ahead: some 150 ms), and was silent from there to the end of the capture.
        let lastSound = (0..<capture.frameCount).last { frame in
            (0..<capture.channelCount).contains { abs(capture.samples[frame * capture.channelCount + $0]) > 1e-4 }
        } ?? 0
        let stoppedAfterMs = (capture.emissionTime(ofFrame: Double(lastSound)) - Double(cleared)) / 1e6
        print("HTTP API: the room stopped \(String(format: "%.0f", stoppedAfterMs)) ms after the queue-clear request, then \(capture.frameCount - lastSound) frames of silence")
        #expect(stoppedAfterMs > 0 && stoppedAfterMs < 400)
        #expect(capture.frameCount - lastSound > 2400)
        print("HTTP API: tone RMS \(before) before the volume change, \(after) after (ratio \(after / before))")
        // ffmpeg's sine has amplitude 1/8, and its mono-to-stereo upmix lowers each channel 3 dB:
        // RMS 0.125 × 0.7071 × 0.7071.
        #expect(abs(before - 0.0625) < 0.002)
        #expect(abs(after / before - pow(10, -1.5)) < 0.005)
    }

    /// Every refusal is JSON with one line saying why, and the status code its kind calls for;
    /// the house goes on serving.
    @Test(.timeLimit(.minutes(2)))
    func refusesBadRequestsWithReasons() async throws {
        let directory = try TemporaryDirectory("http-api-errors")
        defer { directory.preserveLogs(as: "http-api-errors"); directory.remove() }
        let house = try House(in: directory)
        defer { house.stop() }
        try await waitForRoom(house)
        // A link in an allowed directory to a file outside it.
        let escape = directory.file("passwd.flac"), missing = directory.file("no-such.flac")
        try FileManager.default.createSymbolicLink(atPath: escape, withDestinationPath: "/etc/passwd")
        let cases: [(HTTPMethod, String, String?, Int, String)] = [
            (.POST, "/transport/seek", #"{"seconds":"soon"}"#, 400, #"seek: "seconds" must be a number"#),
            (.POST, "/transport/seek", "not json", 400, "seek: the body is not a JSON object"),
            (.POST, "/transport/pause", nil, 409, "nothing is playing"),
            (.POST, "/transport/play", #"{"files":["\#(missing)"]}"#, 422, "\(missing): no such file"),
            (.POST, "/transport/play", #"{"files":[]}"#, 400, "play needs at least one file"),
            (.PUT, "/rooms/attic/volume", #"{"percent":10}"#, 404, "no such room: attic"),
            (.PUT, "/rooms/a/volume", #"{"percent":140}"#, 400, "volume needs a percentage from 0 to 100"),
            (.DELETE, "/queue/7", nil, 404, "no queue item 7"),
            (.DELETE, "/queue/x", nil, 400, "the index in the path must be a whole number"),
            (.POST, "/control", #"{"command":"dance"}"#, 400, #"unknown command "dance""#),
            (.GET, "/nothing-here", nil, 404, "GET /api/nothing-here: no such endpoint"),
            // Only what is meant to be played (the default directories: home, temporary, working).
            (.POST, "/transport/play", #"{"files":["/etc/passwd"]}"#, 403, "/etc/passwd: outside the directories the house plays from"),
            (.POST, "/transport/play", #"{"files":["\#(escape)"]}"#, 403, "\(escape): outside the directories the house plays from"),
            (.POST, "/queue", #"{"file":"file:///etc/passwd"}"#, 403, "the house plays http and https URLs only, not file"),
            (.POST, "/queue", #"{"file":"concat:/etc/passwd|/etc/hosts"}"#, 403, "not concat"),
            (.POST, "/transport/play", #"{"files":["music.flac"]}"#, 400, "music.flac: give an absolute path"),
        ]
        for (method, path, body, status, reason) in cases {
            let reply = try await house.request(method, house.api + path, body: body)
            let error = reply.json["error"] as? String ?? ""
            #expect(reply.status == status && error.contains(reason), "\(method) \(path): \(reply.status) \(reply.json)")
            #expect(!error.contains("\n"))
        }
        // Still serving, and the same commands through the generic route.
        let status = try await house.request(.POST, house.api + "/control", body: #"{"command":"status"}"#)
        #expect(status.status == 200 && status.json["state"] as? String == "stopped", "\(status.json)")
        let before = try await metrics(house)
        #expect(before["tutti_room_reconnects_total{a}"] == 0, "\(before)")
        // The speaker killed and started again: the metrics count the reconnect.
        house.speaker.kill()
        let again = try House.speaker(port: house.port, in: directory, log: "a-again.log")
        defer { again.interrupt() }
        try await waitForRoom(house)
        let after = try await metrics(house)
        #expect(after["tutti_room_reconnects_total{a}"] == 1, "\(after)")
    }

    /// Only a controller reaches the house: without the token or a session cookie every route
    /// of the house (REST, the event WebSocket, Snapcast's JSON-RPC, the metrics) is 401 with
    /// one line saying how to sign in, and changes nothing; the UI's files and the login page
    /// are open. A login with the token or a pairing code gives an HttpOnly, SameSite=Strict
    /// cookie that works; a forged or stale one does not; ten wrong codes void the code.
    @Test(.timeLimit(.minutes(2)))
    func strangersNeedTheToken() async throws {
        let directory = try TemporaryDirectory("http-auth")
        defer { directory.preserveLogs(as: "http-auth"); directory.remove() }
        let house = try House(in: directory)
        defer { house.stop() }
        try await waitForRoom(house)
        let root = house.api.replacingOccurrences(of: "/api", with: "")
        let volume = #"{"command":"volume","room":"a","percent":7}"#
        let strangers: [(HTTPMethod, String, String?, [(String, String)])] = [
            (.GET, house.api + "/status", nil, []),
            (.POST, house.api + "/control", volume, []),
            (.PUT, house.api + "/rooms/a/volume", #"{"percent":7}"#, [("Authorization", "Bearer \(ControllerToken.random().text)")]),
            (.POST, house.api + "/control", volume, [("Authorization", "Bearer hunter2")]),
            (.POST, house.api + "/control", volume, [("Authorization", "Basic \(Data("admin:admin".utf8).base64EncodedString())")]),
            (.POST, house.api + "/control", volume, [("Cookie", "tutti_session=AAAAAAAAAAAAAAAAAAAAAA.\(ControllerToken.random().text)")]),
            (.POST, house.api + "/pair-controller", nil, []),
            (.GET, house.api + "/artwork?path=/etc/hostname", nil, []),
            (.POST, root + "/jsonrpc", #"{"id":1,"jsonrpc":"2.0","method":"Client.SetVolume","params":{"id":"a","volume":{"percent":7,"muted":false}}}"#, []),
            (.GET, root + "/metrics", nil, []),
            (.GET, house.api + "/events", nil, []),
            // Other spellings of the same routes, which the router takes too.
            (.GET, root + "//api/status", nil, []),
            (.GET, root + "/api//status/", nil, []),
            (.GET, root + "/%61pi/status", nil, []),
            (.GET, root + "/metrics/", nil, []),
            (.POST, root + "//api/pair-controller", nil, []),
            (.POST, root + "/jsonrpc/", #"{"id":1,"jsonrpc":"2.0","method":"Client.SetVolume","params":{"id":"a","volume":{"percent":7,"muted":false}}}"#, []),
            (.GET, root + "/nothing-here", nil, []),
        ]
        for (method, url, body, headers) in strangers {
            let reply = try await house.request(method, url, body: body, headers: headers, signedIn: false)
            #expect(reply.status == 401 && reply.json["kind"] as? String == "unauthorized", "\(method) \(url): \(reply.status) \(reply.json)")
            #expect((reply.json["error"] as? String ?? "").contains("sign in first: send the house's controller token as Authorization: Bearer TOKEN"))
            #expect(reply.headers["www-authenticate"].first == #"Bearer realm="tutti""#)
        }
        // A real WebSocket client without the token is refused the upgrade (Hummingbird answers
        // a refused upgrade with 400); with it, it is fed.
        let script = PythonScript.path("event_feed_listener.py")
        let refusedFeed = try ChildProcess(name: "feed", executable: "/usr/bin/env", arguments: ["python3", script, house.events],
                                           standardError: directory.file("feed-stranger.log"))
        #expect(await refusedFeed.exit(within: 30) != 0)
        #expect(!refusedFeed.outputLines.contains("connected"))
        #expect((try String(contentsOfFile: directory.file("feed-stranger.log"), encoding: .utf8)).contains("server rejected WebSocket connection: HTTP 400"))
        let feed = try FeedListener(url: house.events, token: house.token)
        _ = try await feed.first(timeout: 10) { $0["event"] as? String == "status" }
        feed.close()
        let rooms = try await house.request(.GET, house.api + "/rooms").json["rooms"] as? [[String: Any]] ?? []
        #expect(rooms.first?["volume"] as? Int == 100, "a stranger changed the volume: \(rooms)")
        // Open: the UI's files, the document, the login page.
        let page = try await HTTPClient.shared.execute(HTTPClientRequest(url: root + "/"), timeout: .seconds(10))
        #expect(page.status == .ok)
        #expect(try await house.request(.GET, root + "/openapi.json", signedIn: false).status == 200)
        let session = try await house.request(.GET, house.api + "/session", signedIn: false)
        #expect(session.status == 200 && session.json["signedIn"] as? Bool == false && (session.json["localName"] as? String)?.hasSuffix(".local") == true,
                "\(session.json)")

        // Signing in with the token: a cookie that works, from a client with no other credential.
        let wrongToken = try await house.request(.POST, house.api + "/login", body: #"{"token":"\#(ControllerToken.random().text)"}"#, signedIn: false)
        #expect(wrongToken.status == 401 && wrongToken.headers["set-cookie"].isEmpty, "\(wrongToken.json)")
        #expect(try await house.request(.POST, house.api + "/login", body: "{}", signedIn: false).status == 400)
        let login = try await house.request(.POST, house.api + "/login", body: #"{"token":"\#(house.token.text)"}"#, signedIn: false)
        let setCookie = try #require(login.headers["set-cookie"].first, "\(login.json)")
        #expect(setCookie.hasPrefix("tutti_session=") && setCookie.contains("HttpOnly") && setCookie.contains("SameSite=Strict") && !setCookie.contains(house.token.text))
        let cookie = String(setCookie.prefix { $0 != ";" })
        let withCookie = try await house.request(.PUT, house.api + "/rooms/a/volume", body: #"{"percent":55}"#, headers: [("Cookie", "theme=dark; " + cookie)],
                                                 signedIn: false)
        #expect(withCookie.status == 200 && withCookie.json["volume"] as? Int == 55, "\(withCookie.json)")
        #expect(try await house.request(.GET, house.api + "/session", headers: [("Cookie", cookie)], signedIn: false).json["signedIn"] as? Bool == true)
        let tampered = cookie.dropLast() + (cookie.last == "A" ? "B" : "A")
        #expect(try await house.request(.GET, house.api + "/status", headers: [("Cookie", String(tampered))], signedIn: false).status == 401)
        let logout = try await house.request(.POST, house.api + "/logout", headers: [("Cookie", cookie)], signedIn: false)
        #expect(logout.headers["set-cookie"].first?.contains("Max-Age=0") == true, "\(logout.headers)")

        // A pairing code: ten wrong tries void it, so the right one then fails too.
        let code = try #require(try await house.request(.POST, house.api + "/pair-controller").json["code"] as? String)
        for guess in 0..<10 {  // ControllerPairing.maximumFailures
            let wrong = String(format: "%06d", (Int(code)! + 1 + guess) % 1_000_000)
            #expect(try await house.request(.POST, house.api + "/login", body: #"{"code":"\#(wrong)"}"#, signedIn: false).status == 401)
        }
        let voided = try await house.request(.POST, house.api + "/login", body: #"{"code":"\#(code)"}"#, signedIn: false)
        #expect(voided.status == 401, "a code outlived ten wrong tries: \(voided.json)")
        let log = try String(contentsOfFile: directory.file("server.log"), encoding: .utf8)
        #expect(log.contains("10 wrong pairing codes tried: every outstanding code is void"), "\(log)")
        #expect(!log.contains(house.token.text))
    }

    /// schemathesis (PyPI; the Makefile installs it) generates requests from `/openapi.json`,
    /// valid ones and invalid ones, while a room is connected: no reply may be a 5xx, have a
    /// status code the document does not list for its operation, or break its schema.
    @Test(.timeLimit(.minutes(5)))
    func conformsToItsOpenAPIDocument() async throws {
        let directory = try TemporaryDirectory("http-api-schemathesis")
        defer { directory.preserveLogs(as: "http-api-schemathesis"); directory.remove() }
        let music = directory.file("tone.flac")
        try TestMedia.ffmpeg(["-f", "lavfi", "-i", "sine=frequency=440:sample_rate=48000:duration=30", music])
        let house = try House(in: directory)
        defer { house.stop() }
        try await waitForRoom(house)
        // Playing, so that pause, seek and the queue edits are tried on a stream too.
        let play = try await house.request(.POST, house.api + "/transport/play", body: #"{"files":["\#(music)","\#(music)"]}"#)
        #expect(play.status == 200, "\(play.json)")
        let schemathesis = try ChildProcess(name: "schemathesis", executable: "/usr/bin/env", arguments: [
            "schemathesis", "run", house.api.replacingOccurrences(of: "/api", with: "/openapi.json"),
            "--checks", "not_a_server_error,status_code_conformance,content_type_conformance,response_schema_conformance",
            "--phases", "examples,coverage,fuzzing", "--max-examples", "25", "--seed", "7", "--workers", "1",
            "--request-timeout", "20", "--no-color", "--generation-database", "none",
            "--header", "\(house.credential.0): \(house.credential.1)",
        ], standardError: directory.file("schemathesis.err"))
        let status = await schemathesis.exit(within: 240)
        let output = schemathesis.outputLines.joined(separator: "\n")
        try output.write(toFile: directory.file("schemathesis.log"), atomically: true, encoding: .utf8)
        print(output.split(separator: "\n").suffix(12).joined(separator: "\n"))
        #expect(status == 0, "schemathesis failed: see out/test-logs/http-api-schemathesis/schemathesis.log")
        // Still serving its room (schemathesis may have renamed it, or forgotten its speaker,
        // which then waits to be admitted again: it is).
        var rooms: [[String: Any]] = []
        let deadline = Date().addingTimeInterval(20)
        repeat {
            let reply = try await house.request(.GET, house.api + "/rooms").json
            for speaker in reply["waiting"] as? [[String: Any]] ?? [] {
                if let code = speaker["code"] as? String { _ = try await house.request(.POST, house.api + "/speakers/\(code.filter(\.isNumber))/admit") }
            }
            rooms = reply["rooms"] as? [[String: Any]] ?? []
            if rooms.count == 1 { break }
            try await Task.sleep(nanoseconds: 100_000_000)
        } while Date() < deadline
        #expect(rooms.count == 1, "\(rooms)")
    }

    /// A hostile web page and a rebound DNS name change nothing and read nothing
    /// (Tests/Python/browser_attack.py, in a real headless Chromium): a page of another origin
    /// sends a `no-cors` POST, a form POST and a WebSocket to the house, and the room's volume
    /// stays where it was; a page whose name resolves to the house is refused. A forged Host
    /// is refused to any client; the same command without a browser's Origin, or from the
    /// house's own page, is carried out (so the refusals are the guard's, not a bad request).
    @Test(.timeLimit(.minutes(2)))
    func aHostilePageChangesNothing() async throws {
        let directory = try TemporaryDirectory("browser-attack")
        defer { directory.preserveLogs(as: "browser-attack"); directory.remove() }
        let house = try House(in: directory)
        defer { house.stop() }
        try await waitForRoom(house)
        let set = try await house.request(.PUT, house.api + "/rooms/a/volume", body: #"{"percent":60}"#)
        #expect(set.status == 200, "\(set.json)")
        func volume() async throws -> Int? {
            (try await house.request(.GET, house.api + "/rooms").json["rooms"] as? [[String: Any]])?.first { $0["name"] as? String == "a" }?["volume"] as? Int
        }

        let script = PythonScript.path("browser_attack.py")
        let base = house.api.replacingOccurrences(of: "/api", with: "")
        // The browser is signed in to the house when it opens the hostile page.
        let code = try house.pairingCode()
        let browser = try ChildProcess(name: "selenium", executable: "/usr/bin/env", arguments: ["python3", script, base, "a", code],
                                       standardError: directory.file("selenium.log"))
        let status = await browser.exit(within: 90)
        let steps = browser.outputLines.compactMap { (try? JSONSerialization.jsonObject(with: Data($0.utf8))) as? [String: Any] }
        for step in steps { print("browser attack: \(step)") }
        #expect(status == 0, "\(steps.last ?? [:]); see out/test-logs/browser-attack/selenium.log")
        #expect(steps.first { $0["step"] as? String == "signed-in" }?["cookie"] as? Bool == true)
        let attack = try #require(steps.first { $0["step"] as? String == "cross-origin" })
        // The page ran and sent all three; the house carried out none.
        #expect(attack["fetch"] as? String == "sent" && attack["form"] as? String == "submitted", "\(attack)")
        #expect(attack["websocket"] as? String == "refused", "\(attack)")
        #expect(try await volume() == 60, "a page of another origin changed the room's volume")
        let rebinding = try #require(steps.first { $0["step"] as? String == "rebinding" })
        let page = rebinding["body"] as? String ?? ""
        #expect(page.contains("is not a name of this house") && !page.contains("serverTimeNs"), "\(rebinding)")

        // Any client naming a foreign host is refused, in the API's convention.
        let forged = try await house.request(.GET, house.api + "/status", headers: [("Host", "attacker.example:80")])
        #expect(forged.status == 403 && forged.json["kind"] as? String == "forbidden", "\(forged.json)")
        #expect((forged.json["error"] as? String ?? "").contains("host attacker.example:80 is not a name of this house"), "\(forged.json)")
        let command = #"{"command":"volume","room":"a","percent":3}"#
        let foreign = try await house.request(.POST, house.api + "/control", body: command, headers: [("Origin", "http://attacker.example")])
        #expect(foreign.status == 403 && (foreign.json["error"] as? String ?? "").contains("another origin (http://attacker.example)"), "\(foreign.json)")
        let null = try await house.request(.POST, house.api + "/control", body: command, headers: [("Origin", "null")])
        #expect(null.status == 403, "\(null.json)")
        #expect(try await volume() == 60)
        // The house's own page (its origin) and a client that is no browser (no Origin) may.
        let own = try await house.request(.POST, house.api + "/control", body: #"{"command":"volume","room":"a","percent":40}"#, headers: [("Origin", base)])
        #expect(own.status == 200, "\(own.json)")
        #expect(try await volume() == 40)
        let plain = try await house.request(.POST, house.api + "/control", body: command)
        #expect(plain.status == 200, "\(plain.json)")
        #expect(try await volume() == 3)

        // The UI is kept out of other pages' frames and runs only its own scripts.
        let page0 = try await HTTPClient.shared.execute(HTTPClientRequest(url: base + "/"), timeout: .seconds(10))
        #expect(page0.status == .ok)
        #expect(page0.headers["content-security-policy"].first?.contains("frame-ancestors 'none'") == true, "\(page0.headers)")
        #expect(page0.headers["x-frame-options"].first == "DENY" && page0.headers["x-content-type-options"].first == "nosniff")
    }

    /// The web UI in a real headless Chromium, driven by selenium (Tests/Python/web_ui_test.py;
    /// Debian's chromium and chromium-driver and PyPI's selenium, installed by the Makefile): it
    /// loads with no console errors, shows the groups side by side, a room dragged onto a group
    /// plays with it (dragged by a mouse, and back at the end by a finger), a new group made on the page plays its own music in the room dragged into
    /// it while the other plays on, and its pause silences only its room; a volume slider moved
    /// turns its card down by as much as it says, a queue item dragged moves in the house's
    /// queue, the plots draw, and screenshots at 390 and 1280 px are saved to
    /// out/test-logs/web-ui/.
    @Test(.timeLimit(.minutes(3)))
    func webUIDrivesTheHouse() async throws {
        let directory = try TemporaryDirectory("web-ui")
        defer { directory.preserveLogs(as: "web-ui"); directory.remove() }
        // A library of three tagged tones; the house scans it at start.
        var music: [String] = []
        try FileManager.default.createDirectory(atPath: directory.file("music"), withIntermediateDirectories: true)
        // The one played from a search has its cover embedded, 64 × 64.
        let cover = directory.file("cover.png")
        try TestMedia.ffmpeg(["-f", "lavfi", "-i", "color=red:s=64x64", "-frames:v", "1", cover])
        for (index, frequency) in [440, 550, 660].enumerated() {
            music.append(directory.file("music/tone-\(index).flac"))
            let picture = frequency == 660 ? ["-i", cover, "-map", "0:a", "-map", "1:v", "-c:v", "png", "-disposition:v", "attached_pic"] : []
            try TestMedia.ffmpeg(["-f", "lavfi", "-i", "sine=frequency=\(frequency):sample_rate=48000:duration=30"] + picture + ["-ac", "2",
                                  "-metadata", "title=Tone \(frequency)", "-metadata", "artist=Test Signals", "-metadata", "album=Tones", music[index]])
        }
        let house = try House(in: directory, otherRooms: ["b"], music: directory.file("music"))
        defer { house.stop() }
        try await waitForRoom(house, ["a", "b"])
        let files = music.map { "\"\($0)\"" }.joined(separator: ",")
        let play = try await house.request(.POST, house.api + "/transport/play", body: #"{"files":[\#(files)],"rooms":["a"]}"#)
        #expect(play.status == 200, "\(play.json)")
        try await waitForPlayhead(house, beyond: 1.5)
        // A new speaker, which the script admits with the web UI's Admit.
        let newcomer = try House.speaker("c", port: house.port, in: directory)
        defer { newcomer.interrupt() }

        // Into the test's directory, from which `preserveLogs` copies them to out/test-logs/web-ui/.
        let screenshots = directory.path
        let script = PythonScript.path("web_ui_test.py")
        let browser = try ChildProcess(name: "selenium", executable: "/usr/bin/env",
                                       arguments: ["python3", script, house.api.replacingOccurrences(of: "/api", with: "/"), screenshots, "b", "a",
                                                   try house.pairingCode(), "c"],
                                       standardError: directory.file("selenium.log"))
        let status = await browser.exit(within: 150)
        let steps = browser.outputLines.compactMap { (try? JSONSerialization.jsonObject(with: Data($0.utf8))) as? [String: Any] }
        for step in steps { print("web UI: \(step)") }
        #expect(status == 0, "\(steps.last ?? [:]); see out/test-logs/web-ui/selenium.log")
        func step(_ name: String) -> [String: Any]? { steps.first { $0["step"] as? String == name } }
        // Signed in with the code after a wrong one was refused; the cookie is out of scripts'
        // reach and other sites'.
        let signedIn = try #require(step("signed-in"))
        #expect((signedIn["refused"] as? String ?? "").contains("the code is not one the house gave"), "\(signedIn)")
        #expect(signedIn["cookie_http_only"] as? Bool == true && signedIn["cookie_same_site"] as? String == "Strict"
                && signedIn["script_sees_cookie"] as? Bool == false, "\(signedIn)")
        // "Pair a phone" gave a code that a phone's login takes once.
        let phoneCode = try #require(step("paired")?["code"] as? String)
        let phone = try await house.request(.POST, house.api + "/login", body: #"{"code":"\#(phoneCode)"}"#, signedIn: false)
        #expect(phone.status == 200 && phone.json["signedIn"] as? Bool == true, "\(phone.json)")
        #expect(phone.headers["set-cookie"].first?.contains("HttpOnly; SameSite=Strict") == true, "\(phone.headers)")
        let again = try await house.request(.POST, house.api + "/login", body: #"{"code":"\#(phoneCode)"}"#, signedIn: false)
        #expect(again.status == 401, "a pairing code was taken twice: \(again.json)")
        // The new speaker waited, listed with the code its own log shows; Admit let it in.
        let admitted = try #require(step("admitted"))
        let speakerLog = try String(contentsOfFile: directory.file("c.log"), encoding: .utf8)
        let shown = try #require(admitted["code"] as? String)
        #expect(speakerLog.contains("waiting to be admitted to the house") && speakerLog.contains("(code \(shown))"), "\(admitted) / \(speakerLog)")
        #expect(speakerLog.contains("admitted to the house"), "\(speakerLog)")
        // The web UI's stereo pair: c (left) and the join room (right) as one room, then two again.
        let stereoPair = try #require(step("stereo-paired"))
        #expect((stereoPair["halves"] as? String) == "stereo pair: c (left) + b (right)", "\(stereoPair)")
        #expect(step("stereo-unpaired")?["channel"] as? String == "stereo", "\(String(describing: step("stereo-unpaired")))")
        // The web UI's crossfade, set for the shown group as its house reports it.
        #expect(step("crossfade")?["seconds"] as? Double == 4, "\(String(describing: step("crossfade")))")
        // Out of the way of what follows (the group's volume lists the default group's rooms).
        newcomer.interrupt()
        let goneBy = Date().addingTimeInterval(20)
        while (try await house.request(.GET, house.api + "/rooms").json["rooms"] as? [[String: Any]] ?? []).contains(where: { $0["name"] as? String == "c" }) {
            guard Date() < goneBy else { throw TestFailure("room c did not leave within 20 s") }
            try await Task.sleep(nanoseconds: 50_000_000)
        }
        let volume = try #require(step("volume")?["percent"] as? Int)
        let joined = try #require(step("joined")?["t_ns"] as? Int64)
        let moved = try #require(step("volume")?["t_ns"] as? Int64)
        // The group's volume, over the API: a at the slider's 40 and b at 100 (group 70) to group
        // 35 halve both, keeping their balance.
        let grouped = MonotonicClock().now()
        let group = try await house.request(.PUT, house.api + "/group/volume", body: #"{"percent":35}"#)
        let groupRooms = group.json["rooms"] as? [[String: Any]] ?? []
        #expect(group.status == 200 && group.json["percent"] as? Int == 35, "\(group.json)")
        #expect(groupRooms.map { "\($0["room"] ?? "")=\($0["volume"] ?? "")" } == ["a=\(volume / 2)", "b=50"], "\(group.json)")
        // A second more of both rooms, to measure.
        let position = try await house.request(.GET, house.api + "/status").json["positionSeconds"] as? Double ?? 0
        try await waitForPlayhead(house, beyond: position + 1)

        // The drag's new order was the house's (the script read it from the queue the feed
        // sent); the library's search found the tone asked for, and the house plays it.
        #expect(step("dragged")?["after"] as? [String] == [music[0], music[2], music[1]])
        #expect(step("searched")?["path"] as? String == music[2])
        #expect(step("artwork")?["width"] as? Int == 64)
        // The latency typed into room a's box is the house's.
        #expect(step("latency") != nil)
        let roomsNow = try await house.request(.GET, house.api + "/rooms").json["rooms"] as? [[String: Any]] ?? []
        #expect(roomsNow.first { $0["name"] as? String == "a" }?["latencyMs"] as? Double == 25, "\(roomsNow)")
        #expect(step("artwork")?["title"] as? String == "Tone 660" && step("artwork")?["artist_album"] as? String == "Test Signals · Tones")
        // The same picture over the API; a track without one is a 404 with its reason, or the
        // placeholder when asked for.
        var artRequest = HTTPClientRequest(url: house.api + "/artwork?path=" + music[2].addingPercentEncoding(withAllowedCharacters: .urlQueryAllowed)!)
        artRequest.headers.add(name: house.credential.0, value: house.credential.1)
        let art = try await HTTPClient.shared.execute(artRequest, timeout: .seconds(10))
        #expect(art.status == .ok && art.headers["content-type"].first == "image/png")
        let artBytes = try await art.body.collect(upTo: 1 << 20)
        #expect(artBytes.readableBytes > 50 && Array(artBytes.readableBytesView.prefix(4)) == [0x89, 0x50, 0x4E, 0x47])
        let none = try await house.request(.GET, house.api + "/artwork?path=" + music[0])
        #expect(none.status == 404 && (none.json["error"] as? String)?.hasSuffix("no artwork in the file or beside it") == true, "\(none.json)")
        var placeholderRequest = HTTPClientRequest(url: house.api + "/artwork?placeholder=true&path=" + music[0])
        placeholderRequest.headers.add(name: house.credential.0, value: house.credential.1)
        let placeholder = try await HTTPClient.shared.execute(placeholderRequest, timeout: .seconds(10))
        #expect(placeholder.status == .ok && placeholder.headers["content-type"].first == "image/svg+xml")
        let forbidden = try await house.request(.GET, house.api + "/artwork?path=/etc/passwd")
        #expect(forbidden.status == 403, "\(forbidden.json)")
        let playing = try await house.request(.GET, house.api + "/status").json
        #expect((playing["title"] as? String)?.contains("Tone 660") == true && playing["state"] as? String == "playing", "\(playing)")
        #expect(playing["path"] as? String == music[2] && playing["artist"] as? String == "Test Signals" && playing["album"] as? String == "Tones")
        #expect((playing["library"] as? [String: Any])?["tracks"] as? Int == 3, "\(playing)")
        for width in [390, 1280] {
            let size = (try? FileManager.default.attributesOfItem(atPath: "\(screenshots)/web-ui-\(width).png")[.size] as? Int) ?? 0
            #expect(size > 10_000, "web-ui-\(width).png")
        }
        house.stop()

        // Room b, ticked into the group, played the tone a's card was playing, from the tick on.
        let b = try VirtualCapture(path: directory.file("b.wav"))
        let bFirst = try #require(b.firstSoundFrame(), "room b never played")
        #expect(b.emissionTime(ofFrame: Double(bFirst)) > Double(joined))
        // Room a: the tone at full scale before the slider moved, at the slider's volume after.
        let a = try VirtualCapture(path: directory.file("a.wav"))
        let aFirst = try #require(a.firstSoundFrame())
        func rms(_ capture: VirtualCapture, from start: Int, seconds: Double) -> Double {
            SignalCheck.rms(capture.samples, channels: capture.channelCount, frames: start..<min(capture.frameCount, start + Int(seconds * 48000)))
        }
        let afterMove = Int(a.frame(atEmissionTime: Double(moved) + 0.5e9))
        let before = rms(a, from: aFirst + 24000, seconds: 0.5), after = rms(a, from: afterMove, seconds: 0.5)
        let expected = pow(10, Double(volume - 100) * 0.6 / 20)
        print("web UI: slider at \(volume) %: card RMS \(before) → \(after) (ratio \(after / before), expected \(expected))")
        #expect(abs(after / before - expected) < 0.02 * expected + 0.0005)
        let bFull = rms(b, from: bFirst + 24000, seconds: 0.4)
        #expect(bFull > 0.05)
        let bHalved = rms(b, from: Int(b.frame(atEmissionTime: Double(grouped) + 0.5e9)), seconds: 0.4)
        print("web UI: group volume 35: room b's card RMS \(bFull) → \(bHalved) (ratio \(bHalved / bFull), expected \(pow(10, -1.5)))")
        #expect(abs(bHalved / bFull - pow(10, -1.5)) < 0.001)

        // Two groups, each on its own music: b, dragged into Radio, played its tone (440 Hz) while
        // a played the default's (660 Hz); Radio's pause silenced b and left a playing.
        let radio = Double(try #require(step("radio")?["t_ns"] as? Int64)), paused = Double(try #require(step("radio-paused")?["t_ns"] as? Int64))
        func tone(_ capture: VirtualCapture, at time: Double) -> Double {
            let start = Int(capture.frame(atEmissionTime: time)), frames = 24000
            var crossings = 0
            for index in start..<min(capture.frameCount - 1, start + frames) {
                if (capture.samples[index * capture.channelCount] < 0) != (capture.samples[(index + 1) * capture.channelCount] < 0) { crossings += 1 }
            }
            return Double(crossings) / 2 / (Double(frames) / 48000)
        }
        let bRadio = tone(b, at: radio + 0.5e9), aDefault = tone(a, at: radio + 0.5e9)
        let bPaused = rms(b, from: Int(b.frame(atEmissionTime: paused + 0.6e9)), seconds: 0.5)
        let aPlaying = tone(a, at: paused + 0.6e9), aLevel = rms(a, from: Int(a.frame(atEmissionTime: paused + 0.6e9)), seconds: 0.5)
        print("web UI: Radio playing: b \(bRadio) Hz, a \(aDefault) Hz; Radio paused: b RMS \(bPaused), a \(aPlaying) Hz at RMS \(aLevel)")
        #expect(abs(bRadio - 440) < 5 && abs(aDefault - 660) < 5)
        #expect(bPaused < 1e-4 && abs(aPlaying - 660) < 5 && aLevel > 5e-4)
        #expect(step("radio")?["title"] as? String == "Tone 440" && step("radio")?["default_title"] as? String == "Tone 660", "\(step("radio") ?? [:])")
        #expect(step("radio-paused")?["default_state"] as? String == "playing")
        // The last drag was a finger's (pointer events of type touch): b went back to default.
        #expect(step("back")?["touch"] as? Bool == true)
    }

    /// A latency set over the API while playing: from then on the room plays that much earlier
    /// (its card's output against the other room's, sample-matched to the music). A rename keeps
    /// the room's volume, group and latency, outlives its speaker's restart, and refuses a name
    /// in use.
    @Test(.timeLimit(.minutes(2)))
    func latencyAndRenameThroughHTTP() async throws {
        let directory = try TemporaryDirectory("http-latency")
        defer { directory.preserveLogs(as: "http-latency"); directory.remove() }
        let music = directory.file("noise.flac")
        try TestMedia.ffmpeg(["-f", "lavfi", "-i", "anoisesrc=d=12:c=pink:a=0.3:seed=7", "-af", "pan=stereo|c0=c0|c1=0.8*c0,aresample=48000", music])
        var house = try House(in: directory, otherRooms: ["b"])
        defer { house.stop() }
        try await waitForRoom(house, ["a", "b"])
        let play = try await house.request(.POST, house.api + "/transport/play", body: #"{"files":["\#(music)"],"rooms":["a","b"]}"#)
        #expect(play.status == 200, "\(play.json)")
        try await waitForPlayhead(house, beyond: 3)
        let changedAt = try await house.request(.GET, house.api + "/status").json["positionSeconds"] as? Double ?? 0
        let latency = try await house.request(.PUT, house.api + "/rooms/b/latency", body: #"{"milliseconds":80}"#)
        #expect(latency.status == 200 && latency.json["room"] as? String == "b" && latency.json["latencyMs"] as? Double == 80, "\(latency.json)")
        try await waitForPlayhead(house, beyond: changedAt + 4)

        // Renamed: the same room, with its volume, group and latency.
        _ = try await house.request(.PUT, house.api + "/rooms/b/volume", body: #"{"percent":70}"#)
        let renamed = try await house.request(.POST, house.api + "/rooms/b/rename", body: #"{"to":"Bedroom"}"#)
        #expect(renamed.status == 200, "\(renamed.json)")
        #expect(renamed.json["room"] as? String == "Bedroom" && renamed.json["volume"] as? Int == 70 && renamed.json["group"] as? String == "default"
                && renamed.json["latencyMs"] as? Double == 80, "\(renamed.json)")
        #expect(try await house.request(.POST, house.api + "/rooms/a/rename", body: #"{"to":"Bedroom"}"#).status == 409)
        #expect(try await house.request(.POST, house.api + "/rooms/b/rename", body: #"{"to":"Attic"}"#).status == 404)
        #expect(try await house.request(.POST, house.api + "/rooms/a/rename", body: #"{"to":" "}"#).status == 400)
        #expect(try await house.request(.PUT, house.api + "/rooms/a/latency", body: #"{"milliseconds":2500}"#).status == 400)
        // Its speaker restarts under its old name: the house still calls it Bedroom, and tells it
        // the latency to compensate.
        house.others["b"]!.interrupt()
        let captureB = directory.file("b.wav")
        try FileManager.default.moveItem(atPath: captureB, toPath: directory.file("b-before.wav"))
        try FileManager.default.moveItem(atPath: captureB + ".timing.jsonl", toPath: directory.file("b-before.wav.timing.jsonl"))
        house.others["b"] = try House.speaker("b", port: house.port, in: directory, log: "b-again.log")
        try await waitForRoom(house, ["a", "Bedroom"])
        let rooms = try await house.request(.GET, house.api + "/rooms").json["rooms"] as? [[String: Any]] ?? []
        let bedroom = rooms.first { $0["name"] as? String == "Bedroom" }
        #expect(rooms.count == 2 && bedroom?["latencyMs"] as? Double == 80 && bedroom?["volume"] as? Int == 70, "\(rooms)")
        let speakerLog = try String(contentsOfFile: directory.file("b-again.log"), encoding: .utf8)
        #expect(speakerLog.contains("the house calls this room 'Bedroom'") && speakerLog.contains("the house set this room's latency to 80.0 ms"), "\(speakerLog)")
        house.stop()

        // Before the change both cards emitted each sample together; from a second after it,
        // b's card emitted each 80 ms before a's.
        let reference = try TestMedia.decodeWithFFmpeg(music)
        let analysis = SyncAnalysis.analyse(rooms: [SyncAnalysis.Room(name: "a", capture: try VirtualCapture(path: directory.file("a.wav")), latencyNanoseconds: 0),
                                                    SyncAnalysis.Room(name: "b", capture: try VirtualCapture(path: directory.file("b-before.wav")), latencyNanoseconds: 0)],
                                            reference: reference, interval: 4800)
        let changeFrame = Int(changedAt * 48000)
        let offsets = analysis.series.compactMap { point -> (frame: Int, ms: Double)? in
            guard let a = point.heard["a"], let b = point.heard["b"] else { return nil }
            return (point.frame, (b - a) / 1e6)
        }
        let before = offsets.filter { $0.frame < changeFrame - 24000 }.map(\.ms)
        let after = offsets.filter { $0.frame > changeFrame + 48000 }.map(\.ms)
        print("latency: b − a before the change \(before.min() ?? .nan)…\(before.max() ?? .nan) ms over \(before.count) checkpoints, after \(after.min() ?? .nan)…\(after.max() ?? .nan) ms over \(after.count)")
        #expect(before.count > 10 && after.count > 10)
        #expect(before.allSatisfy { abs($0) < 0.3 })
        #expect(after.allSatisfy { abs($0 + 80) < 0.3 })
    }

    /// `/metrics`, parsed by prometheus_client's parser (PyPI; the Makefile installs it): the
    /// samples by name and `room` label, or a group's `name` label ("" for the house's).
    func metrics(_ house: House) async throws -> [String: Double] {
        var request = HTTPClientRequest(url: house.api.replacingOccurrences(of: "/api", with: "/metrics"))
        request.method = .GET
        request.headers.add(name: house.credential.0, value: house.credential.1)
        let response = try await HTTPClient.shared.execute(request, timeout: .seconds(30))
        #expect(response.status == .ok)
        #expect(response.headers["content-type"].first?.hasPrefix("text/plain; version=0.0.4") == true)
        let text = String(buffer: try await response.body.collect(upTo: 1 << 20))
        let script = PythonScript.path("parse_metrics.py")
        let parsed = try TestMedia.run("python3", [script], standardInput: Data(text.utf8))
        var samples: [String: Double] = [:]
        for line in String(decoding: parsed, as: UTF8.self).split(separator: "\n") {
            let sample = try #require(try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any])
            let labels = sample["labels"] as? [String: String] ?? [:]
            samples["\(sample["name"] as! String){\(labels["room"] ?? labels["name"] ?? "")}"] = sample["value"] as? Double
        }
        return samples
    }

    func waitForPlayhead(_ house: House, beyond seconds: Double) async throws {
        let deadline = Date().addingTimeInterval(30)
        while Date() < deadline {
            let status = try await house.request(.GET, house.api + "/status").json
            if let position = status["positionSeconds"] as? Double, position > seconds { return }
            try await Task.sleep(nanoseconds: 50_000_000)
        }
        throw TestFailure("the playhead did not pass \(seconds) s")
    }
}


func status(_ message: [String: Any]) -> [String: Any]? {
    message["event"] as? String == "status" ? message["status"] as? [String: Any] : nil
}

extension Array {
    subscript(safe index: Int) -> Element? { indices.contains(index) ? self[index] : nil }
}
extension ArraySlice {
    subscript(safe index: Int) -> Element? { indices.contains(index) ? self[index] : nil }
}

/// A real WebSocket client on `/api/events`: Python's `websockets` (PyPI; the Makefile installs
/// it) in its own process, printing each message with the CLOCK_MONOTONIC time it arrived.
final class FeedListener: Sendable {
    private let process: ChildProcess

    init(url: String, token: ControllerToken) throws {
        let script = PythonScript.path("event_feed_listener.py")
        process = try ChildProcess(name: "feed", executable: "/usr/bin/env", arguments: ["python3", script, url], environment: ["TUTTI_TOKEN": token.text])
        _ = try process.waitForLine(containing: "connected")
    }

    /// Messages before this one were matched or passed over by an earlier `first`.
    private let consumed = Mutex(0)

    /// The first message after the last one returned, so far or to come, that `matches`
    /// (guarded by `timeout`).
    func first(timeout: Double, where matches: ([String: Any]) -> Bool) async throws -> (time: Int64, json: [String: Any]) {
        let deadline = Date().addingTimeInterval(timeout)
        while Date() < deadline {
            let lines = process.outputLines.filter { $0 != "connected" }
            let start = consumed.withLock { $0 }
            for index in start..<lines.count {
                let line = lines[index]
                guard let space = line.firstIndex(of: " "), let time = Int64(line[..<space]),
                      let json = (try? JSONSerialization.jsonObject(with: Data(line[line.index(after: space)...].utf8))) as? [String: Any] else {
                    throw TestFailure("the event feed sent something that is not JSON: \(line)")
                }
                if matches(json) {
                    consumed.withLock { $0 = index + 1 }
                    return (time, json)
                }
            }
            guard process.process.isRunning else { throw TestFailure("the feed listener ended: \(process.outputLines.suffix(3))") }
            try await Task.sleep(nanoseconds: 2_000_000)
        }
        throw TestFailure("no matching event within \(timeout) s; last: \(process.outputLines.suffix(2))")
    }

    func close() { process.interrupt() }
}
