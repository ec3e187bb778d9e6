import Foundation
import Testing
import TuttiCore
@testable import TuttiDiagnostics
import TuttiSimulation
import TuttiTestSupport

/// The house as an MPD server, driven by Debian's real `mpc` against a real `tutti server` with
/// a real speaker on a virtual card: the library listed and searched, the queue built, idle
/// woken by a change, outputs as rooms, `volume` as the group's (checked on the card's output),
/// album art, and MPD's ACK lines for bad input on a raw connection that then goes on.
@Suite(.serialized) struct MPDServerTests {
    struct Run {
        var status: Int32
        var output: String
        var errors: String
        var bytes: Data = Data()
    }

    /// Runs a program to its end (guarded by `timeout`).
    static func run(_ executable: String, _ arguments: [String], in directory: TemporaryDirectory, timeout: Double = 30) throws -> Run {
        let label = UUID().uuidString.prefix(8)
        let out = directory.file("run-\(label).out"), err = directory.file("run-\(label).err")
        _ = FileManager.default.createFile(atPath: out, contents: nil)
        _ = FileManager.default.createFile(atPath: err, contents: nil)
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = [executable] + arguments
        process.standardOutput = FileHandle(forWritingAtPath: out)
        process.standardError = FileHandle(forWritingAtPath: err)
        try process.run()
        let deadline = Date().addingTimeInterval(timeout)
        while process.isRunning && Date() < deadline { usleep(10_000) }
        if process.isRunning { process.send(SIGKILL); process.waitUntilExit(); throw TestTimeout("\(executable) \(arguments) did not end within \(timeout) s") }
        let bytes = FileManager.default.contents(atPath: out) ?? Data()
        return Run(status: process.terminationStatus, output: String(decoding: bytes, as: UTF8.self),
                   errors: (try? String(contentsOfFile: err, encoding: .utf8)) ?? "", bytes: bytes)
    }

