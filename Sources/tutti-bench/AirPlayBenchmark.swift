import ArgumentParser
import Foundation
import NIOPosix
import TuttiCore
import TuttiDiagnostics
import TuttiProtocol
import TuttiSimulation

/// `tutti-bench airplay`: AirPlay both ways, in one run, measured from the sound cards.
///
/// - **Into Tutti**: pyatv (`atvremote`) streams a file to the house's AirPlay receiver; the
///   group's rooms are two Tutti rooms (virtual cards, skewed clocks and crystals) and two
///   shairport-sync receivers as AirPlay rooms. Reported: the time from launching the sender to
///   the first sound in a Tutti room, and the skew between the Tutti rooms.
/// - **The anchor's latency**: the same pyatv command to a shairport-sync receiver directly,
///   from launch to its first sound. Both include pyatv's own start (a Python process).
/// - **Two shairport-sync receivers fed one stream**, the way owntone and Music Assistant play
///   AirPlay groups (one sender, RAOP to each receiver, each keeping its own time): the skew
///   between the two, and between each and the Tutti rooms. shairport-sync's drift tolerance is
///   its default (2 ms) unless `--shairport-drift-tolerance` says otherwise.
///
/// shairport-sync exits without Avahi: run it as
/// `scripts/avahi-sandbox.sh .build/release/tutti-bench airplay`.
struct AirPlayBenchmark: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "airplay",
        abstract: "AirPlay into Tutti and Tutti into AirPlay receivers: latency and skew, against shairport-sync.",
        discussion: """
            Needs Debian's shairport-sync, pyatv in out/venv-pyatv (make test makes it) and an \
            Avahi daemon; scripts/avahi-sandbox.sh gives a private one: \
            scripts/avahi-sandbox.sh .build/release/tutti-bench airplay
            """)

    @Option(help: "Seconds of music the sender streams; the skew is measured after its first 10.")
    var seconds = 40.0

    @Option(name: .customLong("shairport-drift-tolerance"), help: "shairport-sync's drift_tolerance_in_seconds (its default is 0.002).")
    var driftTolerance = 0.002

    @Option(help: "The `tutti` executable (default: beside this one).")
    var tutti: String?

    @Option(help: "pyatv's atvremote (default: out/venv-pyatv/bin/atvremote).")
    var atvremote = "out/venv-pyatv/bin/atvremote"

    @Option(name: .customLong("work-dir"), help: "Where captures and logs go (default: a new temporary directory).")
    var workDirectory: String?

    @Flag(help: "Print the results as JSON.")
    var json = false

    func validate() throws {
        guard seconds >= 15 else { throw ValidationError("--seconds \(seconds): at least 15 (the skew is measured after the first 10 s)") }
        guard driftTolerance > 0 && driftTolerance <= 0.1 else { throw ValidationError("--shairport-drift-tolerance \(driftTolerance): 0 to 0.1 s") }
    }

    struct Skew: Encodable {
        var pair: String
        var p50Microseconds: Double
        var p99Microseconds: Double
        var maxMicroseconds: Double
        var checkpoints: Int
        var jumps: Int
    }

    struct Result: Encodable {
        var senderToSoundMilliseconds: Double
        var anchorSenderToSoundMilliseconds: Double
        var skews: [Skew]
        var shairportResyncs: [String: Int]
        var shairportDriftToleranceSeconds: Double
        var workDirectory: String
    }

    func run() async throws {
        guard ProcessInfo.processInfo.environment["TUTTI_AVAHI_SANDBOX"] == "1" else {
            throw BenchError("shairport-sync exits without an Avahi daemon: run this as scripts/avahi-sandbox.sh \(CommandLine.arguments[0]) airplay")
        }
        let executable = tutti ?? URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent().appendingPathComponent("tutti").path
        guard FileManager.default.isExecutableFile(atPath: executable) else { throw BenchError("\(executable): not found; build it first (swift build -c release)") }
        guard FileManager.default.isExecutableFile(atPath: atvremote) else { throw BenchError("\(atvremote): pyatv's atvremote is not there; make deps makes its venv") }
        let directory = workDirectory ?? NSTemporaryDirectory() + "tutti-airplay-\(getpid())"
        try? FileManager.default.removeItem(atPath: directory)
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        func file(_ name: String) -> String { directory + "/" + name }

        // What the phone plays: chords with vibrato and seeded noise at AirPlay's 44.1 kHz.
        Console.progress("generating \(Int(seconds)) s of music…")
        let music = file("music.wav")
        let d = Int(seconds)
        let status = try BenchProcess.run("ffmpeg", ["-nostdin", "-y", "-loglevel", "error",
            "-f", "lavfi", "-i", "sine=f=220:d=\(d)", "-f", "lavfi", "-i", "sine=f=331:d=\(d)", "-f", "lavfi", "-i", "anoisesrc=d=\(d):c=pink:a=0.15:seed=37",
            "-filter_complex", "[0]vibrato=f=5[x];[x][1][2]amix=inputs=3,pan=stereo|c0=c0|c1=0.8*c0,aresample=44100",
            "-c:a", "pcm_s16le", "-metadata", "title=Bench Tune", music])
        if status.status != 0 { throw BenchError("ffmpeg could not generate \(music)") }

        // Three receivers: s0 for the anchor's latency, s1 and s2 as rooms.
        let cards = [("s0", 0.0), ("s1", 30.0), ("s2", -45.0)]
        let alsa = try ALSAVirtualCard.configure(cards.map { .init(name: "\($0.0)card", path: file("\($0.0).wav"), ppm: $0.1, period: 441, buffer: 1764) },
                                                 inDirectory: directory)
        var receivers: [String: (process: ChildProcess, port: Int)] = [:]
        defer { for receiver in receivers.values { _ = ShairportSync.stop(receiver.process) } }
        for (index, (name, _)) in cards.enumerated() {
            let port = try Self.freePort()
            let configuration = file("\(name).conf")
            try ShairportSync.configuration(name: name, port: port, card: "\(name)card", driftTolerance: driftTolerance, udpPortBase: 6101 + 20 * index)
                .write(toFile: configuration, atomically: true, encoding: .utf8)
            receivers[name] = (try ShairportSync.start(configuration: configuration, alsa: alsa, log: file("\(name).log")), port)
        }
        // Each listens once its RTSP port takes a connection.
        for (name, receiver) in receivers { try await Self.waitForListener(port: receiver.port, name: name) }

        // The anchor: pyatv straight to shairport-sync s0.
        Console.progress("pyatv → shairport-sync (the anchor)…")
        let anchorStart = MonotonicClock().now()
        // Debian's shairport-sync 3.3.8 dies at pyatv's TEARDOWN ("free(): invalid pointer",
        // after the whole stream played), and atvremote then exits with 1: the figure is its
        // first sound, so that is reported, not fatal.
        try await sender(music, port: receivers["s0"]!.port, log: file("atvremote-anchor.log"), mustSucceed: false)

        // The house: Tutti rooms a and b, shairport-sync s1 and s2 as AirPlay rooms.
        let house = try ChildProcess(name: "server", executable: executable, arguments: [
            "server", "--listen", "127.0.0.1:0", "--http", "off", "--mpd", "off", "--snapcast", "off", "--snapcast-control", "off", "--announce", "off",
            "--airplay", "127.0.0.1:0", "--state-dir", file("house"),
            "--airplay-room", "s1=127.0.0.1:\(receivers["s1"]!.port)", "--airplay-room", "s2=127.0.0.1:\(receivers["s2"]!.port)"], standardError: file("server.log"))
        var speakers: [ChildProcess] = []
        defer {
            for speaker in speakers { speaker.interrupt() }
            house.interrupt()
        }
        let port = Int(try house.waitForLine(containing: "listening on").split(separator: ":").last!.split(separator: " ").first!)!
        let airplayLine = try house.waitForLine(containing: "AirPlay senders on")
        guard let airplayPort = airplayLine.split(separator: "127.0.0.1:").last?.split(separator: " ").first.flatMap({ Int($0) }) else {
            throw BenchError("the house named no AirPlay port: \(airplayLine)")
        }
        for (name, clock, device) in [("a", "35", "40"), ("b", "-25", "-60")] {
            speakers.append(try ChildProcess(name: name, executable: executable, arguments: [
                "speaker", "--server", "127.0.0.1:\(port)", "--name", name, "--state-dir", file("speaker-\(name)"), "--output", "virtual:" + file("\(name).wav"),
                "--clock-drift-ppm", clock, "--device-drift-ppm", device], standardError: file("\(name).log")))
        }
        let token = try ControllerTokenFile.read(ControllerTokenFile.path(in: file("house")))
        Console.progress("waiting for rooms a, b, s1, s2 to connect and settle…")
        try await Self.waitForRooms(["a", "b", "s1", "s2"], port: port, token: token)
        try await Self.waitForText("streaming to the AirPlay receiver", count: 2, inFile: file("server.log"))

        Console.progress("pyatv → the house's group (a, b, s1, s2)…")
        let start = MonotonicClock().now()
        try await sender(music, port: airplayPort, log: file("atvremote.log"))
        // What was sent ahead plays out.
        try await Task.sleep(nanoseconds: 3_000_000_000)
        for speaker in speakers { speaker.interrupt() }
        house.interrupt()
        speakers.removeAll()
        for receiver in receivers.values { _ = ShairportSync.stop(receiver.process) }
        let resyncs = Dictionary(uniqueKeysWithValues: ["s0", "s1", "s2"].map { ($0, ShairportSync.resyncs(inLog: file("\($0).log"))) })
        receivers.removeAll()

        Console.progress("analysing the cards…")
        let a = try VirtualCapture(path: file("a.wav"))
        guard let first = a.firstSoundFrame(), a.emissionTime(ofFrame: Double(first)) > Double(start) else { throw BenchError("room a played nothing after the sender started") }
        let latency = (a.emissionTime(ofFrame: Double(first)) - Double(start)) / 1e6
        let s0 = try VirtualCapture(path: file("s0.wav"))
        guard let anchorFirst = s0.firstSoundFrame(), s0.emissionTime(ofFrame: Double(anchorFirst)) > Double(anchorStart) else { throw BenchError("shairport-sync s0 played nothing") }
        let anchorLatency = (s0.emissionTime(ofFrame: Double(anchorFirst)) - Double(anchorStart)) / 1e6
        let reference = Array(a.samples[(first * 2)..<max(first * 2, a.samples.count - 96_000)])
        let rooms = [SyncAnalysis.Room(name: "a", capture: a, latencyNanoseconds: 0),
                     SyncAnalysis.Room(name: "b", capture: try VirtualCapture(path: file("b.wav")), latencyNanoseconds: 0),
                     SyncAnalysis.Room(name: "s1", capture: try VirtualCapture(path: file("s1.wav")).converted(toSampleRate: 48000), latencyNanoseconds: 0),
                     SyncAnalysis.Room(name: "s2", capture: try VirtualCapture(path: file("s2.wav")).converted(toSampleRate: 48000), latencyNanoseconds: 0)]
        let analysis = SyncAnalysis.analyse(rooms: rooms, reference: reference, interval: 4800)
        func skew(_ x: String, _ y: String) -> Skew {
            // After the first 10 s: shairport-sync's own start hunts by up to a millisecond or more.
            let values = analysis.series.filter { $0.frame >= 10 * 48000 }.compactMap { point in
                point.heard[x].flatMap { hx in point.heard[y].map { abs(hx - $0) / 1000 } }
            }.sorted()
            return Skew(pair: "\(x)–\(y)", p50Microseconds: nearestRankPercentile(values, 50), p99Microseconds: nearestRankPercentile(values, 99),
                        maxMicroseconds: values.last ?? .nan, checkpoints: values.count,
                        jumps: analysis.jumps.filter { $0.room == x || $0.room == y }.count)
        }
        let result = Result(senderToSoundMilliseconds: latency, anchorSenderToSoundMilliseconds: anchorLatency,
                            skews: [skew("a", "b"), skew("s1", "s2"), skew("a", "s1"), skew("a", "s2")],
                            shairportResyncs: resyncs, shairportDriftToleranceSeconds: driftTolerance, workDirectory: directory)
        if json {
            Console.output(try Format.json(result))
            return
        }
        Console.output(Format.table(header: ["sender to sound", "ms"], rows: [
            ["pyatv → Tutti group (room a's card)", Format.fixed(latency, 1)],
            ["pyatv → shairport-sync (anchor)", Format.fixed(anchorLatency, 1)],
        ]))
        Console.output("both from launching atvremote (its own start included) to the first sound on the card\n\n")
        Console.output(Format.table(header: ["skew after 10 s", "p50 µs", "p99 µs", "max µs", "checkpoints", "jumps"], rows: result.skews.map {
            [$0.pair, Format.fixed($0.p50Microseconds, 1), Format.fixed($0.p99Microseconds, 1), Format.fixed($0.maxMicroseconds, 1), "\($0.checkpoints)", "\($0.jumps)"]
        }))
        Console.output("a, b: Tutti rooms; s1, s2: shairport-sync as AirPlay rooms of the same group (one stream, as owntone and Music Assistant send to AirPlay groups), "
                       + "drift tolerance \(driftTolerance * 1000) ms; resyncs \(resyncs.sorted { $0.key < $1.key }.map { "\($0.key) \($0.value)" }.joined(separator: ", ")); logs in \(directory)\n")
    }

    /// pyatv streaming `file` to the receiver on `port`, to its end.
    private func sender(_ file: String, port: Int, log: String, mustSucceed: Bool = true) async throws {
        let process = try ChildProcess(name: "atvremote", executable: atvremote, arguments: [
            "--manual", "--address", "127.0.0.1", "--port", "\(port)", "--protocol", "raop", "--id", "tutti-bench-\(port)",
            "--service-properties", ";md=0,1,2;et=0;cn=0,1;tp=UDP", "stream_file=\(file)"], standardError: log)
        let status = process.waitForExit(timeout: seconds + 60)
        if status != 0 {
            if mustSucceed { throw BenchError("atvremote exited with \(status): \(log)") }
            Console.progress("atvremote exited with \(status) (\(log)); carrying on")
        }
    }

    static func freePort() throws -> Int {
        let channel = try ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton).bind(host: "127.0.0.1", port: 0).wait()
        defer { try? channel.close().wait() }
        return channel.localAddress!.port!
    }

    static func waitForListener(port: Int, name: String) async throws {
        let deadline = MonotonicClock().now() + 20_000_000_000
        while MonotonicClock().now() < deadline {
            if let channel = try? await ClientBootstrap(group: MultiThreadedEventLoopGroup.singleton).connect(host: "127.0.0.1", port: port).get() {
                try? await channel.close()
                return
            }
            try await Task.sleep(nanoseconds: 100_000_000)
        }
        throw BenchError("shairport-sync \(name) did not listen on \(port) within 20 s")
    }

    static func waitForRooms(_ names: Set<String>, port: Int, token: ControllerToken) async throws {
        let group = MultiThreadedEventLoopGroup.singleton
        let deadline = MonotonicClock().now() + 30_000_000_000
        while MonotonicClock().now() < deadline {
            let report = try await ControlClient.send(.rooms, host: "127.0.0.1", port: port, token: token, group: group).rooms
            for speaker in report?.waiting ?? [] where names.contains(speaker.name) {
                _ = try? await ControlClient.send(.admit(speaker: speaker.code), host: "127.0.0.1", port: port, token: token, group: group)
            }
            if let rooms = report?.rooms, Set(rooms.map(\.name)) == names, rooms.allSatisfy(\.hasSettledClock) { return }
            try await Task.sleep(nanoseconds: 100_000_000)
        }
        throw BenchError("rooms \(names.sorted()) did not connect and settle within 30 s")
    }

    static func waitForText(_ text: String, count: Int, inFile path: String) async throws {
        let deadline = MonotonicClock().now() + 30_000_000_000
        while MonotonicClock().now() < deadline {
            if let content = try? String(contentsOfFile: path, encoding: .utf8), content.components(separatedBy: text).count - 1 >= count { return }
            try await Task.sleep(nanoseconds: 100_000_000)
        }
        throw BenchError("\(path): \"\(text)\" not seen \(count) times within 30 s")
    }
}
