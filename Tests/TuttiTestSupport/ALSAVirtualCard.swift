import Foundation
import TuttiSimulation

/// The ALSA virtual sound card (Devices/alsa-virtual, built by `make alsa-virtual`) as tests use
/// it: a configuration naming cards, and the environment that makes ALSA programs read it.
public enum ALSAVirtualCard {
    /// The plugin `make alsa-virtual` builds.
    public static var library: String {
        URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent(".build/alsa/libasound_module_pcm_tutti_virtual.so").path
    }

    /// One card: its PCM name, the WAV it captures to, its crystal error, period and buffer.
    public struct Card: Sendable {
        public var name: String, path: String, ppm: Double, period: Int, buffer: Int
        public init(name: String, path: String, ppm: Double, period: Int = 480, buffer: Int = 1920) {
            (self.name, self.path, self.ppm, self.period, self.buffer) = (name, path, ppm, period, buffer)
        }
    }

    /// Writes `directory/asoundrc` defining `cards`; returns the `ALSA_CONFIG_PATH=…` assignment
    /// to run ALSA programs with (through `/usr/bin/env`).
    public static func configure(_ cards: [Card], in directory: TemporaryDirectory) throws -> String {
        guard FileManager.default.fileExists(atPath: library) else {
            throw TestFailure("\(library) is missing: build it with `make alsa-virtual` (make test does)")
        }
        let config = directory.file("asoundrc")
        let lines = ["pcm_type.tutti_virtual { lib \"\(library)\" }"]
            + cards.map { "pcm.\($0.name) { type tutti_virtual  path \"\($0.path)\"  ppm \($0.ppm)  period \($0.period)  buffer \($0.buffer) }" }
        try lines.joined(separator: "\n").appending("\n").write(toFile: config, atomically: true, encoding: .utf8)
        return "ALSA_CONFIG_PATH=/usr/share/alsa/alsa.conf:" + config
    }
}

/// Debian's `snapclient` as a child process.
public enum Snapclient {
    /// Starts snapclient `hostID` on the Snapcast port `port`, playing to ALSA PCM `card`
    /// (configured by `alsa`, an `ALSA_CONFIG_PATH=…` assignment); `environment` goes before it
    /// (a libfaketime preload). The test runner's threads block SIGINT and SIGTERM, and a child
    /// inherits the mask; snapclient only stops on them (tutti's processes wait for them with
    /// sigwait), so it is started with them unblocked. Stop it with `stop(_:)`.
    public static func start(hostID: String, port: String, card: String, alsa: String, environment: [String] = [],
                             log: String) throws -> ChildProcess {
        let unblock = "import os, signal, sys; signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT, signal.SIGTERM}); os.execvp(sys.argv[1], sys.argv[1:])"
        return try ChildProcess(name: "snapclient", executable: "/usr/bin/env",
                                arguments: [alsa, "python3", "-c", unblock, "env"] + environment
                                    + ["snapclient", "-h", "127.0.0.1", "-p", port, "--hostID", hostID, "--player", "alsa", "-s", card,
                                       "--logsink", "stderr"]
                                    // TUTTI_SNAPCLIENT_LOG=debug (or trace) for snapclient's own reasoning.
                                    + (ProcessInfo.processInfo.environment["TUTTI_SNAPCLIENT_LOG"].map { ["--logfilter", "*:\($0)"] } ?? []),
                                standardError: log)
    }

    /// Stops it with SIGTERM; its exit status (guarded by a timeout).
    public static func stop(_ snapclient: ChildProcess) -> Int32 {
        snapclient.process.send(SIGTERM)
        return snapclient.waitForExit(timeout: 10)
    }
}
