import Foundation
import Synchronization
import TuttiSimulation

/// Test media made with the real ffmpeg CLI, and independent decodes by the same CLI to
/// compare Tutti's output against.
public enum TestMedia {
    public struct CommandError: Error, CustomStringConvertible {
        public let command: String
        public let output: String
        public var description: String { "\(command) failed: \(output)" }
    }

    /// What a finished command left.
    public struct CommandResult: Sendable {
        public var status: Int32
        public var standardOutput: Data
        public var standardError: Data
    }

    /// Runs a command to its end (`executable` is a path, or a name looked up on the PATH) and
    /// collects its status and output. A command still running after `timeout` seconds is
    /// killed and reported as an error naming it, so a stuck child fails the test instead of
    /// hanging the run.
    public static func execute(_ executable: String, _ arguments: [String], directory: String? = nil,
                               standardInput: Data? = nil, environment: [String: String]? = nil, timeout: Double = 300) throws -> CommandResult {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: executable.hasPrefix("/") ? executable : "/usr/bin/env")
        process.arguments = executable.hasPrefix("/") ? arguments : [executable] + arguments
        // `environment` replaces this process's whole environment.
        if let environment { process.environment = environment }
        if let directory { process.currentDirectoryURL = URL(fileURLWithPath: directory) }
        let out = Pipe(), err = Pipe()
        process.standardOutput = out
        process.standardError = err
        let input = Pipe()
        process.standardInput = input
        try process.run()
        let timedOut = OnceFlag()
        let pid = process.processIdentifier
        let watchdog = DispatchWorkItem { if timedOut.claim() { ChildSignal.send(SIGKILL, to: pid) } }
        DispatchQueue.global().asyncAfter(deadline: .now() + timeout, execute: watchdog)
        // Feed standard input and read both pipes concurrently, so no pipe can fill up and
        // block the child.
        let writer = input.fileHandleForWriting
        Thread {
            if let standardInput { writer.write(standardInput) }
            try? writer.close()
        }.start()
        let errorData = LockedData()
        let errorRead = DispatchSemaphore(value: 0)
        let reader = Thread {
            errorData.set(err.fileHandleForReading.readDataToEndOfFile())
            errorRead.signal()
        }
        reader.start()
        let data = out.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        // From here the pid may be reused: the watchdog must not fire any more.
        let killed = !timedOut.claim()
        watchdog.cancel()
        // The child has exited and closed its end of the pipe: the reader finishes promptly.
        _ = errorRead.wait(timeout: .now() + 30)
        if killed {
            throw CommandError(command: ([executable] + arguments).joined(separator: " "),
                               output: "still running after \(timeout) s; killed")
        }
        return CommandResult(status: process.terminationStatus, standardOutput: data, standardError: errorData.value)
    }

    /// Runs a command to its end and returns its standard output; throws with its standard
    /// error if it fails or outlives `timeout` seconds.
    @discardableResult
    public static func run(_ executable: String, _ arguments: [String], standardInput: Data? = nil,
                           timeout: Double = 300) throws -> Data {
        let result = try execute(executable, arguments, standardInput: standardInput, timeout: timeout)
        if result.status != 0 {
            throw CommandError(command: ([executable] + arguments).joined(separator: " "),
                               output: String(decoding: result.standardError.suffix(2000), as: UTF8.self))
        }
        return result.standardOutput
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

    /// Copies the directory's logs (`*.log`, `*.jsonl`) and pictures (`*.png`: screenshots) to
    /// `out/test-logs/<label>/`, so a run of processes can be read and seen after the directory
    /// is removed.
    public func preserveLogs(as label: String) {
        let target = FileManager.default.currentDirectoryPath + "/out/test-logs/" + label
        try? FileManager.default.removeItem(atPath: target)
        try? FileManager.default.createDirectory(atPath: target, withIntermediateDirectories: true)
        for name in (try? FileManager.default.contentsOfDirectory(atPath: path)) ?? [] where name.hasSuffix(".log") || name.hasSuffix(".jsonl") || name.hasSuffix(".png") {
            try? FileManager.default.copyItem(atPath: file(name), toPath: target + "/" + name)
        }
    }
}

/// Blocking work in a test did not finish within its bound.
public struct TestTimeout: Error, CustomStringConvertible {
    public var description: String
    public init(_ description: String) { self.description = description }

