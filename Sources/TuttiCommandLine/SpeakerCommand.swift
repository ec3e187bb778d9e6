import ArgumentParser
import NIOCore
import NIOPosix
import TuttiCore
import TuttiDevices
import TuttiProtocol
import TuttiSpeaker
#if canImport(Glibc)
import Glibc
#endif

/// A room: `tutti-speaker`, the light executable a small computer runs (no FFmpeg, no
/// Foundation: docs/EFFICIENCY.md), and `tutti speaker`, which becomes it.
public struct SpeakerCommand: AsyncParsableCommand {
    public static let configuration = CommandConfiguration(
        commandName: "tutti-speaker",
        abstract: "Run a room: play the house's stream in sync with every other room.",
        discussion: """
            The room keeps minutes of audio from the server, encoded, and plays each sample at the instant the \
            server's timeline says, correcting clock and sound-card drift by inaudible resampling.
            For testing on one machine, --clock-offset-ms/--clock-drift-ppm make this process see a clock that is \
            off and drifting, and --device-drift-ppm gives the virtual sound card a crystal error.
            Without --output: ALSA "default" if the machine has a sound card, else virtual:tutti-<name>.wav.
            Without --server, it finds the house through Avahi (zero-config): `tutti speaker --name kitchen` is enough.
            The first time, the room waits to be admitted: its log shows a code; on the house run             `tutti ctl admit kitchen` (or press Admit in the web UI) and check the house shows the same code.             From then on it plays from that house only, encrypted.
            """)

    @Option(help: ArgumentHelp("The house server's TCP/UDP address.",
                               discussion: "Without it, the house announced on the network through Avahi; the speaker waits for one to appear."))
    var server: HostPort?

    @Option(help: "Without --server: the name of the house to play, when the network has several.")
    var house: String?

    @Option(help: "The room's name, e.g. kitchen.")
    var name: String

    @Option(name: .customLong("state-dir"), help: ArgumentHelp(
        "Where the room keeps its identity key and the house it belongs to.",
        discussion: "Default: ~/.local/state/tutti/speaker-NAME ($XDG_STATE_HOME honoured). Delete its house.json to move the room to another house."))
    var stateDirectory: String?

    @Option(name: .shortAndLong, help: "alsa:<pcm>, virtual:<path> or null.")
    var output: String?

    @Option(name: .customLong("clock-offset-ms"), parsing: .unconditional, help: "Simulated offset of this process's clock, in ms.")
    var clockOffsetMilliseconds: Double = 0

    @Option(name: .customLong("clock-drift-ppm"), parsing: .unconditional, help: "Simulated drift of this process's clock, in ppm.")
    var clockDriftPPM: Double = 0

    @Option(name: .customLong("device-drift-ppm"), parsing: .unconditional, help: "Crystal error of the virtual sound card, in ppm.")
    var deviceDriftPPM: Double = 0

    @Option(name: .customLong("latency-ms"), help: "Fixed delay after the DAC (amplifier, speaker) to compensate, in ms.")
    var latencyMilliseconds: Double = 0

    @Option(name: .customLong("period-ms"), help: ArgumentHelp(
        "How much audio the sound card takes at once, in ms (null and virtual outputs too).",
        discussion: "A longer period wakes the room less often: at 50 ms a room wakes 100 times a second instead of 225, a third less CPU (a Raspberry Pi Zero). Commands then take effect later: the room commits audio its ring's lead (50 ms, or two periods if longer), a 5 ms block and its card's four periods ahead (10 ms: 95 ms; 50 ms: 305 ms)."))
    var periodMilliseconds: Double = 10

    @Option(name: .customLong("clock-truth"), help: ArgumentHelp(
        "Write the clock estimate's true error every 100 ms to this file as JSON lines: for tests and benchmarks whose house runs on this machine's monotonic clock.",
        visibility: .hidden))
    var clockTruthPath: String?

    public init() {}

