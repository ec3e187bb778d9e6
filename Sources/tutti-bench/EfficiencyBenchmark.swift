import ArgumentParser
import Foundation
import NIOPosix
import Synchronization
import TuttiCore
import TuttiHouse
import TuttiProtocol
import TuttiSimulation

#if canImport(Glibc)
import Glibc
#endif

/// `tutti-bench efficiency`: what a room and a house cost, side by side with Snapcast on the
/// same music and the same machine. Snapcast: Debian's `snapserver` reading a pipe that ffmpeg
/// feeds in real time (the feeder is not counted), and `snapclient`s playing to
/// `--player file:filename=null`. Tutti: `tutti server` playing a queue, and `tutti speaker`s on
/// `--output null`. For each room count, each process's CPU (% of one core, from /proc over
/// the measured window, after a warm-up) and peak RSS (VmHWM); for Tutti also the house's fill
/// rate (a queue that fits a room's buffer: its length over the time each speaker took to
/// receive 99 % of its bytes, from /proc; a longer one: the rooms' reported × real time while
/// filling, the median room) and the time from `play` to the first
/// sample heard. Snapcast has no queue: its figures are measured once per room count and shown
/// beside each queue length.
struct EfficiencyBenchmark: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "efficiency",
        abstract: "CPU and memory of a room and a house, beside snapclient and snapserver.",
        discussion: """
            Generates CD-quality FLAC music (44.1 kHz, 16-bit, stereo; 3-minute tracks) and plays it \
            for each --rooms count: with Snapcast (snapserver fed by ffmpeg in real time, snapclients \
            to a null file) and with Tutti (one queue per --queue-minutes, speakers on --output null). \
            Each run warms up for --warmup seconds, then is measured for --seconds. Needs snapserver, \
            snapclient and ffmpeg; run the release build (`swift build -c release`). \
            Example: tutti-bench efficiency --rooms 1,4 --queue-minutes 3 --seconds 20
            """)

    @Option(help: "Room counts, comma separated.") var rooms = "1,4,16"
    @Option(name: .customLong("speaker-period-ms"), help: "The speakers' device period (tutti speaker --period-ms).") var speakerPeriodMilliseconds = 10.0
    @Option(name: .customLong("queue-minutes"), help: "Queue lengths in minutes, comma separated (multiples of 3).") var queueMinutes = "3,30"
    @Option(help: "Seconds measured in steady state.") var seconds = 40.0
    @Option(help: "Seconds of warm-up before measuring.") var warmup = 10.0
    @Option(name: .customLong("media-dir"), help: "Where generated music is kept.") var mediaDirectory: String?
    @Flag(help: "Print the results as JSON.") var json = false

    struct Usage: Encodable {
        var cpuPercent: Double
        var peakRSSMebibytes: Double
    }

    struct Row: Encodable {
        var rooms: Int
        var queueMinutes: Int
        var snapserver: Usage
        var snapclient: Usage
        var tuttiServer: Usage
        var tuttiSpeaker: Usage
        /// Speaker ÷ snapclient.
        var cpuRatio: Double
        var rssRatio: Double
        /// The rooms' median fill rate while filling, × real time.
        var fillRate: Double?
        var startMilliseconds: Double
        /// The slowest answer to a control command (`rooms`) while the rooms filled.
        var slowestReplyMilliseconds: Double
        /// What a room holds for 5 minutes of this music: the rooms' median bytes received by
        /// the end of the warm-up over the seconds of audio that was, × 300 s, in MiB.
        var heldMebibytesPer5Minutes: Double?
    }

    func parsedList(_ text: String, _ name: String) throws -> [Int] {
        let values = text.split(separator: ",").compactMap { Int($0.trimmingCharacters(in: .whitespaces)) }
        guard !values.isEmpty, values.allSatisfy({ $0 > 0 }) else { throw ValidationError("--\(name) needs positive whole numbers, comma separated: \(text)") }
        return values
    }

    mutating func validate() throws {
        _ = try parsedList(rooms, "rooms")
        guard try parsedList(queueMinutes, "queue-minutes").allSatisfy({ $0 % 3 == 0 }) else {
            throw ValidationError("--queue-minutes must be multiples of 3 (the queue is made of 3-minute tracks): \(queueMinutes)")
        }
        guard seconds >= 5, warmup >= 0 else { throw ValidationError("--seconds must be at least 5, --warmup at least 0") }
        for program in ["snapserver", "snapclient", "ffmpeg"] where !Self.onPath(program) {
            throw ValidationError("\(program) is not installed (apt-get install \(program == "ffmpeg" ? "ffmpeg" : program); make deps does)")
        }
    }

    static func onPath(_ program: String) -> Bool {
        (ProcessInfo.processInfo.environment["PATH"] ?? "").split(separator: ":").contains { access("\($0)/\(program)", X_OK) == 0 }
    }

    func run() async throws {
        let roomCounts = try parsedList(rooms, "rooms"), queues = try parsedList(queueMinutes, "queue-minutes")
        let media = try MediaCache.directory(mediaDirectory, subdirectory: "efficiency")
        let track = media + "/track-3min.flac"
        try MediaCache.make(track, regenerate: false) { path in
            Console.progress("generating 3 minutes of CD-quality FLAC…")
            try BenchProcess.ffmpeg(["-f", "lavfi", "-i", "sine=frequency=440:sample_rate=44100:duration=180",
                                     "-f", "lavfi", "-i", "anoisesrc=color=pink:sample_rate=44100:amplitude=0.2:duration=180:seed=7",
                                     "-filter_complex", "amix=inputs=2,pan=stereo|c0=c0|c1=0.8*c0", "-c:a", "flac", "-sample_fmt", "s16", path])
        }
        var rows: [Row] = []
        for count in roomCounts {
            Console.progress("Snapcast, \(count) room\(count == 1 ? "" : "s"): \(Int(warmup)) s warm-up, \(Int(seconds)) s measured…")
            let snapcast = try await measureSnapcast(rooms: count, music: track)
            for minutes in queues {
                Console.progress("Tutti, \(count) room\(count == 1 ? "" : "s"), a \(minutes)-minute queue: \(Int(warmup)) s warm-up, \(Int(seconds)) s measured…")
                let tutti = try await measureTutti(rooms: count, queue: Array(repeating: track, count: minutes / 3))
                rows.append(Row(rooms: count, queueMinutes: minutes, snapserver: snapcast.server, snapclient: snapcast.client,
                                tuttiServer: tutti.server, tuttiSpeaker: tutti.speaker,
                                cpuRatio: tutti.speaker.cpuPercent / max(snapcast.client.cpuPercent, 1e-9),
                                rssRatio: tutti.speaker.peakRSSMebibytes / max(snapcast.client.peakRSSMebibytes, 1e-9),
                                fillRate: tutti.fillRate, startMilliseconds: tutti.startMilliseconds,
                                slowestReplyMilliseconds: tutti.slowestReplyMilliseconds, heldMebibytesPer5Minutes: tutti.heldPer5Minutes))
            }
        }
        if json {
            let encoder = JSONEncoder()
            encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
            Console.output(String(decoding: try encoder.encode(rows), as: UTF8.self) + "\n")
            return
        }
        func usage(_ u: Usage) -> String { String(format: "%6.2f %% %5.1f MiB", u.cpuPercent, u.peakRSSMebibytes) }
        Console.output("CPU in % of one core (mean over \(Int(seconds)) s of steady state) and peak RSS; speakers and clients: the mean of the rooms; speakers' device period \(Format.fixed(speakerPeriodMilliseconds, 0)) ms\n")
        Console.output("rooms queue   snapserver 0.26      snapclient 0.26      tutti server         tutti speaker        speaker÷client CPU  RSS    fill     play→sound  slowest reply  5 min held\n")
        for row in rows {
            Console.output(String(format: "%-5d %3d min  ", row.rooms, row.queueMinutes) + usage(row.snapserver) + "  " + usage(row.snapclient) + "  "
                           + usage(row.tuttiServer) + "  " + usage(row.tuttiSpeaker) + String(format: "  %13.2f×  %5.1f×", row.cpuRatio, row.rssRatio)
                           + (row.fillRate.map { String(format: "  %5.0f×", $0) } ?? "      –") + String(format: "  %6.0f ms  %7.0f ms", row.startMilliseconds, row.slowestReplyMilliseconds)
                           + (row.heldMebibytesPer5Minutes.map { String(format: "  %6.1f MiB\n", $0) } ?? "           –\n"))
        }
        // The secure channel's share, measured now on this machine through the channel's own
        // record code: the CPU columns above are with it.
        let cost = SecureRecordCost.measure()
        let streamBytesPerSecond = ((try? FileManager.default.attributesOfItem(atPath: track))?[.size] as? Int).map { Double($0) / 180 } ?? 0
        let fill = rows.compactMap(\.fillRate).min() ?? 0
        Console.output(String(format: "encryption (ChaCha20-Poly1305, in the columns above): seals %.0f MB/s, opens %.0f MB/s on this machine; a room's stream (%.0f kB/s) costs the house %.4f %% of a core per room and a speaker %.4f %% as it plays, %.2f %% and %.2f %% while it fills at %.0f× real time\n",
                              cost.seal / 1e6, cost.open / 1e6, streamBytesPerSecond / 1e3,
                              100 * streamBytesPerSecond / cost.seal, 100 * streamBytesPerSecond / cost.open,
                              100 * streamBytesPerSecond * fill / cost.seal, 100 * streamBytesPerSecond * fill / cost.open, fill))
    }

    // MARK: Snapcast

    func measureSnapcast(rooms count: Int, music: String) async throws -> (server: Usage, client: Usage) {
        let directory = try BenchDirectory("snapcast")
        defer { directory.remove() }
        let fifo = directory.path + "/snapfifo"
        guard mkfifo(fifo, 0o600) == 0 else { throw BenchError("mkfifo \(fifo): \(String(cString: strerror(errno)))") }
        let port = try FreePort.pick()
        // A configuration of its own: Debian's /etc/snapserver.conf already defines a source.
        let config = directory.path + "/snapserver.conf"
        guard FileManager.default.createFile(atPath: config, contents: Data()) else { throw BenchError("cannot write \(config)") }
        let server = try BenchDaemon("snapserver", ["--config", config, "--stream.source", "pipe://\(fifo)?name=default&sampleformat=48000:16:2",
                                                    "--stream.port", "\(port)", "--stream.bind_to_address", "127.0.0.1",
                                                    "--tcp.enabled", "false", "--http.enabled", "false", "--server.datadir", directory.path,
                                                    "--logging.sink", "stderr"], log: directory.path + "/snapserver.log")
        defer { server.stop() }
        // The source, in real time, as a player would feed snapserver's pipe; not measured.
        let feeder = try BenchDaemon("ffmpeg", ["-nostdin", "-hide_banner", "-loglevel", "error", "-re", "-stream_loop", "-1", "-i", music,
                                                "-f", "s16le", "-ar", "48000", "-ac", "2", "-y", fifo], log: directory.path + "/feeder.log")
        defer { feeder.stop() }
        try await FreePort.waitUntilListening(port, what: "snapserver")
        let clients = try (0..<count).map { index in
            try BenchDaemon("snapclient", ["-h", "127.0.0.1", "-p", "\(port)", "--hostID", "room\(index)", "--player", "file:filename=null",
                                           "--logsink", "null"], log: directory.path + "/snapclient\(index).log")
        }
        defer { BenchDaemon.stopAll(clients) }
        let processes = [server] + clients
        try await Task.sleep(nanoseconds: UInt64(warmup * 1e9))
        let usage = try await measure(processes)
        for process in processes where !process.isRunning { throw BenchError("\(process.name) ended early: see \(process.log)") }
        return (usage[0], Self.mean(Array(usage.dropFirst())))
    }

    // MARK: Tutti

    func measureTutti(rooms count: Int, queue: [String]) async throws -> (server: Usage, speaker: Usage, fillRate: Double?, startMilliseconds: Double,
                                                                         slowestReplyMilliseconds: Double, heldPer5Minutes: Double?) {
        let directory = try BenchDirectory("tutti")
        defer { directory.remove() }
        let tutti = BenchDaemon.tuttiExecutable
        let port = try FreePort.pick()
        let server = try BenchDaemon(tutti, ["server", "--listen", "127.0.0.1:\(port)", "--http", "off", "--mpd", "off", "--snapcast", "off",
                                             "--snapcast-control", "off", "--state-dir", directory.path + "/state"],
                                     log: directory.path + "/server.log")
        defer { server.stop() }
        try await FreePort.waitUntilListening(port, what: "tutti server")
        let speakers = try (0..<count).map { index in
            try BenchDaemon(tutti, ["speaker", "--server", "127.0.0.1:\(port)", "--name", "room\(index)", "--output", "null",
                                    "--state-dir", directory.path + "/speaker\(index)",
                                    "--period-ms", "\(speakerPeriodMilliseconds)"],
                            log: directory.path + "/speaker\(index).log")
        }
        defer { BenchDaemon.stopAll(speakers) }
        // A house filling 64 rooms on this 2-core machine, beside the 64 speakers, has answered
        // in 12 s: the slowest answer is a figure, not a failure.
        func send(_ command: ControlCommand) async throws -> ControlReply {
            try await ControlClient.send(command, host: "127.0.0.1", port: port, token: try ControllerTokenFile.read(directory.path + "/state/controller-token"),
                                         group: MultiThreadedEventLoopGroup.singleton, timeoutNanoseconds: 120_000_000_000)
        }
        let deadline = Stopwatch.now() + 60_000_000_000
        while true {
            let report = try await send(.rooms).rooms
            for speaker in report?.waiting ?? [] { _ = try await send(.admit(speaker: speaker.code)) }
            if report?.rooms.filter({ $0.clockErrorMicroseconds != nil }).count == count { break }
            guard Stopwatch.now() < deadline else { throw BenchError("the \(count) speakers did not connect and settle within 60 s: see \(directory.path)") }
            try await Task.sleep(nanoseconds: 100_000_000)
        }
        let sent = Stopwatch.now()
        let warmupEnd = sent + Int64(warmup * 1e9)
        // The rooms' received bytes, read from /proc from before play while they fill: a house
        // starved of CPU beside 64 speakers answers `rooms` only once they are full, which gives
        // a bound, not the rate (see `fillRate(bytes:queueSeconds:)`).
        let received = ReceivedBytes(speakers, from: sent, until: warmupEnd)
        guard let started = try await send(.play(files: queue)).started else { throw BenchError("play was not answered with a start") }
        let startMilliseconds = Double(Stopwatch.now() - sent) / 1e6 + Double(started.startsInMs)
        // Each room's fill rate: audio it holds or has heard per second since play, at its
        // largest (when its buffer is full); a room reports its exact rate only once it holds
        // the whole queue, which a 30-minute queue never fits in.
        var fills: [String: Double] = [:]
        var slowestReply = 0.0
        while Stopwatch.now() < warmupEnd {
            let elapsed = Double(Stopwatch.now() - sent) / 1e9
            let asked = Stopwatch.now()
            let reply = try await send(.rooms)
            slowestReply = max(slowestReply, Double(Stopwatch.now() - asked) / 1e6)
            for room in reply.rooms?.rooms ?? [] where elapsed > 0.5 {
                if let buffered = room.bufferSeconds { fills[room.name] = max(fills[room.name] ?? 0, (buffered + elapsed) / elapsed) }
            }
            try await Task.sleep(nanoseconds: 250_000_000)
        }
        let processes = [server] + speakers
        let usage = try await measure(processes)
        for process in processes where !process.isRunning { throw BenchError("\(process.name) ended early: see \(process.log)") }
        var rates = fills.values.sorted()
        let queueSeconds = Double(queue.count * 180)
        // Audio received by the end of the warm-up: the queue, or the buffer's depth ahead of
        // a playhead that started `startMilliseconds` after play.
        let bufferSeconds = Double(House.Configuration().bufferDepthNanoseconds) / 1e9
        let receivedSeconds = min(queueSeconds, bufferSeconds + warmup - startMilliseconds / 1000)
        let receivedBytes = await received.samples().compactMap { $0.last?.bytes }.sorted()
        let heldPer5Minutes = receivedBytes.isEmpty ? nil : Double(receivedBytes[receivedBytes.count / 2]) / receivedSeconds * 300 / 1_048_576
        if queueSeconds * 1e9 < Double(House.Configuration().bufferDepthNanoseconds) {
            // The whole queue fits in a room's buffer: its fill ends when its bytes stop coming.
            // Only when every room finished within the warm-up; otherwise the reports' bound.
            let fromBytes = await received.samples().map { Self.fillRate(bytes: $0, queueSeconds: queueSeconds) }
            if !fromBytes.isEmpty, fromBytes.allSatisfy({ $0 != nil }) {
                rates = fromBytes.compactMap { $0 }.sorted()
            } else {
                Console.progress("  not every room finished filling within the \(Int(warmup)) s warm-up: fill is the rooms' reported bound; a longer --warmup measures it")
            }
        }
        return (usage[0], Self.mean(Array(usage.dropFirst())), rates.isEmpty ? nil : rates[rates.count / 2], startMilliseconds, slowestReply, heldPer5Minutes)
    }

    /// A room's fill rate from its received bytes over time (seconds since play, bytes since
    /// play): the queue's length over the time it took to receive 99 % of what it received by
    /// the end of the warm-up. Clock sync and status add a few kB over the warm-up, far under
    /// 1 % of a queue's chunks. Nil when the room received nothing, or was still filling at the
    /// end (over 0.5 % of its bytes in the last second: a room filling at even 2× real time
    /// receives 1 % of a 3-minute queue a second), when the time would be the warm-up's.
    static func fillRate(bytes samples: [(seconds: Double, bytes: Int64)], queueSeconds: Double) -> Double? {
        guard let last = samples.last, last.bytes > 0,
              let secondBefore = samples.last(where: { $0.seconds <= last.seconds - 1 }),
              Double(last.bytes - secondBefore.bytes) < 0.005 * Double(last.bytes),
              let full = samples.first(where: { Double($0.bytes) >= 0.99 * Double(last.bytes) }), full.seconds > 0 else { return nil }
        return queueSeconds / full.seconds
    }

    // MARK: Measuring

    /// Each process's CPU over `seconds` from now, and its peak RSS at the end.
    func measure(_ processes: [BenchDaemon]) async throws -> [Usage] {
        let before = processes.map { $0.cpuSeconds() }, start = Stopwatch.now()
        try await Task.sleep(nanoseconds: UInt64(seconds * 1e9))
        let elapsed = Double(Stopwatch.now() - start) / 1e9
        return zip(processes, before).map { process, before in
            Usage(cpuPercent: (process.cpuSeconds() - before) / elapsed * 100, peakRSSMebibytes: process.peakRSSMebibytes())
        }
    }

    static func mean(_ usages: [Usage]) -> Usage {
        guard !usages.isEmpty else { return Usage(cpuPercent: 0, peakRSSMebibytes: 0) }
        return Usage(cpuPercent: usages.map(\.cpuPercent).reduce(0, +) / Double(usages.count),
                     peakRSSMebibytes: usages.map(\.peakRSSMebibytes).reduce(0, +) / Double(usages.count))
    }
}

