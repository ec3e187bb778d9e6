import ArgumentParser
import Foundation
import TuttiCore
import TuttiSimulation

#if canImport(Glibc)
import Glibc
#endif

/// Output through the file descriptors (the global `stderr` is not concurrency-safe in Swift 6).
enum Console {
    static func progress(_ text: String) { write(2, text + "\n") }
    static func output(_ text: String) { write(1, text) }

    private static func write(_ fd: Int32, _ text: String) {
        let bytes = Array(text.utf8)
        var offset = 0
        bytes.withUnsafeBytes { raw in
            while offset < raw.count {
                let n = Glibc.write(fd, raw.baseAddress! + offset, raw.count - offset)
                if n <= 0 { if n < 0 && errno == EINTR { continue }; return }
                offset += n
            }
        }
    }
}

/// Wall-clock time on CLOCK_MONOTONIC.
enum Stopwatch {
    static func now() -> Int64 { MonotonicClock().now() }

    /// Seconds taken by `body`.
    static func measure(_ body: () throws -> Void) rethrows -> Double {
        let start = now()
        try body()
        return Double(now() - start) / 1e9
    }

    /// CPU time of this process (all threads), in nanoseconds.
    static func processCPUTime() -> Int64 {
        var ts = timespec()
        clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts)
        return Int64(ts.tv_sec) * 1_000_000_000 + Int64(ts.tv_nsec)
    }
}

struct BenchError: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}

/// Child processes started with posix_spawn and reaped with waitpid, so the measured wall
/// time is the child's own (Foundation's `Process.waitUntilExit` polls its run loop).
enum BenchProcess {
    /// Runs `executable` (looked up in PATH) with `arguments`; stdin from /dev/null, stdout and
    /// stderr to /dev/null unless `stderrPath` is given. Returns the exit status, the wall time
    /// and the child's CPU time (user + system), in seconds.
    static func run(_ executable: String, _ arguments: [String], stderrPath: String? = nil) throws -> (status: Int32, seconds: Double, cpuSeconds: Double) {
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0)
        posix_spawn_file_actions_addopen(&actions, 2, stderrPath ?? "/dev/null", O_WRONLY | O_CREAT | O_TRUNC, 0o644)

        let argv: [UnsafeMutablePointer<CChar>?] = ([executable] + arguments).map { strdup($0) } + [nil]
        defer { for p in argv { free(p) } }
        var pid: pid_t = 0
        let start = Stopwatch.now()
        let spawned = SpawnSignalMask.withNoneBlocked { posix_spawnp(&pid, executable, &actions, nil, argv, environ) }
        guard spawned == 0 else {
            throw BenchError("cannot start \(executable): \(String(cString: strerror(spawned)))")
        }
        var status: Int32 = 0
        var usage = rusage()
        while wait4(pid, &status, 0, &usage) < 0 {
            guard errno == EINTR else { throw BenchError("wait4 failed: \(String(cString: strerror(errno)))") }
        }
        let seconds = Double(Stopwatch.now() - start) / 1e9
        func inSeconds(_ t: timeval) -> Double { Double(t.tv_sec) + Double(t.tv_usec) / 1e6 }
        let cpuSeconds = inSeconds(usage.ru_utime) + inSeconds(usage.ru_stime)
        // WIFEXITED / WEXITSTATUS are macros.
        let exitStatus: Int32 = (status & 0x7f) == 0 ? (status >> 8) & 0xff : 128 + (status & 0x7f)
        return (exitStatus, seconds, cpuSeconds)
    }

    /// Runs `ffmpeg -nostdin -hide_banner -nostats -loglevel error ARGS`; throws with its stderr
    /// on failure. Returns the wall and CPU time in seconds.
    @discardableResult
    static func ffmpeg(_ arguments: [String]) throws -> (seconds: Double, cpuSeconds: Double) {
        let log = FileManager.default.temporaryDirectory.appendingPathComponent("tutti-bench-ffmpeg-\(getpid()).log").path
        defer { unlink(log) }
        let result = try run("ffmpeg", ["-nostdin", "-hide_banner", "-nostats", "-loglevel", "error"] + arguments, stderrPath: log)
        guard result.status == 0 else {
            let message = (try? String(contentsOfFile: log, encoding: .utf8)) ?? ""
            throw BenchError("ffmpeg \(arguments.joined(separator: " ")) exited with \(result.status): \(message.suffix(2000))")
        }
        return (result.seconds, result.cpuSeconds)
    }
}