    public func validate() throws {
        guard !name.isEmpty, name.utf8.count <= 64 else { throw ValidationError("--name must be 1 to 64 bytes") }
        guard abs(clockDriftPPM) <= 1000, abs(deviceDriftPPM) <= 1000 else { throw ValidationError("drifts beyond ±1000 ppm are not clocks") }
        guard latencyMilliseconds >= 0 && latencyMilliseconds <= 2000 else { throw ValidationError("--latency-ms must be between 0 and 2000") }
        guard periodMilliseconds >= 2 && periodMilliseconds <= 100 else { throw ValidationError("--period-ms must be between 2 and 100, got \(periodMilliseconds)") }
    }

    public func run() async throws {
        let clock = SkewedClock(base: MonotonicClock(), offsetNanoseconds: Int64(clockOffsetMilliseconds * 1e6), driftPPM: clockDriftPPM)
        let spec: DeviceSpec
        if let output {
            do { spec = try DeviceSpec(parsing: output) } catch { throw ValidationError("--output \(error)") }
        } else if ALSADevice.soundCardPresent {
            spec = .alsa("default")
        } else {
            spec = .virtual("tutti-\(name).wav")
            Terminal.standardError("tutti speaker: no sound card found; playing to virtual:tutti-\(name).wav\n")
        }
        if case .wav = spec { throw ValidationError("--output wav: is not paced; a room needs alsa:, virtual: or null") }
        var options = DeviceSpec.Options(clock: MonotonicClock())
        options.driftPPM = deviceDriftPPM
        options.periodFrames = Int((periodMilliseconds * 48).rounded())
        options.reportingClock = clock
        let device: any OutputDevice
        do { device = try spec.makeDevice(format: AudioFormat(sampleRate: 48000, channelCount: 2), options: options) } catch {
            Terminal.standardError("tutti speaker: \(error)\n")
            throw ExitCode(2)
        }
        let server: HostPort
        if let given = self.server { server = given } else {
            server = try await HouseLocator.waitForHouse(named: house, program: "tutti speaker \(name)")
        }
        // From here, not from the start: until a house is found a signal ends the speaker by
        // its default action (the search has no end to stop in order), and from here on one
        // that comes while it starts stops it once it has.
        TerminationSignals.install()
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        let address: SocketAddress
        do { address = try SocketAddress.makeAddressResolvingHost(server.host, port: server.port) } catch {
            Terminal.standardError("tutti speaker: cannot resolve \(server): \(error)\n")
            throw ExitCode(2)
        }
        let engine = PlayoutEngine(inputs: PlayoutInputs(), device: device, latencyNanoseconds: Int64(latencyMilliseconds * 1e6), localClock: clock)
        var configuration = SpeakerClient.Configuration(serverHost: server.host, serverPort: server.port, name: name)
        (configuration.identity, configuration.membership) = try identity()
        configuration.latencyNanoseconds = Int64(latencyMilliseconds * 1e6)
        configuration.outputLeadNanoseconds = engine.outputLeadNanoseconds
        let name = self.name
        let client = SpeakerClient(configuration: configuration, engine: engine, clock: clock, serverAddress: address) { line in
            Terminal.standardError("tutti speaker \(name): \(line)\n")
        }
        engine.onEvent = { line in Terminal.standardError("tutti speaker \(name): \(line)\n") }
        // Before anything starts: a file that cannot be created stops the speaker cleanly.
        let truth = try clockTruthPath.map { try ClockTruthWriter(path: $0, clock: clock, client: client, engine: engine) }
        do { try engine.start() } catch {
            Terminal.standardError("tutti speaker: \(error)\n")
            throw ExitCode(2)
        }
        Terminal.standardOutput("tutti speaker \(name): playing to \(device.name), server \(server)\n")
        let running = Task { await client.run(group: group) }
        let tracing = Task { await truth?.run() }
        let signal = await waitForTermination()
        Terminal.standardError("tutti speaker \(name): \(signal): stopping (\(signal) again stops at once)\n")
        tracing.cancel()
        await tracing.value
        client.stop()
        // Ends a reconnect's backoff (up to 2 s) at once.
        running.cancel()
        await running.value
        do { try engine.stop() } catch { Terminal.standardError("tutti speaker: \(error)\n") }
        try? await group.shutdownGracefully()
    }
}