    /// A timeout that also records what every thread of this process was doing (`ThreadDump`),
    /// for a wait that should never have run out.
    public static func withThreadDump(_ description: String) -> TestTimeout {
        let path = ThreadDump.capture()
        // CI keeps only what a run prints: the threads in Tutti's code, where each is blocked.
        if let path { print("thread stacks at timeout (\(description)):\n" + ThreadDump.summary(of: path)) }
        return TestTimeout(description + (path.map { "; thread stacks in \($0)" } ?? ""))
    }
}

/// The stacks of every thread of this process, written by gdb to a file, so a test that
/// waited too long says what it was waiting on.
public enum ThreadDump {
    /// Writes the dump to `out/test-logs/` (or the temporary directory) and returns its path;
    /// nil when gdb is not installed or could not run.
    ///
    /// gdb writes straight into the file: it stops every thread of this process while it reads
    /// their stacks, so nothing here could drain a pipe from it meanwhile.
    public static func capture() -> String? {
        guard FileManager.default.isExecutableFile(atPath: "/usr/bin/gdb") else { return nil }
        let directory = FileManager.default.fileExists(atPath: "out/test-logs") ? "out/test-logs" : NSTemporaryDirectory()
        let path = "\(directory)/stacks-\(getpid())-\(Int(Date().timeIntervalSince1970 * 1000)).txt"
        guard FileManager.default.createFile(atPath: path, contents: nil), let output = FileHandle(forWritingAtPath: path) else { return nil }
        defer { try? output.close() }
        let gdb = Process()
        gdb.executableURL = URL(fileURLWithPath: "/usr/bin/gdb")
        gdb.arguments = ["-p", "\(getpid())", "-batch", "-nx", "-ex", "set pagination off", "-ex", "thread apply all bt 40"]
        gdb.standardOutput = output
        gdb.standardError = FileHandle.nullDevice
        gdb.standardInput = FileHandle.nullDevice
        do { try gdb.run() } catch { return nil }
        // gdb detaches when done; a batch run needs no watchdog (one here would be stopped too).
        gdb.waitUntilExit()
        return path
    }

    /// The dump at `path`, shortened to the threads that are in Tutti's code: for each, the
    /// frame it is blocked in and up to eight of Tutti's frames (mangled names), one line each.
    public static func summary(of path: String) -> String {
        guard let text = try? String(contentsOfFile: path, encoding: .utf8) else { return "(no dump at \(path))" }
        var lines: [String] = []
        var thread = ""
        var top = ""
        var ours: [String] = []
        func flush() {
            if !ours.isEmpty { lines.append("  \(thread): \(top) ← " + ours.prefix(8).joined(separator: " ← ")) }
            ours = []
            top = ""
        }
        for line in text.split(separator: "\n") {
            if line.hasPrefix("Thread ") {
                flush()
                thread = String(line.prefix(40))
            } else if line.hasPrefix("#") {
                let symbol = line.split(separator: " ").first { $0.hasPrefix("$s") || $0.contains("_") || $0.contains("::") }.map(String.init) ?? ""
                if top.isEmpty { top = symbol }  // the innermost frame: where the thread is blocked
                if line.contains("Tutti") { ours.append(symbol) }
            }
        }
        flush()
        return lines.isEmpty ? "  (no thread in Tutti's code)" : lines.joined(separator: "\n")
    }
}

/// Runs blocking work (a device playing for a minute, a child process, a network read) on a
/// thread of its own, so it does not hold one of the few threads Swift Testing's concurrent
/// tests share: on a 2-core machine the cooperative pool has two, and the network tasks and
/// timers other tests wait for run on them too.
///
/// The wait is bounded: if `body` has not returned after `timeout`, this records every thread's
/// stack (`ThreadDump`), calls `onTimeout` (to cancel what the thread waits on) and throws a
/// `TestTimeout` naming `waitingFor`, and the test fails instead of hanging the run. The thread
/// is left to finish on its own (a thread cannot be killed); its result is dropped.
public func onOwnThread<T: Sendable>(_ waitingFor: String = "blocking work", timeout: Duration = .seconds(240),
                                     file: StaticString = #fileID, line: UInt = #line,
                                     onTimeout: (@Sendable () -> Void)? = nil,
                                     _ body: @escaping @Sendable () throws -> T) async throws -> T {
    let once = OnceFlag()
    return try await withCheckedThrowingContinuation { continuation in
        let thread = Thread {
            let result = Result { try body() }
            if once.claim() { continuation.resume(with: result) }
        }
        thread.stackSize = 8 << 20
        thread.start()
        // A Dispatch timer, not a task: it fires even when every cooperative thread is blocked.
        let seconds = Double(timeout.components.seconds) + Double(timeout.components.attoseconds) * 1e-18
        DispatchQueue.global().asyncAfter(deadline: .now() + seconds) {
            if once.claim() {
                let timeout = TestTimeout.withThreadDump("\(file):\(line): timed out after \(timeout) waiting for \(waitingFor)")
                // Let the test unblock what the thread waits on (cancel a read, end a stream).
                onTimeout?()
                continuation.resume(throwing: timeout)
            }
        }
    }
}

