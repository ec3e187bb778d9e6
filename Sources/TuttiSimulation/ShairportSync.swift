import Foundation

/// Debian's shairport-sync (3.3.8, AirPlay 1) as a child process: an AirPlay receiver playing
/// to an ALSA virtual card, for AirPlay rooms' tests. It needs a system D-Bus and an Avahi
/// daemon to start at all (it exits if it cannot announce itself), so tests that run it run in
/// `scripts/avahi-sandbox.sh`.
public enum ShairportSync {
    public static let executable = "/usr/bin/shairport-sync"

    /// The configuration for a receiver named `name` on RTSP port `port`, playing to ALSA PCM
    /// `card`, with `driftTolerance` seconds of sync error before it corrects (its default is
    /// 0.002). Statistics and the level-2 log (its resyncs, "Large … sync error") go to stderr.
    /// Several on one machine each need their own UDP ports: `udpPortBase` and the 10 after it.
    public static func configuration(name: String, port: Int, card: String, driftTolerance: Double, udpPortBase: Int = 6001) -> String {
        """
        general = { name = "\(name)"; port = \(port); udp_port_base = \(udpPortBase); udp_port_range = 10; drift_tolerance_in_seconds = \(driftTolerance); };
        alsa = { output_device = "\(card)"; };
        diagnostics = { statistics = "yes"; log_verbosity = 2; };
        metadata = { enabled = "no"; };

        """
    }

    /// Starts it with the configuration file `configuration` and the ALSA configuration `alsa`
    /// (an `ALSA_CONFIG_PATH=…` assignment); its stderr goes to `log`. Stop it with `stop(_:)`.
    public static func start(configuration: String, alsa: String, log: String) throws -> ChildProcess {
        guard FileManager.default.isExecutableFile(atPath: executable) else {
            throw ChildProcessError(description: "\(executable) is missing: install Debian's shairport-sync (make deps does)")
        }
        return try ChildProcess(name: "shairport-sync", executable: "/usr/bin/env", arguments: [alsa, executable, "-c", configuration, "-u"], standardError: log)
    }

    /// Stops it with SIGTERM; its exit status (guarded by a timeout).
    public static func stop(_ receiver: ChildProcess) -> Int32 {
        guard receiver.process.isRunning else { return receiver.process.terminationStatus }
        receiver.process.send(SIGTERM)
        return receiver.waitForExit(timeout: 10)
    }

    /// Its resyncs: the buffer flushed or padded because its sync error passed its resync
    /// threshold (50 ms). They are not in its statistics; its level-2 log says each.
    public static func resyncs(inLog log: String) -> Int {
        ((try? String(contentsOfFile: log, encoding: .utf8)) ?? "").split(separator: "\n").filter {
            $0.contains("Large positive sync error") || $0.contains("Large negative sync error")
        }.count
    }
}
