import Foundation
import Testing
import TuttiSimulation
import TuttiTestSupport

/// Runs the real `tutti` executable (built by `swift build`) as a child process.
struct TuttiProcess {
    static var executable: String {
        if let override = ProcessInfo.processInfo.environment["TUTTI_BINARY"] { return override }
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        return root.appendingPathComponent(".build/debug/tutti").path
    }

    struct Result {
        var status: Int32
        var standardOutput: String
        var standardError: String
    }

    /// Runs `tutti ARGS` to its end; one that runs past `timeout` seconds is killed and throws.
    static func run(_ arguments: [String], in directory: String? = nil, timeout: Double = 300) throws -> Result {
        let result = try TestMedia.execute(executable, arguments, directory: directory, timeout: timeout)
        return Result(status: result.status, standardOutput: String(decoding: result.standardOutput, as: UTF8.self),
                      standardError: String(decoding: result.standardError, as: UTF8.self))
    }
}

@Suite struct CLITests {
    /// `tutti speaker` becomes `tutti-speaker` (the same process, pid and arguments), which
    /// maps neither FFmpeg nor Foundation nor the house's SQLite: a room costs what a room
    /// needs. It plays (to nothing, its house unreachable) and stops on SIGINT as before.
    @Test func speakerRunsAsTheLightExecutable() throws {
        let directory = try TemporaryDirectory("speaker-probe")
        defer { directory.remove() }
        let speaker = try ChildProcess(name: "speaker", arguments: ["speaker", "--server", "127.0.0.1:9", "--name", "probe", "--state-dir", directory.path, "--output", "null"])
        defer { speaker.kill() }
        _ = try speaker.waitForLine(containing: "tutti speaker probe: playing to null")
        let pid = speaker.process.processIdentifier
        let executable = try FileManager.default.destinationOfSymbolicLink(atPath: "/proc/\(pid)/exe")
        #expect(executable.hasSuffix("/tutti-speaker"), "the room runs as \(executable)")
        // Read, not sized: /proc files say they are empty.
        let maps = try #require(FileHandle(forReadingAtPath: "/proc/\(pid)/maps")).readDataToEndOfFile()
        let libraries = Set(String(decoding: maps, as: UTF8.self).split(separator: "\n")
            .compactMap { $0.split(separator: " ", omittingEmptySubsequences: true).last.map(String.init) }
            .filter { $0.hasPrefix("/") }.map { $0.split(separator: "/").last.map(String.init) ?? $0 })
        #expect(libraries.contains { $0.hasPrefix("libFLAC.so") }, "\(libraries.sorted())")
        for heavy in ["libavcodec.so", "libavformat.so", "libFoundation.so", "libsqlite3.so"] {
            #expect(!libraries.contains { $0.hasPrefix(heavy) }, "the room maps \(heavy)")
        }
        #expect(speaker.interrupt() == 0)
    }

    /// No shipped executable carries the simulation (test clocks, the simulated house, hostile
    /// clients): `tutti proxy` needs only the impairment proxy, a module of its own. Read from
    /// the executables' symbols, where a linked module's code shows by its mangled name.
    @Test func noShippedExecutableLinksTheSimulation() throws {
        let directory = URL(fileURLWithPath: ChildProcess.tuttiExecutable).deletingLastPathComponent().path
        for executable in ["tutti", "tutti-speaker"] {
            let path = directory + "/" + executable
            let symbols = Process()
            symbols.executableURL = URL(fileURLWithPath: "/usr/bin/nm")
            symbols.arguments = ["--defined-only", path]
            let output = Pipe()
            symbols.standardOutput = output
            try symbols.run()
            let text = String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
            symbols.waitUntilExit()
            #expect(symbols.terminationStatus == 0 && text.contains("15TuttiImpairment") == (executable == "tutti"), "nm \(path)")
            let simulation = text.split(separator: "\n").filter { $0.contains("15TuttiSimulation") }
            #expect(simulation.isEmpty, "\(executable) links TuttiSimulation: \(simulation.prefix(3))")
        }
    }