/// Where generated benchmark media are kept between runs.
enum MediaCache {
    /// `--media-dir`, else `$XDG_CACHE_HOME/tutti-bench`, else `~/.cache/tutti-bench`, else the temp directory.
    static func directory(_ override: String?, subdirectory: String) throws -> String {
        let base: String
        if let override {
            base = override
        } else if let xdg = ProcessInfo.processInfo.environment["XDG_CACHE_HOME"], !xdg.isEmpty {
            base = xdg + "/tutti-bench"
        } else if let home = ProcessInfo.processInfo.environment["HOME"], !home.isEmpty {
            base = home + "/.cache/tutti-bench"
        } else {
            base = FileManager.default.temporaryDirectory.path + "/tutti-bench"
        }
        let path = override == nil ? base + "/" + subdirectory : base
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
        return path
    }

    static func exists(_ path: String) -> Bool {
        var st = stat()
        return stat(path, &st) == 0 && st.st_size > 0
    }

    /// Creates `path` with `make(temporaryPath)` unless it exists; the file appears only when
    /// complete, so an interrupted generation is never reused. Returns true when it was made.
    @discardableResult
    static func make(_ path: String, regenerate: Bool, _ make: (String) throws -> Void) throws -> Bool {
        if !regenerate && exists(path) { return false }
        let slash = path.lastIndex(of: "/").map { path.index(after: $0) } ?? path.startIndex
        let name = path[slash...]
        // Keep the extension last so ffmpeg picks the muxer from it.
        let temporary = String(path[..<slash]) + ".partial-\(getpid())-" + name
        unlink(temporary)
        do {
            try make(temporary)
        } catch {
            unlink(temporary)
            throw error
        }
        guard rename(temporary, path) == 0 else {
            unlink(temporary)
            throw BenchError("cannot rename \(temporary) to \(path): \(String(cString: strerror(errno)))")
        }
        return true
    }
}

enum Format {
    /// `value` with `decimals` decimals.
    static func fixed(_ value: Double, _ decimals: Int) -> String {
        String(format: "%.\(decimals)f", value)
    }

    /// A plain-text table: first column left-aligned, the others right-aligned.
    static func table(header: [String], rows: [[String]]) -> String {
        let all = [header] + rows
        let widths = header.indices.map { column in all.map { $0[column].count }.max() ?? 0 }
        func line(_ cells: [String]) -> String {
            cells.enumerated().map { column, cell in
                let pad = String(repeating: " ", count: widths[column] - cell.count)
                return column == 0 ? cell + pad : pad + cell
            }.joined(separator: "   ")
        }
        let rule = widths.map { String(repeating: "-", count: $0) }.joined(separator: "   ")
        return ([line(header), rule] + rows.map(line)).joined(separator: "\n") + "\n"
    }

    static func json<T: Encodable>(_ value: T) throws -> String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
        // A figure not measured in a run (an analysis of old captures has no CPU readings) is NaN.
        encoder.nonConformingFloatEncodingStrategy = .convertToString(positiveInfinity: "inf", negativeInfinity: "-inf", nan: "nan")
        return String(decoding: try encoder.encode(value), as: UTF8.self) + "\n"
    }
}

/// What a running process has used, read from /proc.
enum ProcessUsage {
    /// User + system CPU seconds so far (/proc/PID/stat fields 14 and 15).
    static func cpuSeconds(of pid: pid_t) -> Double {
        guard let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
              let close = stat.lastIndex(of: ")") else { return 0 }
        let fields = stat[stat.index(after: close)...].split(separator: " ")
        // After the command: the state is field 3, so utime (14) and stime (15) are at 11 and 12.
        guard fields.count > 12, let user = Double(fields[11]), let system = Double(fields[12]) else { return 0 }
        return (user + system) / Double(sysconf(Int32(_SC_CLK_TCK)))
    }

    /// Bytes the process has read so far through read(2) and its kin, sockets included
    /// (/proc/PID/io `rchar`).
    static func bytesRead(by pid: pid_t) -> Int64 {
        guard let io = try? String(contentsOfFile: "/proc/\(pid)/io", encoding: .utf8),
              let line = io.split(separator: "\n").first(where: { $0.hasPrefix("rchar:") }),
              let bytes = Int64(line.split(separator: " ").dropFirst().first ?? "") else { return 0 }
        return bytes
    }

    /// The peak resident set (VmHWM), in MiB.
    static func peakResidentMebibytes(of pid: pid_t) -> Double {
        guard let status = try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8),
              let line = status.split(separator: "\n").first(where: { $0.hasPrefix("VmHWM:") }),
              let kilobytes = Double(line.split(separator: " ").dropFirst().first ?? "") else { return 0 }
        return kilobytes / 1024
    }
}
