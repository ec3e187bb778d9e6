import Foundation
import TuttiSimulation

/// Tests/Python/mpd_partitions.py, run against an MPD server (the house's, or a real MPD 0.23),
/// and what it printed: the same flow and the same answers expected of both.
public struct MPDPartitionFlow: Sendable {
    /// Each step's values, by step name (`mono_ns` is when it was done, CLOCK_MONOTONIC).
    public let steps: [String: [String: JSONValue]]
    public let output: String

    /// A JSON value as the script printed it.
    public enum JSONValue: Sendable, Equatable, Decodable {
        case string(String), number(Double), list([JSONValue]), object([String: JSONValue]), null, bool(Bool)

        public init(from decoder: any Decoder) throws {
            let container = try decoder.singleValueContainer()
            if container.decodeNil() { self = .null }
            else if let value = try? container.decode(Bool.self) { self = .bool(value) }
            else if let value = try? container.decode(Double.self) { self = .number(value) }
            else if let value = try? container.decode(String.self) { self = .string(value) }
            else if let value = try? container.decode([JSONValue].self) { self = .list(value) }
            else { self = .object(try container.decode([String: JSONValue].self)) }
        }

        public var string: String? { if case .string(let s) = self { s } else { nil } }
        public var number: Double? { if case .number(let n) = self { n } else { nil } }
        public var strings: [String]? { if case .list(let l) = self { l.compactMap(\.string) } else { nil } }
        public subscript(key: String) -> JSONValue? { if case .object(let o) = self { o[key] } else { nil } }
    }

    /// Runs the script against `address` (a port on 127.0.0.1 or a Unix socket's path) with
    /// the two songs' URIs; `update` first updates a real MPD's database.
    public static func run(address: String, song1: String, song2: String, update: Bool, log: String) async throws -> MPDPartitionFlow {
        let script = PythonScript.path("mpd_partitions.py")
        let process = try ChildProcess(name: "mpd-partitions", executable: "/usr/bin/env",
                                       arguments: ["python3", script, address, song1, song2] + (update ? ["--update"] : []), standardError: log)
        let status = await process.exit(within: 120)
        let output = process.outputLines.joined(separator: "\n")
        guard status == 0 else {
            throw TestFailure("mpd_partitions.py ended with \(status): \(output)\n\((try? String(contentsOfFile: log, encoding: .utf8)) ?? "")")
        }
        var steps: [String: [String: JSONValue]] = [:]
        for line in process.outputLines {
            guard let object = try? JSONDecoder().decode([String: JSONValue].self, from: Data(line.utf8)), let name = object["step"]?.string else { continue }
            steps[name] = object
        }
        return MPDPartitionFlow(steps: steps, output: output)
    }

    /// When step `name` was done (CLOCK_MONOTONIC ns).
    public func time(_ name: String, _ key: String = "mono_ns") -> Int64? {
        steps[name]?[key]?.number.map { Int64($0) }
    }

    /// What MPD 0.23 answers at each step of the flow; empty when every answer was.
    public var problems: [String] {
        var problems: [String] = []
        func expect(_ step: String, _ key: String, _ wanted: JSONValue) {
            let got = steps[step]?[key]
            if got != wanted { problems.append("\(step).\(key): \(got.map { "\($0)" } ?? "missing"), not \(wanted)") }
        }
        func list(_ values: [String]) -> JSONValue { .list(values.map { .string($0) }) }
        expect("album", "partition", .string("default"))
        expect("created", "taken", .string("[56@0] {newpartition} name already exists"))
        expect("created", "partitions", list(["default", "radio"]))
        if steps["radio"]?["radio_status"]?["partition"] != .string("radio") { problems.append("radio's status names no partition radio") }
        if steps["radio"]?["radio_status"]?["state"] != .string("play") { problems.append("radio's status is not playing") }
        if steps["radio"]?["default_status"]?["partition"] != .string("default") { problems.append("default's status names no partition default") }
        if steps["radio"]?["default_status"]?["state"] != .string("play") { problems.append("default stopped when the radio played") }
        if steps["radio"]?["radio_status"]?["playlistlength"] != .string("1") { problems.append("radio's queue is not one song") }
        expect("radio", "radio_enabled", list(["b"]))
        expect("radio", "default_enabled", list(["a"]))
        expect("setvol", "radio", .string("50"))
        if steps["setvol"]?["default"] != steps["setvol"]?["default_before"] { problems.append("the radio's setvol changed the default's volume") }
        expect("radio-paused", "radio", .string("pause"))
        expect("radio-paused", "default", .string("play"))
        expect("radio-resumed", "radio", .string("play"))
        expect("moved", "radio_enabled", list([]))
        expect("moved", "default_enabled", list(["a", "b"]))
        expect("moved", "radio_state", .string("play"))
        expect("woken", "subsystems", list(["partition"]))
        expect("refused", "default", .string("[5@0] {delpartition} cannot delete the default partition"))
        expect("refused", "clients", .string("[5@0] {delpartition} partition still has clients"))
        expect("refused", "unknown", .string("[50@0] {partition} partition does not exist"))
        expect("refused", "output", .string("[50@0] {moveoutput} No such output"))
        expect("refused", "missing", .string("[50@0] {delpartition} no such partition"))
        expect("refused", "outputs", .string("[5@0] {delpartition} partition still has outputs"))
        expect("final", "partitions", list(["default", "radio"]))
        return problems
    }
}
