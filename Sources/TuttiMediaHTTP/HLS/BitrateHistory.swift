import Foundation

/// The network throughput measured last, kept across runs in a small JSON file so that the
/// next adaptive stream starts at a variant the network carried last time instead of the lowest.
///
/// A missing, unreadable or corrupt file reads as no history; writes are best effort (a
/// read-only home must not stop playback) and atomic (written aside, then renamed), so a
/// concurrent reader sees the old or the new value, never half a file.
///
/// Thread-safety: a value type whose members may be used from any thread; concurrent writers
/// race benignly (the last rename wins).
public struct BitrateHistory: Sendable, Equatable {
    public let path: String

    public init(path: String) {
        self.path = path
    }

    /// `$XDG_STATE_HOME/tutti/network.json`, else `~/.local/state/tutti/network.json`.
    public static var defaultPath: String {
        let environment = ProcessInfo.processInfo.environment
        if let state = environment["XDG_STATE_HOME"], state.hasPrefix("/") {
            return state + "/tutti/network.json"
        }
        let home = environment["HOME"].flatMap { $0.isEmpty ? nil : $0 } ?? NSHomeDirectory()
        return home + "/.local/state/tutti/network.json"
    }

    /// The history at `defaultPath`.
    public static var standard: BitrateHistory { BitrateHistory(path: defaultPath) }

    private struct Record: Codable {
        var throughputBitsPerSecond: Double
        /// When it was measured (ISO 8601), for people reading the file.
        var updated: String?
    }

    /// The last throughput in bits per second; nil when there is none or the file is corrupt.
    public func load() -> Double? {
        guard let data = FileManager.default.contents(atPath: path),
              let record = try? JSONDecoder().decode(Record.self, from: data) else { return nil }
        let value = record.throughputBitsPerSecond
        return value.isFinite && value > 0 ? value : nil
    }

    /// Stores `bitsPerSecond` as the last throughput. Returns false when the file could not be written.
    @discardableResult
    public func save(_ bitsPerSecond: Double) -> Bool {
        guard bitsPerSecond.isFinite, bitsPerSecond > 0 else { return false }
        let record = Record(throughputBitsPerSecond: bitsPerSecond.rounded(), updated: ISO8601DateFormatter().string(from: Date()))
        guard let data = try? JSONEncoder().encode(record) else { return false }
        let directory = (path as NSString).deletingLastPathComponent
        do {
            try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
            try data.write(to: URL(fileURLWithPath: path), options: .atomic)
            return true
        } catch {
            return false
        }
    }
}