/// `onOwnThread` for synchronous tests: runs `body` on a thread of its own and waits for it
/// here, at most `timeout`; then throws a `TestTimeout` naming `waitingFor`. Use it for waits
/// that take CPU time rather than real time (an offline render, a simulated clock): a wait in
/// real time belongs in an async test, off the cooperative pool.
public func waitOnOwnThread<T: Sendable>(_ waitingFor: String, timeout: Duration = .seconds(240),
                                         file: StaticString = #fileID, line: UInt = #line,
                                         _ body: @escaping @Sendable () throws -> T) throws -> T {
    let result = Mutex<Result<T, any Error>?>(nil)
    let done = DispatchSemaphore(value: 0)
    let thread = Thread {
        let outcome = Result { try body() }
        result.withLock { $0 = outcome }
        done.signal()
    }
    thread.stackSize = 8 << 20
    thread.start()
    let seconds = Double(timeout.components.seconds) + Double(timeout.components.attoseconds) * 1e-18
    guard done.wait(timeout: .now() + seconds) == .success, let outcome = result.withLock({ $0 }) else {
        throw TestTimeout.withThreadDump("\(file):\(line): timed out after \(timeout) waiting for \(waitingFor)")
    }
    return try outcome.get()
}

/// True for the first caller only.
final class OnceFlag: Sendable {
    private let claimed = Mutex(false)
    func claim() -> Bool { claimed.withLock { was in defer { was = true }; return !was } }
}

extension Process {
    /// Waits for the process to exit, at most `timeout` seconds: then it is killed and this
    /// throws, naming it, so a stuck child fails the test instead of hanging the run.
    public func waitUntilExit(timeout: Double) throws {
        let timedOut = OnceFlag()
        let pid = processIdentifier
        let watchdog = DispatchWorkItem { if timedOut.claim() { ChildSignal.send(SIGKILL, to: pid) } }
        DispatchQueue.global().asyncAfter(deadline: .now() + timeout, execute: watchdog)
        waitUntilExit()
        let killed = !timedOut.claim()
        watchdog.cancel()
        if killed {
            let name = ([executableURL?.path ?? "?"] + (arguments ?? [])).joined(separator: " ")
            throw TestTimeout("\(name): still running after \(timeout) s; killed")
        }
    }
}

/// Every element of `stream` until it finishes, waiting at most `timeout`: then it throws a
/// `TestTimeout` naming `what`, rather than wait forever for a stream that never ends.
public func collect<T: Sendable>(_ stream: AsyncStream<T>, _ what: String, within timeout: Duration = .seconds(60)) async throws -> [T] {
    try await withThrowingTaskGroup(of: [T]?.self) { group in
        group.addTask {
            var all: [T] = []
            for await element in stream { all.append(element) }
            return Task.isCancelled ? nil : all
        }
        group.addTask {
            try await Task.sleep(for: timeout)
            return nil
        }
        defer { group.cancelAll() }
        if let first = try await group.next(), let all = first { return all }
        throw TestTimeout("\(what) did not end within \(timeout)")
    }
}

/// Polls `condition` every 5 ms until it holds; past `timeout` it throws a `TestTimeout` naming
/// `what`. The timeout is only a guard: a test that needs it has failed.
public func waitUntil(_ what: String, timeout: Duration = .seconds(60), _ condition: () -> Bool) async throws {
    let deadline = ContinuousClock.now + timeout
    while !condition() {
        guard ContinuousClock.now < deadline else { throw TestTimeout("timed out after \(timeout) waiting for \(what)") }
        try await Task.sleep(for: .milliseconds(5))
    }
}