    @Test func infoPrintsJSONForScripts() throws {
        let directory = try TemporaryDirectory("cli-info")
        defer { directory.remove() }
        let path = directory.file("tagged.flac")
        try TestMedia.generateTone(path, seconds: 2.5, sampleRate: 96000, extra: ["-metadata", "title=Blue", "-metadata", "artist=Trio", "-metadata", "album=Live"])
        let result = try TuttiProcess.run(["info", "--json", path])
        #expect(result.status == 0, "\(result.standardError)")
        let objects = try #require(try JSONSerialization.jsonObject(with: Data(result.standardOutput.utf8)) as? [[String: Any]])
        let info = try #require(objects.first)
        #expect(info["codec"] as? String == "flac")
        #expect(info["sampleRate"] as? Int == 96000)
        #expect(info["channels"] as? Int == 2)
        #expect(info["title"] as? String == "Blue" && info["artist"] as? String == "Trio" && info["album"] as? String == "Live")
        #expect(abs((info["duration"] as? Double ?? 0) - 2.5) < 1e-6)
        #expect(info["hasArtwork"] as? Bool == false)
    }

    @Test func infoReportsBadFilesOnOneLineEach() throws {
        let directory = try TemporaryDirectory("cli-bad")
        defer { directory.remove() }
        let text = directory.file("readme.txt")
        try "hello".write(toFile: text, atomically: true, encoding: .utf8)
        let missing = directory.file("nope.flac")
        let result = try TuttiProcess.run(["info", missing, text])
        #expect(result.status == 1)
        let lines = result.standardError.split(separator: "\n")
        #expect(lines.count == 2)
        #expect(lines[0] == "tutti: \(missing): no such file")
        #expect(lines[1].hasPrefix("tutti: \(text): "))
    }

    @Test func playRendersAQueueAndReportsFailuresWithoutStopping() throws {
        let directory = try TemporaryDirectory("cli-play")
        defer { directory.remove() }
        let a = directory.file("a.mp3"), b = directory.file("b.wav"), missing = directory.file("gone.ogg")
        try TestMedia.generateTone(a, seconds: 1, sampleRate: 44100, codecArguments: ["-c:a", "libmp3lame"])
        try TestMedia.generateTone(b, seconds: 0.5, sampleRate: 48000)
        let output = directory.file("out.wav")
        let result = try TuttiProcess.run(["play", a, missing, b, "--output", "wav:\(output)", "--format", "s16"])
        #expect(result.status == 1)
        #expect(result.standardError == "tutti: \(missing): no such file\n")
        let wav = try WAVFile(path: output)
        #expect(wav.sampleFormat == .int16 && wav.sampleRate == 48000)
        #expect(abs(wav.frameCount - 72000) <= 1)
    }

    @Test func defaultOutputWorksWithoutASoundCard() throws {
        let directory = try TemporaryDirectory("cli-default")
        defer { directory.remove() }
        let input = directory.file("short.flac")
        try TestMedia.generateTone(input, seconds: 0.3, sampleRate: 48000)
        let result = try TuttiProcess.run(["play", input], in: directory.path)
        #expect(result.status == 0, "\(result.standardError)")
        #expect(result.standardError.contains("no sound card found; playing to virtual:tutti-virtual.wav"))
        let wav = try WAVFile(path: directory.file("tutti-virtual.wav"))
        #expect(wav.frameCount == 14400)
        #expect(FileManager.default.fileExists(atPath: directory.file("tutti-virtual.wav.timing.jsonl")))
    }

    @Test func badOptionsAreExplained() throws {
        let result = try TuttiProcess.run(["play", "x.wav", "--output", "speaker:kitchen"])
        #expect(result.status != 0)
        #expect(result.standardError.contains("speaker:kitchen: unknown output"))
        let format = try TuttiProcess.run(["play", "x.wav", "--format", "u8"])
        #expect(format.status != 0)
        #expect(format.standardError.contains("u8"))
    }