    /// One line-oriented conversation on a raw TCP connection: sends `lines`, reads until the
    /// last command's reply (`OK` or `ACK`) has come, returns what came after the greeting.
    static func converse(port: Int, _ lines: [String], replies: Int) throws -> String {
        let socket = Glibc.socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(socket) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        var timeout = timeval(tv_sec: 10, tv_usec: 0)
        setsockopt(socket, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        let connected = withUnsafePointer(to: &address) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(socket, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) } }
        guard connected == 0 else { throw TestTimeout("cannot connect to the MPD port \(port)") }
        let request = lines.map { $0 + "\n" }.joined()
        _ = request.withCString { send(socket, $0, strlen($0), 0) }
        var received = [UInt8]()
        var buffer = [UInt8](repeating: 0, count: 65536)
        func endings() -> Int {
            String(decoding: received, as: UTF8.self).split(separator: "\n").filter { $0 == "OK" || $0.hasPrefix("ACK ") }.count
        }
        // The greeting's line is "OK MPD …", not "OK": it is not counted.
        while endings() < replies {
            let count = recv(socket, &buffer, buffer.count, 0)
            guard count > 0 else { break }
            received += buffer[0..<count]
        }
        let text = String(decoding: received, as: UTF8.self)
        return String(text.drop { $0 != "\n" }.dropFirst())
    }

    /// A house with an MPD port, a library of two tagged tones (440 and 660 Hz, 30 s) and room
    /// a on a virtual card.
    struct HouseWithLibrary {
        let server: ChildProcess, speaker: ChildProcess
        let port: Int

        init(directory: TemporaryDirectory) throws {
            let album = directory.file("music/Test Artist/Test Album")
            try FileManager.default.createDirectory(atPath: album, withIntermediateDirectories: true)
            for (number, frequency) in [(1, 440), (2, 660)] {
                try TestMedia.ffmpeg(["-f", "lavfi", "-i", "sine=frequency=\(frequency):sample_rate=48000:duration=30", "-ac", "2",
                                      "-metadata", "title=Song \(number)", "-metadata", "artist=Test Artist", "-metadata", "album=Test Album",
                                      album + "/\(number).flac"])
            }
            server = try ChildProcess(name: "server", arguments: ["server", "--listen", "127.0.0.1:0", "--http", "off", "--mpd", "127.0.0.1:0",
                                                                  "--snapcast", "off", "--snapcast-control", "off", "--music", directory.file("music")],
                                      standardError: directory.file("server.log"))
            let housePort = Int(try server.waitForLine(containing: "listening on").split(separator: ":").last!.split(separator: " ").first!)!
            port = Int(try server.waitForLine(containing: "MPD clients on").split(separator: ":")[2].prefix { $0.isNumber })!
            speaker = try ChildProcess(name: "a", arguments: ["speaker", "--server", "127.0.0.1:\(housePort)", "--name", "a", "--state-dir", directory.file("speaker-a"),
                                                              "--output", "virtual:" + directory.file("a.wav")], standardError: directory.file("a.log"))
            // As a user admits a new speaker: `tutti ctl admit` waits for it to knock.
            _ = try TestMedia.run(ChildProcess.tuttiExecutable, ["ctl", "--server", "127.0.0.1:\(housePort)", "admit", "a"], timeout: 30)
        }

        func stop() {
            speaker.interrupt()
            server.interrupt()
        }
    }

    /// Zero crossings a second of channel 0 over `seconds` from `frame`: twice the tone's frequency.
    static func frequency(_ capture: VirtualCapture, from frame: Int, seconds: Double = 0.5) -> Double {
        let frames = Int(seconds * Double(capture.sampleRate))
        var crossings = 0
        for index in frame..<min(capture.frameCount - 1, frame + frames) {
            let a = capture.samples[index * capture.channelCount], b = capture.samples[(index + 1) * capture.channelCount]
            if (a < 0) != (b < 0) { crossings += 1 }
        }
        return Double(crossings) / 2 / seconds
    }

    /// python-mpd2 (PyPI), the library many MPD front ends are built on, drives a session
    /// (Tests/Python/mpd_session.py): library, queue, play with an idle client woken, setvol,
    /// pause and resume, next, seekcur, outputs, a bad id. The room's card shows each effect.
    @Test(.timeLimit(.minutes(2)))
    func pythonMPD2DrivesTheHouse() async throws {
        let directory = try TemporaryDirectory("mpd-python")
        defer { directory.preserveLogs(as: "mpd-python"); directory.remove() }
        let house = try HouseWithLibrary(directory: directory)
        defer { house.stop() }
        let script = PythonScript.path("mpd_session.py")
        let session = try ChildProcess(name: "python-mpd2", executable: "/usr/bin/env", arguments: ["python3", script, "\(house.port)"],
                                       standardError: directory.file("session.log"))
        #expect(await session.exit(within: 90) == 0, "\((try? String(contentsOfFile: directory.file("session.log"), encoding: .utf8)) ?? "")")
        var steps: [String: [String: Any]] = [:]
        for line in session.outputLines {
            guard let object = try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any], let name = object["step"] as? String else { continue }
            steps[name] = object
        }
        print("python-mpd2: \(session.outputLines.joined(separator: "\n"))")
        #expect((steps["library"]?["files"] as? [String]) == ["Test Artist/Test Album/1.flac", "Test Artist/Test Album/2.flac"])
        #expect((steps["queue"]?["titles"] as? [String]) == ["Song 1", "Song 2"])
        #expect((steps["woken"]?["subsystems"] as? [String])?.contains("player") == true)
        #expect(steps["setvol"]?["volume"] as? String == "50")
        #expect(steps["pause"]?["state"] as? String == "pause" && steps["resume"]?["state"] as? String == "play")
        #expect(steps["next"]?["title"] as? String == "Song 2")
        #expect(abs((steps["seekcur"]?["elapsed"] as? Double ?? 0) - 10) < 1)
        #expect(steps["outputs"]?["disabled"] as? String == "0" && steps["outputs"]?["enabled"] as? String == "1")
        #expect((steps["bad"]?["error"] as? String)?.contains("No such song") == true)
        let modes = try #require(steps["modes"])
        #expect(["repeat", "random", "single", "consume"].allSatisfy { modes[$0] as? String == "1" }, "\(modes)")
        #expect((modes["woken"] as? [String])?.contains("options") == true)
        #expect(steps["modes off"]?["modes"] as? [String] == ["0", "0", "0", "0"])
        let replayGain = try #require(steps["replay gain"])
        #expect((replayGain["album"] as? String)?.contains("album") == true && (replayGain["off"] as? String)?.contains("off") == true, "\(replayGain)")
        let crossfade = try #require(steps["crossfade"])
        #expect(crossfade["on"] as? String == "4" && crossfade["off"] is NSNull, "\(crossfade)")
        #expect((crossfade["negative"] as? String)?.contains("Number is negative") == true, "\(crossfade)")
        let playlists = try #require(steps["playlists"])
        #expect(playlists["saved"] as? [String] == ["Evening"])
        #expect(playlists["files"] as? [String] == ["Test Artist/Test Album/1.flac", "Test Artist/Test Album/2.flac"])
        #expect((playlists["refused"] as? String)?.contains("Playlist already exists") == true)
        #expect(playlists["loaded"] as? [String] == ["Song 1", "Song 2"] && playlists["shuffled"] as? [String] == ["Song 1", "Song 2"])
        #expect(playlists["after_rm"] as? [String] == [])
        house.speaker.interrupt()

        // The card: the first tone at full level, 30 dB down after setvol 50, silent while
        // paused, the same level again after resume, the second tone after next.
        let capture = try VirtualCapture(path: directory.file("a.wav"))
        func at(_ step: String, _ offset: Double) throws -> Int {
            let time = try #require(steps[step]?["mono_ns"] as? NSNumber).doubleValue
            return Int(capture.frame(atEmissionTime: time + offset * 1e9))
        }
        func rms(_ frame: Int) -> Double {
            SignalCheck.rms(capture.samples, channels: capture.channelCount, frames: frame..<min(capture.frameCount, frame + 12000))
        }
        let full = rms(try at("setvol", -1.0)), turned = rms(try at("setvol", 0.6)), paused = rms(try at("pause", 0.6))
        let resumed = rms(try at("resume", 0.6)), nextTone = Self.frequency(capture, from: try at("next", 0.3)), firstTone = Self.frequency(capture, from: try at("setvol", -1.0))
        print("python-mpd2: card RMS \(full) playing, \(turned) after setvol 50, \(paused) paused, \(resumed) resumed; tone \(firstTone) Hz, then \(nextTone) Hz after next")
        #expect(abs(full - 0.0625) < 0.002)
        #expect(abs(turned / full - pow(10, -1.5)) < 0.005)
        #expect(paused < 1e-4)
        #expect(abs(resumed / full - pow(10, -1.5)) < 0.005)
        #expect(abs(firstTone - 440) < 5 && abs(nextTone - 660) < 5)
    }

    /// ncmpcpp (Debian), the curses client, in a tmux of its own: it shows the queue, Enter
    /// plays the highlighted song and `>` skips to the next; its screen says so and the card
    /// plays each tone. (It once looped forever on a `noidle` the house answered after its idle
    /// had already been answered, showing nothing.)
    @Test(.timeLimit(.minutes(2)))
    func ncmpcppShowsTheQueueAndPlays() async throws {
        let directory = try TemporaryDirectory("mpd-ncmpcpp")
        defer { directory.preserveLogs(as: "mpd-ncmpcpp"); directory.remove() }
        let house = try HouseWithLibrary(directory: directory)
        defer { house.stop() }
        func mpc(_ arguments: String...) throws -> Run { try Self.run("mpc", ["-p", "\(house.port)"] + arguments, in: directory) }
        let connected = Date().addingTimeInterval(30)
        while try !mpc("outputs").output.contains("Output 1 (a) is enabled") {
            guard Date() < connected else { throw TestTimeout("room a never showed as an output") }
            try await Task.sleep(nanoseconds: 100_000_000)
        }
        #expect(try mpc("add", "Test Artist/Test Album/1.flac").status == 0)
        #expect(try mpc("add", "Test Artist/Test Album/2.flac").status == 0)

        // A tmux server of this test's own, so nothing else's sessions are touched.
        let socket = "tutti-ncmpcpp-\(getpid())"
        func tmux(_ arguments: String...) throws -> Run { try Self.run("tmux", ["-L", socket, "-f", "/dev/null"] + arguments, in: directory) }
        defer { _ = try? tmux("kill-server") }
        // The tmux server outlives the command that starts it and would inherit the descriptor
        // by which Foundation sees that command end: it starts with only 0, 1 and 2 open.
        let started = try Self.run("python3", ["-c", "import os, sys; os.closerange(3, 65536); os.execvp(sys.argv[1], sys.argv[1:])",
                                               "tmux", "-L", socket, "-f", "/dev/null", "new-session", "-d", "-x", "120", "-y", "30",
                                               "env HOME=\(directory.file("")) ncmpcpp -h 127.0.0.1 -p \(house.port) 2> \(directory.file("ncmpcpp.err"))"],
                                   in: directory)
        #expect(started.status == 0, "\(started.errors)")
        /// The screen once it shows `wanted` (polled: the screen has no events to wait on).
        /// The deadline is read before each capture: on a loaded machine the test's own task may
        /// stall for seconds between a capture and its check (CI once failed on a pane captured
        /// two seconds after Enter and checked twenty seconds later), and only a capture begun
        /// after the deadline shows what the screen held at it.
        func screen(showing wanted: String...) async throws -> String {
            let deadline = Date().addingTimeInterval(20)
            while true {
                let expired = Date() >= deadline
                let pane = try tmux("capture-pane", "-p").output
                if wanted.allSatisfy(pane.contains) { return pane }
                guard !expired else { throw TestTimeout("ncmpcpp never showed \(wanted):\n\(pane)") }
                try await Task.sleep(nanoseconds: 50_000_000)
            }
        }
        let queue = try await screen(showing: "Playlist (2 items", "Song 1", "Song 2")
        print("ncmpcpp: the queue:\n\(queue.split(separator: "\n").prefix(6).joined(separator: "\n"))")
        let played = MonotonicClock().now()
        _ = try tmux("send-keys", "Enter")
        let playing = try await screen(showing: "Playing: Test Artist \"Test Album\" - Song 1")
        let firstStatus = try mpc("status").output
        print("ncmpcpp: \(Double(MonotonicClock().now() - played) / 1e9) s after Enter: \(playing.split(separator: "\n").last ?? ""); mpc: \(firstStatus)")
        #expect(firstStatus.contains("[playing] #1/2"))
        try await Task.sleep(nanoseconds: 2_000_000_000)  // some of the first song, heard
        let skipped = MonotonicClock().now()
        _ = try tmux("send-keys", ">")
        _ = try await screen(showing: "Playing: Test Artist \"Test Album\" - Song 2")
        // Two seconds of the second song on the card before the room stops.
        let heard = Date().addingTimeInterval(20)
        while true {
            let expired = Date() >= heard
            let status = try mpc("status").output
            if status.contains("[playing] #2/2"), let elapsed = status.split(separator: " ").first(where: { $0.contains("/0:30") }),
               let seconds = Int(elapsed.prefix { $0 != "/" }.split(separator: ":").last ?? ""), seconds >= 2 { break }
            guard !expired else { throw TestTimeout("song 2 never played 2 s: \(status)") }
            try await Task.sleep(nanoseconds: 100_000_000)
        }
        print("ncmpcpp: \(playing.split(separator: "\n").last ?? "")")
        _ = try tmux("send-keys", "q")
        house.speaker.interrupt()

        // The card: the first tone from its first sound on (Enter is `playid`, which waits for
        // the room as `play` does, so when depends on the room), the second from `>` on.
        let capture = try VirtualCapture(path: directory.file("a.wav"))
        let onset = try #require(capture.firstSoundFrame())
        let first = Self.frequency(capture, from: onset + capture.sampleRate / 4)
        let second = Self.frequency(capture, from: Int(capture.frame(atEmissionTime: Double(skipped) + 0.8e9)))
        let heardAfter = (capture.emissionTime(ofFrame: Double(onset)) - Double(played)) / 1e9
        print("ncmpcpp: the card played \(first) Hz from its first sound, \(heardAfter) s after Enter, and \(second) Hz after >")
        #expect(abs(first - 440) < 5 && abs(second - 660) < 5)
        // Song 1 from its first frame (before `playid` waited for the room, the room joined the
        // stream up to a second into the song).
        let song = try TestMedia.decodeWithFFmpeg(directory.file("music/Test Artist/Test Album/1.flac"))
        let start = SyncAnalysis.locate(0, in: capture, reference: song, guess: onset, search: 8, ignoringSilence: true)
        #expect(start.map { abs($0.lag - Double(onset - 1)) <= 2 } == true,
                "the card's first sound (frame \(onset)) is not the song's first frame: \(String(describing: start))")
    }

    @Test(.timeLimit(.minutes(2)))
    func mpcDrivesTheHouse() async throws {
        let directory = try TemporaryDirectory("mpd")
        defer { directory.preserveLogs(as: "mpd"); directory.remove() }
        let album = directory.file("music/Test Artist/Test Album")
        try FileManager.default.createDirectory(atPath: album, withIntermediateDirectories: true)
        let cover = directory.file("cover.png")
        try TestMedia.ffmpeg(["-f", "lavfi", "-i", "color=red:s=48x48", "-frames:v", "1", cover])
        for (number, frequency) in [(1, 440), (2, 660)] {
            let picture = number == 1 ? ["-i", cover, "-map", "0:a", "-map", "1:v", "-c:v", "png", "-disposition:v", "attached_pic"] : []
            try TestMedia.ffmpeg(["-f", "lavfi", "-i", "sine=frequency=\(frequency):sample_rate=48000:duration=20"] + picture
                                 + ["-ac", "2", "-metadata", "title=Song \(number)", "-metadata", "artist=Test Artist", "-metadata", "album=Test Album",
                                    album + "/\(number).flac"])
        }
        let server = try ChildProcess(name: "server", arguments: ["server", "--listen", "127.0.0.1:0", "--http", "off", "--mpd", "127.0.0.1:0",
                                                                  "--music", directory.file("music"), "--state-dir", directory.file("state")],
                                      standardError: directory.file("server.log"))
        defer { server.interrupt() }
        let housePort = Int(try server.waitForLine(containing: "listening on").split(separator: ":").last!.split(separator: " ").first!)!
        let mpdLine = try server.waitForLine(containing: "MPD clients on")
        let port = Int(mpdLine.split(separator: ":")[2].prefix { $0.isNumber })!
        let speaker = try ChildProcess(name: "a", arguments: ["speaker", "--server", "127.0.0.1:\(housePort)", "--name", "a", "--state-dir", directory.file("speaker-a"),
                                                              "--output", "virtual:" + directory.file("a.wav")], standardError: directory.file("a.log"))
        defer { speaker.interrupt() }
        _ = try TestMedia.run(ChildProcess.tuttiExecutable, ["ctl", "--server", "127.0.0.1:\(housePort)", "--token-file", directory.file("state/controller-token"),
                                                             "admit", "a"], timeout: 30)
        func mpc(_ arguments: String...) throws -> Run {
            try Self.run("mpc", ["-p", "\(port)"] + arguments, in: directory)
        }
        // The room appears as an output once it has connected.
        let deadline = Date().addingTimeInterval(30)
        while try !mpc("outputs").output.contains("Output 1 (a) is enabled") {
            guard Date() < deadline else { throw TestTimeout("room a never showed as an output") }
            try await Task.sleep(nanoseconds: 100_000_000)
        }
        // The library, as MPD lists and searches its database (the scan ran at start).
        let listed = try mpc("listall").output
        #expect(listed == "Test Artist/Test Album/1.flac\nTest Artist/Test Album/2.flac\n", "\(listed)")
        #expect(try mpc("ls").output == "Test Artist\n")
        #expect(try mpc("list", "album").output == "Test Album\n")
        #expect(try mpc("search", "title", "song 2").output == "Test Artist/Test Album/2.flac\n")
        #expect(try mpc("find", "title", "song 2").output == "")  // find is exact: "Song 2"

        // The queue; an idle client is woken by the play.
        #expect(try mpc("add", "Test Artist/Test Album/1.flac").status == 0)
        #expect(try mpc("add", "Test Artist/Test Album/2.flac").status == 0)
        #expect(try mpc("-f", "%artist% - %title%", "playlist").output == "Test Artist - Song 1\nTest Artist - Song 2\n")
        let idle = try ChildProcess(name: "idle", executable: "/usr/bin/env", arguments: ["mpc", "-p", "\(port)", "idle", "player"])
        try await Task.sleep(nanoseconds: 300_000_000)  // let it reach idle; it is woken whatever the timing
        let played = MonotonicClock().now()
        #expect(try mpc("play").status == 0)
        _ = try idle.waitForLine(containing: "player", timeout: 10)
        let wokenMs = Double(MonotonicClock().now() - played) / 1e6
        print("MPD: mpc idle woke \(String(format: "%.0f", wokenMs)) ms after mpc play was started")
        let playing = try mpc("status").output
        #expect(playing.contains("[playing] #1/2"), "\(playing)")
        #expect(try mpc("current", "-f", "%title%").output == "Song 1\n")

        // setvol is the group's volume: the card's tone falls 30 dB at 50 %.
        try await Task.sleep(nanoseconds: 2_000_000_000)
        let turned = MonotonicClock().now()
        #expect(try mpc("volume", "50").status == 0)
        #expect(try mpc("volume").output.contains("volume: 50%"))
        try await Task.sleep(nanoseconds: 1_500_000_000)
        #expect(try mpc("next").status == 0)
        // The skip is cut into the stream a fraction of a second ahead, so every room changes together.
        let skipped = Date().addingTimeInterval(10)
        while try !mpc("status").output.contains("[playing] #2/2") {
            guard Date() < skipped else { throw TestTimeout("mpc next never reached song 2: \(try mpc("status").output)") }
            try await Task.sleep(nanoseconds: 50_000_000)
        }
        // An output disabled leaves the group; enabled, it joins again.
        #expect(try mpc("disable", "1").output.contains("Output 1 (a) is disabled"))
        #expect(try mpc("enable", "1").output.contains("Output 1 (a) is enabled"))

        // Album art: the embedded picture's bytes, paged by the client.
        let art = try mpc("readpicture", "Test Artist/Test Album/1.flac")
        let coverBytes = try Data(contentsOf: URL(fileURLWithPath: cover))
        #expect(art.status == 0 && art.bytes == coverBytes, "\(art.bytes.count) bytes of \(coverBytes.count)")

        // Bad lines get MPD's ACKs, and the connection goes on.
        // lsinfo gives each song's tags, as ncmpcpp and M.A.L.P. show them.
        let listing = try Self.converse(port: port, ["lsinfo \"Test Artist/Test Album\""], replies: 1)
        #expect(listing.contains("file: Test Artist/Test Album/1.flac\nArtist: Test Artist\nAlbum: Test Album\nTitle: Song 1\nTime: 20\n"), "\(listing)")
        // Song ids start at 1, as MPD's do: clients such as ncmpcpp take 0 for "no song".
        let ids = try Self.converse(port: port, ["playlistid"], replies: 1).split(separator: "\n").filter { $0.hasPrefix("Id: ") }
        #expect(ids == ["Id: 1", "Id: 2"], "\(ids)")
        // A noidle after idle was answered gets no reply of its own, as in MPD.
        let afterNoidle = try Self.converse(port: port, ["noidle", "status"], replies: 1)
        #expect(afterNoidle.hasPrefix("volume: "), "\(afterNoidle)")
        let reply = try Self.converse(port: port, ["foo", "setvol abc", "play \"unterminated", "command_list_ok_begin", "ping", "status",
                                                   "command_list_end", "deleteid 999", "ping"], replies: 6)
        print("MPD: raw conversation:\n\(reply)")
        let lines = reply.split(separator: "\n").map(String.init)
        #expect(lines.first == "ACK [5@0] {} unknown command \"foo\"", "\(lines)")
        #expect(lines.contains("ACK [2@0] {setvol} Integer expected: abc"))
        #expect(lines.contains("ACK [2@0] {} Missing closing '\"'"))
        #expect(lines.filter { $0 == "list_OK" }.count == 2)
        #expect(lines.contains("ACK [50@0] {deleteid} No such song"))
        #expect(lines.last == "OK")
        speaker.interrupt()

        // The card: the first song at full level, then 30 dB down after `mpc volume 50`.
        let capture = try VirtualCapture(path: directory.file("a.wav"))
        let first = try #require(capture.firstSoundFrame())
        func rms(from start: Int) -> Double {
            SignalCheck.rms(capture.samples, channels: capture.channelCount, frames: start..<min(capture.frameCount, start + 24000))
        }
        let before = rms(from: first + 24000)
        let after = rms(from: Int(capture.frame(atEmissionTime: Double(turned) + 0.6e9)))
        print("MPD: card RMS \(before) before mpc volume 50, \(after) after (ratio \(after / before))")
        #expect(abs(before - 0.0625) < 0.002)
        #expect(abs(after / before - pow(10, -1.5)) < 0.005)
    }

    /// A real MPD 0.23 (Debian's `mpd`) on a Unix socket of its own, with null outputs named a
    /// and b and `music` as its music directory.
    struct RealMPD {
        let process: ChildProcess
        let socket: String

        init(directory: TemporaryDirectory, music: String) throws {
            socket = directory.file("mpd.sock")
            let configuration = """
                music_directory "\(music)"
                db_file "\(directory.file("mpd.db"))"
                playlist_directory "\(directory.file("mpd-playlists"))"
                bind_to_address "\(socket)"
                audio_output {
                    type "null"
                    name "a"
                    mixer_type "software"
                }
                audio_output {
                    type "null"
                    name "b"
                    mixer_type "software"
                }
                """
            try FileManager.default.createDirectory(atPath: directory.file("mpd-playlists"), withIntermediateDirectories: true)
            try configuration.write(toFile: directory.file("mpd.conf"), atomically: true, encoding: .utf8)
            process = try ChildProcess(name: "mpd", executable: "/usr/bin/mpd", arguments: ["--no-daemon", "--stderr", directory.file("mpd.conf")],
                                       standardError: directory.file("mpd.log"))
            let deadline = Date().addingTimeInterval(20)
            while !FileManager.default.fileExists(atPath: socket) {
                guard Date() < deadline else { throw TestTimeout("mpd did not open \(socket)") }
                usleep(20_000)
            }
        }

        func stop() { process.interrupt() }
    }

    /// The partition flow (Tests/Python/mpd_partitions.py) that MultiRoomGroupsTests holds the
    /// house to, against a real MPD 0.23: it accepts exactly this flow and gives exactly these
    /// answers, so the house's are MPD's.
    @Test(.timeLimit(.minutes(2)))
    func realMPD023AcceptsThePartitionFlow() async throws {
        let directory = try TemporaryDirectory("mpd-real-partitions")
        defer { directory.preserveLogs(as: "mpd-real-partitions"); directory.remove() }
        let music = directory.file("music/album")
        try FileManager.default.createDirectory(atPath: music, withIntermediateDirectories: true)
        for (number, frequency) in [(1, 440), (2, 660)] {
            try TestMedia.ffmpeg(["-f", "lavfi", "-i", "sine=frequency=\(frequency):duration=30", "-ac", "2", music + "/\(number).flac"])
        }
        let mpd = try RealMPD(directory: directory, music: directory.file("music"))
        defer { mpd.stop() }
        let flow = try await MPDPartitionFlow.run(address: mpd.socket, song1: "album/1.flac", song2: "album/2.flac", update: true,
                                                  log: directory.file("flow.log"))
        print("real MPD 0.23, partitions:\n\(flow.output)")
        #expect(flow.problems.isEmpty, "\(flow.problems)")
    }

    /// mpc's `findadd`, `searchadd`, `add DIRECTORY`, and `find`/`search` with MPD 0.21's filter
    /// expressions, against the house and against a real MPD 0.23 with the same library: the
    /// same queue, in the same order (a directory's songs before its subdirectories').
    @Test(.timeLimit(.minutes(2)))
    func findAddAndSearchAddQueueWhatMPD023Queues() async throws {
        let directory = try TemporaryDirectory("mpd-findadd")
        defer { directory.preserveLogs(as: "mpd-findadd"); directory.remove() }
        let music = directory.file("music")
        let songs: [(path: String, title: String, album: String)] = [
            ("Test Artist/Test Album/1.flac", "Song 1", "Test Album"), ("Test Artist/Test Album/2.flac", "Song 2", "Test Album"),
            ("Test Artist/B Side/3.flac", "Other Song", "B Side"), ("Test Artist/0.flac", "Single", "Singles"),
            ("Another/4.flac", "Song 4", "Elsewhere"),
        ]
        for (index, song) in songs.enumerated() {
            let path = music + "/" + song.path
            try FileManager.default.createDirectory(atPath: (path as NSString).deletingLastPathComponent, withIntermediateDirectories: true)
            try TestMedia.ffmpeg(["-f", "lavfi", "-i", "sine=frequency=\(300 + 50 * index):duration=2", "-ac", "2", "-metadata", "title=\(song.title)",
                                  "-metadata", "artist=\(song.path.hasPrefix("Another") ? "Another Artist" : "Test Artist")",
                                  "-metadata", "album=\(song.album)", path])
        }
        let mpd = try RealMPD(directory: directory, music: music)
        defer { mpd.stop() }
        let server = try ChildProcess(name: "server", arguments: ["server", "--listen", "127.0.0.1:0", "--http", "off", "--mpd", "127.0.0.1:0",
                                                                  "--snapcast", "off", "--snapcast-control", "off", "--music", music,
                                                                  "--state-dir", directory.file("state")],
                                      standardError: directory.file("server.log"))
        defer { server.interrupt() }
        let port = Int(try server.waitForLine(containing: "MPD clients on").split(separator: ":")[2].prefix { $0.isNumber })!
        let hosts = [("house", ["-h", "127.0.0.1", "-p", "\(port)"]), ("mpd", ["-h", mpd.socket])]
        for (_, host) in hosts { #expect(try Self.run("mpc", host + ["-w", "update"], in: directory).status == 0) }
        // The house's library scan runs at start: wait for all five songs.
        let scanned = Date().addingTimeInterval(30)
        while try !Self.run("mpc", hosts[0].1 + ["stats"], in: directory).output.split(separator: "\n").contains(where: { $0.hasPrefix("Songs:") && $0.hasSuffix(" 5") }) {
            guard Date() < scanned else { throw TestTimeout("the house's library never held 5 songs") }
            try await Task.sleep(nanoseconds: 100_000_000)
        }
        let sequences: [[[String]]] = [
            [["clear"], ["findadd", "title", "Song 2"], ["playlist", "-f", "%file%"]],
            [["clear"], ["searchadd", "title", "song"], ["playlist", "-f", "%file%"]],
            [["clear"], ["add", "Test Artist"], ["playlist", "-f", "%file%"]],
            [["clear"], ["add", "/"], ["playlist", "-f", "%file%"]],
            [["clear"], ["findadd", "artist", "Nobody"], ["playlist", "-f", "%file%"]],
            [["clear"], ["searchadd", "(title contains 'song')"], ["playlist", "-f", "%file%"]],
            [["clear"], ["findadd", "(artist != 'Test Artist')"], ["playlist", "-f", "%file%"]],
            [["search", "(title =~ 'S.ng [0-9]')"]],
            [["find", "(title == 'Song 2')"]],
            [["find", "((artist == 'Test Artist') AND (!(album == 'Test Album')))"]],
            [["search", "(album contains 'side')"]],
            [["search", "any", "rtist"]],
            // `any` is the tags, not the URI: "0.flac" is only in file names.
            [["search", "any", "0.flac"]],
            [["search", "file", "0.flac"]],
            [["find", "album", "test album"]],
        ]
        for sequence in sequences {
            var outputs: [String: String] = [:]
            for (name, host) in hosts {
                var output = ""
                for command in sequence {
                    let run = try Self.run("mpc", host + command, in: directory)
                    // What the queue or the search shows; not `clear`'s status line (MPD's
                    // volume is its own mixer's, the house's its rooms').
                    output += "$ mpc \(command.joined(separator: " ")) -> \(run.status)\n" + (command == ["clear"] ? "" : run.output)
                }
                outputs[name] = output
            }
            print("mpc against the house and MPD 0.23:\n\(outputs["house"]!)")
            #expect(outputs["house"] == outputs["mpd"], "house:\n\(outputs["house"]!)\nMPD 0.23:\n\(outputs["mpd"]!)")
        }

        // Commands clients send that mpc does not (ncmpcpp's and M.A.L.P.'s swap and swapid,
        // Cantata's replay_gain_status and channels, replay_gain_mode (python-mpd2 and ncmpcpp send it), the queue's own find and search, and the
        // stored playlists' searchaddpl and playlistadd), on one raw connection each:
        // the same songs in the same places, and the same OK or ACK.
        let script = PythonScript.path("mpd_raw.py")
        func raw(_ address: String, _ commands: [String]) throws -> [String] {
            let output = try TestMedia.run("python3", [script, address], standardInput: Data(commands.joined(separator: "\n").utf8))
            return String(decoding: output, as: UTF8.self).split(separator: "\n").map { line in
                let object = (try? JSONSerialization.jsonObject(with: Data(line.utf8))) as? [String: Any]
                let reply = (object?["reply"] as? [String] ?? []).filter { line in
                    ["file: ", "Pos: ", "replay_gain_mode: ", "OK", "ACK "].contains { line.hasPrefix($0) }
                }
                // The command by name: the ids in swapid differ between the servers.
                let name = (object?["command"] as? String ?? "?").split(separator: " ").first.map(String.init) ?? "?"
                return "\(name) -> \(reply.joined(separator: " | "))"
            }
        }
        let addresses = [("house", "\(port)"), ("mpd", mpd.socket)]
        var ids: [String: [String]] = [:]
        for (name, address) in addresses {
            let listed = try TestMedia.run("python3", [script, address], standardInput: Data(["clear", "add \"Test Artist/Test Album/1.flac\"", "add \"Test Artist/Test Album/2.flac\"", "add Another/4.flac", "playlistid"].joined(separator: "\n").utf8))
            let last = String(decoding: listed, as: UTF8.self).split(separator: "\n").last.map(String.init) ?? ""
            ids[name] = ((try? JSONSerialization.jsonObject(with: Data(last.utf8))) as? [String: Any])?["reply"].flatMap { $0 as? [String] }?
                .filter { $0.hasPrefix("Id: ") }.map { String($0.dropFirst(4)) } ?? []
        }
        var replies: [String: [String]] = [:]
        for (name, address) in addresses {
            let id = ids[name] ?? []
            #expect(id.count == 3, "\(name)'s ids: \(id)")
            guard id.count == 3 else { continue }
            replies[name] = try raw(address, ["swap 0 2", "playlistinfo", "swap 0 9", "swapid \(id[0]) \(id[1])", "playlistinfo",
                                              "playlistfind title \"Song 2\"", "playlistsearch any song", "playlistfind \"(album == 'Elsewhere')\"",
                                              "replay_gain_status", "replay_gain_mode track", "replay_gain_status", "replay_gain_mode loud",
                                              "replay_gain_mode album", "replay_gain_status", "replay_gain_mode off", "channels", "crossfade 0",
                                              // (findaddpl is MPD 0.24's: 0.23 does not know it.)
                                              "searchaddpl Mix title song", "listplaylist Mix",
                                              "playlistadd Mix Another", "playlistadd Mix \"Test Artist/0.flac\"", "listplaylist Mix", "rm Mix"])
        }
        print("raw commands against the house and MPD 0.23:\n" + (replies["house"] ?? []).joined(separator: "\n"))
        #expect(replies["house"] == replies["mpd"], "house:\n\((replies["house"] ?? []).joined(separator: "\n"))\nMPD 0.23:\n\((replies["mpd"] ?? []).joined(separator: "\n"))")
    }
}