/// A long-running child process of a benchmark (posix_spawn), measured through /proc.
final class BenchDaemon: @unchecked Sendable {
    let name: String
    let log: String
    let pid: pid_t
    private var reaped = false

    /// `tutti` beside this executable (the same build).
    static var tuttiExecutable: String {
        let me = (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")) ?? CommandLine.arguments[0]
        return URL(fileURLWithPath: me).deletingLastPathComponent().appendingPathComponent("tutti").path
    }

    /// Starts `executable` (looked up in PATH) with stdin from /dev/null and its output to `log`.
    init(_ executable: String, _ arguments: [String], log: String) throws {
        name = URL(fileURLWithPath: executable).lastPathComponent
        self.log = log
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        posix_spawn_file_actions_addopen(&actions, 1, log, O_WRONLY | O_CREAT | O_TRUNC, 0o644)
        posix_spawn_file_actions_adddup2(&actions, 1, 2)
        let argv: [UnsafeMutablePointer<CChar>?] = ([executable] + arguments).map { strdup($0) } + [nil]
        defer { for p in argv { free(p) } }
        var pid: pid_t = 0
        let spawned = SpawnSignalMask.withNoneBlocked { posix_spawnp(&pid, executable, &actions, nil, argv, environ) }
        guard spawned == 0 else { throw BenchError("cannot start \(executable): \(String(cString: strerror(spawned)))") }
        self.pid = pid
    }

    var isRunning: Bool {
        guard !reaped else { return false }
        var status: Int32 = 0
        if waitpid(pid, &status, WNOHANG) == pid { reaped = true; return false }
        return true
    }

    func cpuSeconds() -> Double { ProcessUsage.cpuSeconds(of: pid) }
    func peakRSSMebibytes() -> Double { ProcessUsage.peakResidentMebibytes(of: pid) }

    /// SIGINT, then SIGKILL after 5 s; reaps it.
    func stop() { Self.stopAll([self]) }

    /// Interrupts every process at once, then kills those still running 5 s later: stopped
    /// one by one, 64 snapclients that ignored SIGINT while playing took 5 minutes (they were
    /// spawned with it blocked then; see `SpawnSignalMask`).
    static func stopAll(_ daemons: [BenchDaemon]) {
        let running = daemons.filter(\.isRunning)
        for daemon in running { kill(daemon.pid, SIGINT) }
        let deadline = Stopwatch.now() + 5_000_000_000
        var status: Int32 = 0
        for daemon in running {
            while !daemon.reaped && Stopwatch.now() < deadline {
                if waitpid(daemon.pid, &status, WNOHANG) == daemon.pid { daemon.reaped = true } else { usleep(10_000) }
            }
            if !daemon.reaped {
                kill(daemon.pid, SIGKILL)
                waitpid(daemon.pid, &status, 0)
                daemon.reaped = true
            }
        }
    }
}

/// A temporary directory for one run's logs and state.
struct BenchDirectory {
    let path: String
    init(_ label: String) throws {
        var template = Array((FileManager.default.temporaryDirectory.path + "/tutti-bench-\(label)-XXXXXX").utf8CString)
        guard let made = template.withUnsafeMutableBufferPointer({ mkdtemp($0.baseAddress!) }) else { throw BenchError("mkdtemp failed") }
        path = String(cString: made)
    }
    func remove() { try? FileManager.default.removeItem(atPath: path) }
}

/// Loopback ports for servers that need one named up front.
enum FreePort {
    /// A port the kernel hands out for 127.0.0.1 now (free, unless taken before it is used).
    static func pick() throws -> Int {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(fd) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, length) == 0 && getsockname(fd, $0, &length) == 0 } }
        guard bound else { throw BenchError("cannot find a free port: \(String(cString: strerror(errno)))") }
        return Int(UInt16(bigEndian: address.sin_port))
    }

    /// Returns once something accepts TCP connections on 127.0.0.1:`port` (within 20 s).
    static func waitUntilListening(_ port: Int, what: String) async throws {
        let deadline = Stopwatch.now() + 20_000_000_000
        while Stopwatch.now() < deadline {
            let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
            var address = sockaddr_in()
            address.sin_family = sa_family_t(AF_INET)
            address.sin_port = in_port_t(UInt16(port).bigEndian)
            address.sin_addr.s_addr = inet_addr("127.0.0.1")
            let connected = withUnsafePointer(to: &address) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) == 0 } }
            close(fd)
            if connected { return }
            try await Task.sleep(nanoseconds: 50_000_000)
        }
        throw BenchError("\(what) did not listen on 127.0.0.1:\(port) within 20 s")
    }
}

/// Samples each process's read bytes every 20 ms on a thread of its own, from a start time
/// until an end time; the figures are relative to the first sample.
final class ReceivedBytes: @unchecked Sendable {
    private let done = Mutex<[[(seconds: Double, bytes: Int64)]]?>(nil)

    init(_ processes: [BenchDaemon], from start: Int64, until end: Int64) {
        let pids = processes.map(\.pid)
        let thread = Thread { [self] in
            let first = pids.map { ProcessUsage.bytesRead(by: $0) }
            var series = pids.map { _ in [(seconds: Double, bytes: Int64)]() }
            while Stopwatch.now() < end {
                let seconds = Double(Stopwatch.now() - start) / 1e9
                for (index, pid) in pids.enumerated() {
                    series[index].append((seconds, ProcessUsage.bytesRead(by: pid) - first[index]))
                }
                usleep(20_000)
            }
            done.withLock { $0 = series }
        }
        thread.start()
    }

    /// Each process's samples, once the end time has passed.
    func samples() async -> [[(seconds: Double, bytes: Int64)]] {
        while true {
            if let series = done.withLock({ $0 }) { return series }
            try? await Task.sleep(nanoseconds: 20_000_000)
        }
    }
}