    @Test func helpTeaches() throws {
        let result = try TuttiProcess.run(["play", "--help"])
        #expect(result.status == 0)
        #expect(result.standardOutput.contains("virtual:<path>"))
        #expect(result.standardOutput.contains("--start"))
    }

    /// Ctrl-C mid-play stops at once and leaves a valid, finalized capture.
    @Test(.timeLimit(.minutes(1)))
    func interruptStopsCleanly() throws {
        let directory = try TemporaryDirectory("cli-int")
        defer { directory.remove() }
        let input = directory.file("long.flac")
        try TestMedia.generateTone(input, seconds: 30, sampleRate: 48000)
        let output = directory.file("v.wav")
        let process = Process()
        process.executableURL = URL(fileURLWithPath: TuttiProcess.executable)
        process.arguments = ["play", input, "--output", "virtual:\(output)"]
        process.standardError = FileHandle.nullDevice
        // As a shell starts it: with no signal blocked.
        try SpawnSignalMask.withNoneBlocked { try process.run() }
        // Wait (guarded) until the device has emitted its first periods.
        let timing = output + ".timing.jsonl"
        let deadline = Date().addingTimeInterval(20)
        while ((try? String(contentsOfFile: timing, encoding: .utf8))?.count ?? 0) < 200 && Date() < deadline {
            usleep(10_000)
        }
        process.send(SIGINT)
        try process.waitUntilExit(timeout: 60)
        #expect(process.terminationStatus == 130)
        let wav = try WAVFile(path: output)
        #expect(wav.frameCount > 0 && wav.frameCount < 30 * 48000)
    }

    /// A house with its HTTP port open and a room playing from it, each started as a shell
    /// starts them (no signal blocked), stop on every SIGINT and SIGTERM, each with its line,
    /// and in order (exit 0) when the signal comes twice at once.
    /// They once ignored about one signal in two, until the SIGKILL: the kernel may hand a
    /// process's signal to any thread that does not block it (NIO's), and the ignored
    /// disposition the Dispatch signal source needed dropped it there. Four rounds: a lost
    /// signal went unseen in each with a chance of about one in two.
    @Test(.timeLimit(.minutes(2)))
    func serverAndSpeakerStopOnEverySignal() async throws {
        for (round, number) in [SIGINT, SIGTERM, SIGINT, SIGTERM].enumerated() {
            let directory = try TemporaryDirectory("cli-signals")
            defer { directory.preserveLogs(as: "cli-signals-\(round)"); directory.remove() }
            let server = try ChildProcess(name: "server", arguments: ["server", "--listen", "127.0.0.1:0", "--http", "127.0.0.1:0", "--mpd", "off",
                                                                      "--snapcast", "off", "--snapcast-control", "off", "--state-dir", directory.file("state")],
                                          standardError: directory.file("server.log"))
            let line = try server.waitForLine(containing: "listening on")
            let port = Int(line.split(separator: ":").last!.split(separator: " ").first!)!
            let speaker = try ChildProcess(name: "a", arguments: ["speaker", "--server", "127.0.0.1:\(port)", "--name", "a",
                                                                  "--state-dir", directory.file("speaker-a"), "--output", "virtual:" + directory.file("a.wav")],
                                           standardError: directory.file("a.log"))
            _ = try speaker.waitForLine(containing: "playing to")
            let name = number == SIGINT ? "SIGINT" : "SIGTERM"
            for (process, log, who) in [(speaker, "a.log", "tutti speaker a"), (server, "server.log", "tutti server")] {
                process.process.send(number)
                // In the last two rounds twice at once, as a terminal's process group or a
                // wrapper passing a signal on may send it: still the polite stop, not "now".
                if round >= 2 { process.process.send(number) }
                let status = await process.exit(within: 10)
                let said = try String(contentsOfFile: directory.file(log), encoding: .utf8)
                #expect(status == 0 && process.process.terminationReason == .exit, "round \(round): \(who) after \(name): status \(status)")
                #expect(said.contains("\(who): \(name): stopping"), "round \(round): \(who) said:\n\(said.suffix(300))")
            }
        }
    }
}

