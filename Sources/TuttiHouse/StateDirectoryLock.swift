#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import Foundation

/// One house per state directory: an exclusive `flock` on `<directory>/house.lock`, held for
/// as long as this value lives (the kernel lets it go when the process ends, however it ends).
///
/// Two houses on one store would each believe its own queue and streams, and the second used
/// to take "database is locked" for damage and move the first's database aside. Now the
/// second refuses to start and names the first.
///
/// Thread-safety: immutable; the lock goes with the value.
public final class StateDirectoryLock: Sendable {
    /// Another process holds the directory.
    public struct Held: Error, CustomStringConvertible {
        public let directory: String
        /// The holder's pid, as it wrote it; nil when it could not be read.
        public let pid: Int32?
        public var description: String {
            "another house (\(pid.map { "pid \($0)" } ?? "pid unknown")) uses the state directory \(directory); "
                + "stop it, or give this one its own --state-dir"
        }
    }

    public struct Unavailable: Error, CustomStringConvertible {
        public let path: String
        public let reason: String
        public var description: String { "cannot lock \(path): \(reason)" }
    }

    public let path: String
    private let descriptor: Int32

    /// Takes the directory (creating it), or throws `Held` naming the process that has it.
    public init(directory: String) throws {
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        path = directory + "/house.lock"
        let descriptor = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0o644)
        guard descriptor >= 0 else { throw Unavailable(path: path, reason: String(cString: strerror(errno))) }
        guard flock(descriptor, LOCK_EX | LOCK_NB) == 0 else {
            let failure = errno
            defer { close(descriptor) }
            guard failure == EWOULDBLOCK else { throw Unavailable(path: path, reason: String(cString: strerror(failure))) }
            let text = (try? String(contentsOfFile: path, encoding: .utf8)) ?? ""
            throw Held(directory: directory, pid: Int32(text.trimmingCharacters(in: .whitespacesAndNewlines)))
        }
        // For the next one's refusal: who holds it.
        let pid = "\(getpid())\n"
        if ftruncate(descriptor, 0) == 0 {
            _ = pid.withCString { write(descriptor, $0, strlen($0)) }
        }
        self.descriptor = descriptor
    }

    deinit { close(descriptor) }
}
