import Foundation
import TuttiSimulation

/// A script of Tests/Python run as a real client (python-mpd2, selenium, websockets…) that
/// prints one JSON object per step: its exit status and its steps.
public enum PythonScript {
    public static func path(_ name: String) -> String {
        URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().appendingPathComponent("Python/\(name)").path
    }

    /// Runs `Tests/Python/NAME ARGUMENTS` to its end (killed after `within` seconds), its
    /// standard error in `log`.
    public static func run(_ name: String, _ arguments: [String], log: String, environment: [String: String] = [:],
                           within: Double) async throws -> (status: Int32, steps: [[String: Any]]) {
        let process = try ChildProcess(name: name, executable: "/usr/bin/env", arguments: ["python3", path(name)] + arguments,
                                       standardError: log, environment: environment)
        let status = await process.exit(within: within)
        let steps = process.outputLines.compactMap { (try? JSONSerialization.jsonObject(with: Data($0.utf8))) as? [String: Any] }
        return (status, steps)
    }
}
