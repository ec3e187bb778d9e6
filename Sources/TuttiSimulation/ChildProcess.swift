import Foundation

/// A real child process for multi-process tests: started with arguments, its stdout lines
/// readable as they come, stopped with SIGINT (as a user would) and awaited.
public final class ChildProcess: @unchecked Sendable {
    public let process = Process()
    private let output = Pipe()
    /// Its standard input, when asked for at start (`answers`): what `type` writes.
    private let input: Pipe?
    private let lock = NSLock()
    private var lines: [String] = []
    private var partial = ""
    /// Set when stdout reached its end: every line the process wrote is in `lines` then.
    private var reachedEnd = false
    public let name: String

    /// The `tutti` executable built next to the tests.
    public static var tuttiExecutable: String {
        if let override = ProcessInfo.processInfo.environment["TUTTI_BINARY"] { return override }
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        return root.appendingPathComponent(".build/debug/tutti").path
    }

    /// Starts `executable`; `environment` is added to this process's own (a controller token in
    /// `TUTTI_TOKEN`, not on a command line other users can read).
    /// `answers`: its standard input is a pipe `type` writes to (a prompt's answer); otherwise
    /// it is this process's.
    public init(name: String, executable: String = ChildProcess.tuttiExecutable, arguments: [String], standardError: String? = nil,
                environment: [String: String] = [:], answers: Bool = false) throws {
        self.name = name
        input = answers ? Pipe() : nil
        if let input { process.standardInput = input }
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = arguments
        if !environment.isEmpty { process.environment = ProcessInfo.processInfo.environment.merging(environment) { $1 } }
        process.standardOutput = output
        if let standardError {
            _ = FileManager.default.createFile(atPath: standardError, contents: nil)
            process.standardError = FileHandle(forWritingAtPath: standardError)
        } else {
            process.standardError = FileHandle.nullDevice
        }
        output.fileHandleForReading.readabilityHandler = { [weak self] handle in
            let data = handle.availableData
            guard let self else { return }
            guard !data.isEmpty else {
                // The handler is left in place: cancelling its dispatch source here, with the
                // pipe closed soon after, crashed libdispatch's event loop in a CI run.
                self.lock.withLock { self.reachedEnd = true }
                return
            }
            self.lock.withLock {
                self.partial += String(decoding: data, as: UTF8.self)
                while let newline = self.partial.firstIndex(of: "\n") {
                    self.lines.append(String(self.partial[..<newline]))
                    self.partial = String(self.partial[self.partial.index(after: newline)...])
                }
            }
        }
        try SpawnSignalMask.withNoneBlocked { try process.run() }
    }

    /// Writes `line` and a newline to its standard input (started with `answers`).
    public func type(_ line: String) {
        guard let input else { preconditionFailure("\(name) was started without answers: its standard input is not a pipe") }
        input.fileHandleForWriting.write(Data((line + "\n").utf8))
    }

    /// Waits (guarded by `timeout`) for a stdout line containing `text` and returns it.
    public func waitForLine(containing text: String, timeout: Double = 30) throws -> String {
        let deadline = Date().addingTimeInterval(timeout)
        while Date() < deadline {
            if let line = lock.withLock({ lines.first { $0.contains(text) } }) { return line }
            if !process.isRunning { break }
            usleep(5000)
        }
        throw ChildProcessError(description: "\(name): no output line containing \"\(text)\" (exit status \(process.isRunning ? "running" : "\(process.terminationStatus)"))")
    }

    /// SIGINT, then waits for the exit (SIGKILL after `timeout`). Returns the exit status.
    @discardableResult
    public func interrupt(timeout: Double = 10) -> Int32 {
        guard process.isRunning else { return process.terminationStatus }
        process.send(SIGINT)
        let deadline = Date().addingTimeInterval(timeout)
        while process.isRunning && Date() < deadline { usleep(5000) }
        if process.isRunning { process.send(SIGKILL); process.waitUntilExit() }
        return process.terminationStatus
    }

    /// Waits for the process to end by itself (SIGKILL after `timeout`); returns its exit status.
    public func waitForExit(timeout: Double) -> Int32 {
        let deadline = Date().addingTimeInterval(timeout)
        while process.isRunning && Date() < deadline { usleep(10_000) }
        if process.isRunning { process.send(SIGKILL); process.waitUntilExit() }
        return process.terminationStatus
    }

    /// Waits for the process to end by itself without holding a thread (SIGKILL after
    /// `timeout`); returns its exit status. Use it in async tests: a blocking wait of a minute
    /// takes one of the cooperative pool's threads (two on a 2-core machine) from every other
    /// test running beside it.
    public func exit(within timeout: Double) async -> Int32 {
        let deadline = Date().addingTimeInterval(timeout)
        while process.isRunning && Date() < deadline { try? await Task.sleep(nanoseconds: 20_000_000) }
        if process.isRunning { process.send(SIGKILL); process.waitUntilExit() }
        // Its last lines may still be in the pipe, read on another thread: a CI run on a loaded
        // machine read a script's output before any of it, though the script had printed it all.
        // The pipe's end is awaited (a grandchild could hold it open: 5 s at most).
        let drained = Date().addingTimeInterval(5)
        while !lock.withLock({ reachedEnd }) && Date() < drained { try? await Task.sleep(nanoseconds: 5_000_000) }
        return process.terminationStatus
    }

    /// Every line it wrote to stdout so far (with the last, unfinished one).
    public var outputLines: [String] {
        lock.withLock { lines + (partial.isEmpty ? [] : [partial]) }
    }

    /// SIGKILL (a crash, a power cut of the process), then waits for the exit.
    public func kill() {
        guard process.isRunning else { return }
        process.send(SIGKILL)
        process.waitUntilExit()
    }

    deinit { if process.isRunning { process.send(SIGKILL) } }
}

public struct ChildProcessError: Error, CustomStringConvertible {
    public let description: String
}

extension Process {
    /// Sends `signal` to this child, and only to it: a process that never started has pid 0,
    /// and `kill(0, …)` would signal the whole process group — the test runner included.
    public func send(_ signal: Int32) {
        ChildSignal.send(signal, to: processIdentifier)
    }
}

/// Signals one child by pid, never a process group (pid ≤ 0).
public enum ChildSignal {
    public static func send(_ signal: Int32, to pid: Int32) {
        guard pid > 0 else { return }
        kill(pid, signal)
    }
}
