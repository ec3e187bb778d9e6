import FoundationEssentials
#if canImport(Glibc)
import Glibc
private let systemRead = Glibc.read
private let systemWrite = Glibc.write
#elseif canImport(Darwin)
import Darwin
private let systemRead = Darwin.read
private let systemWrite = Darwin.write
#endif

/// The small files of a state directory that hold secrets or trust: the controller token, the
/// identity keys, the admitted speakers, a speaker's house. Each is mode 0600 in a directory of
/// mode 0700, and appears whole or not at all.
public enum StateFile {
    /// Why a file could not be read or written: one line naming it and the reason.
    public struct Failure: Error, CustomStringConvertible {
        public let description: String
        public init(description: String) { self.description = description }
    }

    /// `name` in `directory`.
    public static func path(_ name: String, in directory: String) -> String {
        directory.hasSuffix("/") ? directory + name : directory + "/" + name
    }

    /// The file's text, or nil when it cannot be read (`errno` says why).
    public static func read(_ path: String, limit: Int = 1 << 20) -> String? {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        var result: [UInt8] = []
        var bytes = [UInt8](repeating: 0, count: 4096)
        while result.count < limit {
            let count = bytes.withUnsafeMutableBytes { systemRead(fd, $0.baseAddress, $0.count) }
            guard count >= 0 else { return nil }
            if count == 0 { break }
            result += bytes[..<count]
        }
        return String(decoding: result, as: UTF8.self)
    }

    /// Whether a file exists at `path`.
    public static func exists(_ path: String) -> Bool { access(path, F_OK) == 0 }

    /// The text of `name` in `directory`, made there (with the directory) by `make` if there is
    /// none yet. Safe when several processes start at once: the file appears whole or not at
    /// all (written under a temporary name, then linked in place), and one that loses the race
    /// reads the winner's.
    public static func readOrCreate(_ name: String, in directory: String, what: String, make: () -> String) throws(Failure) -> (text: String, created: Bool) {
        let path = path(name, in: directory)
        if exists(path) {
            guard let text = read(path) else { throw Failure(description: "cannot read \(what) \(path): \(String(cString: strerror(errno)))") }
            return (text, false)
        }
        try makeDirectories(directory)
        let text = make()
        let temporary = try writeTemporary(text, for: path, what: what)
        defer { unlink(temporary) }
        if link(temporary, path) == 0 { return (text, true) }
        guard errno == EEXIST else { throw Failure(description: "cannot write \(what) \(path): \(String(cString: strerror(errno)))") }
        guard let winner = read(path) else { throw Failure(description: "cannot read \(what) \(path): \(String(cString: strerror(errno)))") }
        return (winner, false)
    }

    /// Replaces `path` with `text` whole (a temporary file renamed over it), making its
    /// directory if needed.
    public static func replace(_ path: String, with text: String, what: String) throws(Failure) {
        if let slash = path.lastIndex(of: "/"), slash != path.startIndex { try makeDirectories(String(path[..<slash])) }
        let temporary = try writeTemporary(text, for: path, what: what)
        guard rename(temporary, path) == 0 else {
            let reason = String(cString: strerror(errno))
            unlink(temporary)
            throw Failure(description: "cannot write \(what) \(path): \(reason)")
        }
    }

    /// The JSON file at `path` read as `T`. A failure names the file, `what` it should be and
    /// `remedy`, what the user can do about it.
    public static func readJSON<T: Decodable>(_ type: T.Type, from path: String, what: String, remedy: String) throws(Failure) -> T {
        guard let text = read(path) else { throw Failure(description: "cannot read \(what) \(path): \(String(cString: strerror(errno)))") }
        do { return try JSONDecoder().decode(T.self, from: Data(text.utf8)) } catch {
            throw Failure(description: "\(path) is not \(what) (\(error)); \(remedy)")
        }
    }

    /// Replaces `path` with `value` as JSON (indented, keys sorted, for a person to read).
    public static func replaceJSON(_ path: String, with value: some Encodable, what: String) throws(Failure) {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
        let data: Data
        do { data = try encoder.encode(value) } catch {
            // State files hold strings and numbers that JSON can carry: a broken invariant.
            preconditionFailure("encoding \(what) failed: \(error)")
        }
        try replace(path, with: String(decoding: data, as: UTF8.self) + "\n", what: what)
    }

    /// Removes `path`; true when it is gone (or never was).
    @discardableResult
    public static func remove(_ path: String) -> Bool { unlink(path) == 0 || errno == ENOENT }

    /// Whether the file at `path` can be read by others than its owner: a secret anyone on the
    /// machine can read protects nothing from them.
    public static func isExposed(_ path: String) -> Bool {
        var info = stat()
        return stat(path, &info) == 0 && info.st_mode & 0o077 != 0
    }

    /// Writes `text` to a new file beside `path`, synced, mode 0600; returns its path.
    private static func writeTemporary(_ text: String, for path: String, what: String) throws(Failure) -> String {
        // Unique per attempt: a process killed between writing and linking leaves its file
        // behind, and in a container every start has the same pid.
        let temporary = path + ".\(getpid())-\(UInt64.random(in: 0...UInt64.max)).new"
        let fd = open(temporary, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o600)
        guard fd >= 0 else { throw Failure(description: "cannot write \(what) \(path): \(String(cString: strerror(errno)))") }
        let bytes = Array(text.utf8)
        let written = bytes.withUnsafeBytes { systemWrite(fd, $0.baseAddress, $0.count) }
        let synced = fsync(fd)
        close(fd)
        guard written == bytes.count, synced == 0 else {
            let reason = String(cString: strerror(errno))
            unlink(temporary)
            throw Failure(description: "cannot write \(what) \(path): \(reason)")
        }
        return temporary
    }

    static func makeDirectories(_ directory: String) throws(Failure) {
        var prefix = directory.hasPrefix("/") ? "" : "."
        for component in directory.split(separator: "/") {
            prefix += "/" + component
            if mkdir(prefix, 0o700) != 0 && errno != EEXIST {
                throw Failure(description: "cannot make the state directory \(directory): \(String(cString: strerror(errno)))")
            }
        }
    }
}
