import Foundation
import TuttiSimulation

extension ALSAVirtualCard {
    /// `configure(_:inDirectory:)` in a test's temporary directory.
    public static func configure(_ cards: [Card], in directory: TemporaryDirectory) throws -> String {
        try configure(cards, inDirectory: directory.path)
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