/// Standard input and named pipes, like Snapcast's pipe source.
@Suite struct PipeInputTests {
    @Test func standardInputPlaysAnyFormat() throws {
        let directory = try TemporaryDirectory("cli-stdin")
        defer { directory.remove() }
        let input = directory.file("in.flac")
        try TestMedia.generateTone(input, seconds: 1.5, sampleRate: 48000)
        let output = directory.file("out.wav")
        let process = Process()
        process.executableURL = URL(fileURLWithPath: TuttiProcess.executable)
        process.arguments = ["play", "-", "--output", "wav:\(output)"]
        process.standardInput = try FileHandle(forReadingFrom: URL(fileURLWithPath: input))
        process.standardError = FileHandle.nullDevice
        try process.run()
        try process.waitUntilExit(timeout: 60)
        #expect(process.terminationStatus == 0)
        let wav = try WAVFile(path: output)
        #expect(SignalCheck.maxDifference(wav.samples, try TestMedia.decodeWithFFmpeg(input)) < 1e-6)
        #expect(wav.frameCount == 72_000)
    }

    /// Raw PCM through a FIFO, described in the spec as Snapcast does (rate:bits:channels).
    @Test func namedPipeCarriesRawPCM() throws {
        let directory = try TemporaryDirectory("cli-fifo")
        defer { directory.remove() }
        let raw = directory.file("in.raw")
        try TestMedia.ffmpeg(["-f", "lavfi", "-i", "sine=frequency=500:sample_rate=44100:duration=1", "-ac", "2", "-f", "s16le", raw])
        let fifo = directory.file("audio.fifo")
        #expect(mkfifo(fifo, 0o600) == 0)
        let output = directory.file("out.wav")
        let player = Process()
        player.executableURL = URL(fileURLWithPath: TuttiProcess.executable)
        player.arguments = ["play", "pipe:\(fifo)?sampleformat=44100:16:2", "--output", "wav:\(output)", "--rate", "44100"]
        player.standardError = FileHandle.nullDevice
        try player.run()
        // The writer opens the FIFO write-only (a read-write open would never see the reader),
        // without blocking: ENXIO until tutti has opened its end, retried for at most 30 s.
        let bytes = try Data(contentsOf: URL(fileURLWithPath: raw))
        let deadline = Date().addingTimeInterval(30)
        var descriptor: Int32 = -1
        while descriptor < 0 && Date() < deadline {
            descriptor = open(fifo, O_WRONLY | O_NONBLOCK)
            if descriptor < 0 { usleep(5_000) }
        }
        guard descriptor >= 0 else { throw TestTimeout("tutti did not open \(fifo) within 30 s") }
        _ = fcntl(descriptor, F_SETFL, fcntl(descriptor, F_GETFL) & ~O_NONBLOCK)
        let writer = FileHandle(fileDescriptor: descriptor, closeOnDealloc: true)
        // A blocking write: bounded, in case tutti stops reading.
        try waitOnOwnThread("tutti to read \(fifo)", timeout: .seconds(60)) {
            writer.write(bytes)
            try writer.close()
        }
        try player.waitUntilExit(timeout: 60)
        #expect(player.terminationStatus == 0)
        let wav = try WAVFile(path: output)
        #expect(wav.frameCount == 44_100)
        let expected = bytes.withUnsafeBytes { Array($0.bindMemory(to: Int16.self)).map { Float($0) / 32768 } }
        #expect(SignalCheck.maxDifference(wav.samples, expected) < 1e-6)
    }

    @Test func badPipeSpecsAreExplained() throws {
        let result = try TuttiProcess.run(["info", "pipe:/tmp/x?sampleformat=48000:12:2"])
        #expect(result.status == 1)
        #expect(result.standardError.contains("sampleformat must be RATE:BITS:CHANNELS"))
    }
}