extension SpeakerCommand {
    /// The default state directory of a room named `name`: `$XDG_STATE_HOME/tutti/speaker-NAME`
    /// (`~/.local/state/…`), the name's slashes and spaces made dashes.
    static func defaultStateDirectory(name: String, environment: [String: String] = ControllerTokenFile.environmentVariables()) -> String? {
        let safe = String(name.map { $0 == "/" || $0.isWhitespace ? "-" : $0 })
        guard let base = ControllerTokenFile.defaultDirectory(environment: environment) else { return nil }
        // `defaultDirectory` is the house's: …/tutti/house.
        return String(base.dropLast("house".count)) + "speaker-" + safe
    }

    /// The room's identity key (made on its first start) and the house it belongs to.
    fileprivate func identity() throws -> (IdentityKey, HouseMembership) {
        guard let directory = stateDirectory ?? Self.defaultStateDirectory(name: name) else {
            Terminal.standardError("tutti speaker: nowhere to keep this room's identity key: HOME is not set; give --state-dir DIR\n")
            throw ExitCode(2)
        }
        do {
            let (identity, created) = try IdentityKeyFile.readOrCreate(in: directory)
            if created {
                Terminal.standardError("tutti speaker \(name): made this room's identity key in \(directory) (key \(identity.publicKey.fingerprint))\n")
            }
            return (identity, try HouseMembership(path: StateFile.path(HouseMembership.fileName, in: directory)))
        } catch {
            Terminal.standardError("tutti speaker: \(error)\n")
            throw ExitCode(2)
        }
    }
}

/// `--clock-truth`: the room's clock estimate against the truth, which only a process that
/// simulates its clock offset and drift (`SkewedClock`) on the house's machine knows. One JSON
/// line every 100 ms: `{"mono_ns": T, "error_ns": E, "bound_ns": B, "sync_ns": S, "playing": P}`,
/// E being the estimate of server time at true time T minus T, B the bound the room claims, S the
/// playout's reported sync error. `tutti-bench sync` reads it to split the rooms' skew into the
/// clock's share and the playout's, and to check the bound against the truth.
final class ClockTruthWriter: Sendable {
    private let descriptor: Int32
    private let clock: SkewedClock
    private let client: SpeakerClient
    private let engine: PlayoutEngine

    init(path: String, clock: SkewedClock, client: SpeakerClient, engine: PlayoutEngine) throws {
        descriptor = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o644)
        guard descriptor >= 0 else {
            throw ValidationError("--clock-truth \(path): cannot create the file (\(String(cString: strerror(errno))))")
        }
        self.clock = clock
        self.client = client
        self.engine = engine
    }

    func run() async {
        while !Task.isCancelled {
            try? await Task.sleep(nanoseconds: 100_000_000)
            guard let mapping = client.clockMapping, mapping.spanNanoseconds >= Playout.minimumClockSpanNanoseconds else { continue }
            let truth = clock.base.now()
            let local = clock.reading(atBase: truth)
            let error = mapping.serverTime(atLocal: local) - truth
            let bound = mapping.reportedBound(atLocal: local)
            let report = engine.latestReport
            var line = Array("{\"mono_ns\":\(truth),\"error_ns\":\(error),\"bound_ns\":\(bound),\"sync_ns\":\(report.syncErrorNanoseconds),\"playing\":\(report.isPlaying)}\n".utf8)
            _ = line.withUnsafeMutableBytes { write(descriptor, $0.baseAddress, $0.count) }
        }
        close(descriptor)
    }
}
