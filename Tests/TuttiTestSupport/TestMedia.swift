import Foundation
import TuttiCore

/// Test media made with the real ffmpeg CLI, and independent decodes by the same CLI to
/// compare Tutti's output against.
public enum TestMedia {
    public struct CommandError: Error, CustomStringConvertible {
        public let command: String
        public let output: String
        public var description: String { "\(command) failed: \(output)" }
    }

    /// Runs a command and returns its standard output. Throws with stderr on a non-zero exit.
    @discardableResult
    public static func run(_ executable: String, _ arguments: [String], standardInput: Data? = nil) throws -> Data {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: executable.hasPrefix("/") ? executable : "/usr/bin/env")
        process.arguments = executable.hasPrefix("/") ? arguments : [executable] + arguments
        let out = Pipe(), err = Pipe()
        process.standardOutput = out
        process.standardError = err
        let input = Pipe()
        process.standardInput = input
        try process.run()
        if let standardInput { input.fileHandleForWriting.write(standardInput) }
        try? input.fileHandleForWriting.close()
        // Read both pipes concurrently so neither can fill up and block the child.
        let errorData = LockedData()
        let reader = Thread { errorData.set(err.fileHandleForReading.readDataToEndOfFile()) }
        reader.start()
        let data = out.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        while !errorData.isSet { usleep(1000) }
        if process.terminationStatus != 0 {
            throw CommandError(command: ([executable] + arguments).joined(separator: " "),
                               output: String(decoding: errorData.value.suffix(2000), as: UTF8.self))
        }
        return data
    }

    /// `ffmpeg -y -loglevel error ARGS`.
    public static func ffmpeg(_ arguments: [String]) throws {
        try run("ffmpeg", ["-nostdin", "-y", "-loglevel", "error"] + arguments)
    }

    /// Generates `seconds` of a test signal: two sines (different per channel) so that any
    /// shift, swap, gap or repeat shows up in a sample comparison.
    public static func generateTone(_ path: String, seconds: Double, sampleRate: Int = 44100, channels: Int = 2,
                                    codecArguments: [String] = [], extra: [String] = []) throws {
        let left = "sine=frequency=441:sample_rate=\(sampleRate):duration=\(seconds)"
        let right = "sine=frequency=660:sample_rate=\(sampleRate):duration=\(seconds)"
        var arguments = ["-f", "lavfi", "-i", left, "-f", "lavfi", "-i", right]
        if channels == 1 {
            arguments += ["-filter_complex", "[0][1]amix=inputs=2:normalize=0,volume=0.5[a]", "-map", "[a]"]
        } else {
            arguments += ["-filter_complex", "[0][1]join=inputs=2:channel_layout=stereo[a]", "-map", "[a]"]
        }
        try ffmpeg(arguments + extra + codecArguments + [path])
    }

    /// Decodes with the ffmpeg CLI to interleaved Float32; optionally resampled and remixed.
    public static func decodeWithFFmpeg(_ path: String, sampleRate: Int? = nil, channels: Int? = nil, filters: String? = nil) throws -> [Float] {
        var arguments = ["-nostdin", "-loglevel", "error", "-i", path]
        if let channels { arguments += ["-ac", "\(channels)"] }
        if let filters { arguments += ["-af", filters] } else if let sampleRate { arguments += ["-ar", "\(sampleRate)"] }
        arguments += ["-f", "f32le", "-"]
        let data = try run("ffmpeg", arguments)
        return data.withUnsafeBytes { Array($0.bindMemory(to: Float.self)) }
    }
}

final class LockedData: @unchecked Sendable {
    private let lock = NSLock()
    private var data = Data()
    private var done = false
    func set(_ value: Data) { lock.withLock { data = value; done = true } }
    var isSet: Bool { lock.withLock { done } }
    var value: Data { lock.withLock { data } }
}

/// A fresh directory under the system temporary directory, removed on `remove()`.
public struct TemporaryDirectory: Sendable {
    public let path: String

    public init(_ label: String = "tutti") throws {
        let base = NSTemporaryDirectory() + "\(label)-\(UUID().uuidString.prefix(8))"
        try FileManager.default.createDirectory(atPath: base, withIntermediateDirectories: true)
        path = base
    }

    public func file(_ name: String) -> String { path + "/" + name }

    public func remove() { try? FileManager.default.removeItem(atPath: path) }
}

/// Runs blocking work (a device playing for a minute, a child process) on a thread of its own,
/// so it does not hold one of the few threads Swift Testing's concurrent tests share.
public func onOwnThread<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
    try await withCheckedThrowingContinuation { continuation in
        let thread = Thread {
            do { continuation.resume(returning: try body()) } catch { continuation.resume(throwing: error) }
        }
        thread.stackSize = 8 << 20
        thread.start()
    }
}