@Suite struct EventsTests {
    /// `--events jsonl`: every state change on its own line, items stamped with the exact time
    /// their first frame leaves the (virtual) sound card.
    @Test func eventsAreJSONLinesWithExactTimes() throws {
        let directory = try TemporaryDirectory("cli-events")
        defer { directory.remove() }
        let a = directory.file("a.flac"), b = directory.file("b.wav")
        try TestMedia.generateTone(a, seconds: 0.6, sampleRate: 48000)
        try TestMedia.generateTone(b, seconds: 0.4, sampleRate: 48000)
        let output = directory.file("v.wav")
        let result = try TuttiProcess.run(["play", a, directory.file("gone.mp3"), b, "--output", "virtual:\(output)", "--events", "jsonl"])
        #expect(result.status == 1)
        let events = try result.standardOutput.split(separator: "\n").map { try JSONSerialization.jsonObject(with: Data($0.utf8)) as! [String: Any] }
        let kinds = events.map { $0["event"] as! String }
        // The error is reported when found (its timing against the first item depends on decoding).
        #expect(kinds.filter { $0 != "error" && $0 != "buffering" } == ["status", "status", "item", "item_end", "item", "item_end", "status", "end"], "\(kinds)")
        // Each item's end says how much of it played: all of it.
        #expect(events.filter { $0["event"] as? String == "item_end" }.map { $0["frames"] as? Int } == [28800, 19200])
        #expect(kinds.contains("buffering"))
        #expect(kinds.filter { $0 == "error" }.count == 1)
        #expect(events.allSatisfy { ($0["mono_ns"] as? NSNumber) != nil })
        #expect(events.first?["status"] as? String == "waitingToPlayAtSpecifiedRate")
        let items = events.filter { $0["event"] as? String == "item" }
        #expect(items.map { $0["index"] as? Int } == [0, 2])
        let times = items.map { ($0["mono_ns"] as! NSNumber).int64Value }
        // The first item starts with the card's first frame; the second exactly 0.6 s later.
        let firstPeriod = try String(contentsOfFile: output + ".timing.jsonl", encoding: .utf8).split(separator: "\n").first!
        let firstTime = ((try JSONSerialization.jsonObject(with: Data(firstPeriod.utf8)) as! [String: Any])["mono_ns"] as! NSNumber).int64Value
        #expect(times[0] == firstTime)
        #expect(abs(times[1] - times[0] - 600_000_000) <= 21_000)
        let error = try #require(events.first { $0["event"] as? String == "error" })
        #expect(error["reason"] as? String == "no such file")
    }
}

@Suite struct URLPlayTests {
    /// `tutti play URL`: a server error is retried (reported as a retry event), and the output
    /// is the served audio, exactly.
    @Test func playsAURLAndReportsRetries() async throws {
        let directory = try TemporaryDirectory("cli-url")
        defer { directory.remove() }
        let tone = ToneWAV(seconds: 1)
        let server = try await MediaHTTPServer.start(files: ["/song.wav": tone.bytes])
        server.failNext(path: "/song.wav", count: 1, status: 503)
        let output = directory.file("out.wav")
        let url = server.url(for: "/song.wav")
        let result = try await onOwnThread { try TuttiProcess.run(["play", url, "--output", "wav:\(output)", "--events", "jsonl"]) }
        try await server.shutdown()
        #expect(result.status == 0, "\(result.standardError)")
        let events = try result.standardOutput.split(separator: "\n").map { try JSONSerialization.jsonObject(with: Data($0.utf8)) as! [String: Any] }
        let retry = try #require(events.first { $0["event"] as? String == "retry" })
        #expect(retry["reason"] as? String == "HTTP 503 Service Unavailable")
        #expect(retry["attempt"] as? Int == 1)
        #expect(events.contains { $0["event"] as? String == "item" && $0["path"] as? String == url })
        let played = try WAVFile(path: output)
        #expect(played.samples.count == tone.samples.count)
        #expect(played.samples.elementsEqual(tone.samples))
    }
}
