#if canImport(Glibc)
import Glibc
private let systemRead = Glibc.read
private let systemWrite = Glibc.write
#elseif canImport(Darwin)
import Darwin
private let systemRead = Darwin.read
private let systemWrite = Darwin.write
#endif

/// Where a house keeps its controller token, and how it is read and made.
///
/// The file is `<state-dir>/controller-token`, mode 0600: whoever can read it is a controller.
/// A house started without `--state-dir` keeps its token in the default directory,
/// `$XDG_STATE_HOME/tutti/house` (`~/.local/state/tutti/house`), where `tutti ctl` on the same
/// machine finds it with no flag; every house this user starts without a state directory shares
/// it.
public enum ControllerTokenFile {
    public static let fileName = "controller-token"

    /// Why a token could not be read or made: one line naming the file and the reason.
    public struct Failure: Error, CustomStringConvertible {
        public let description: String
    }

    /// The default state directory of a house (`$XDG_STATE_HOME/tutti/house`), or nil with no
    /// home to put it in.
    public static func defaultDirectory(environment: [String: String] = environmentVariables()) -> String? {
        if let state = environment["XDG_STATE_HOME"], state.hasPrefix("/") { return state + "/tutti/house" }
        guard let home = environment["HOME"], home.hasPrefix("/") else { return nil }
        return home + "/.local/state/tutti/house"
    }

    /// The token of a house on this machine started without a state directory.
    public static func readDefault() throws(Failure) -> ControllerToken {
        guard let directory = defaultDirectory() else { throw Failure(description: "no default state directory: HOME is not set") }
        return try read(path(in: directory))
    }

    /// The token file in `directory`.
    public static func path(in directory: String) -> String {
        directory.hasSuffix("/") ? directory + fileName : directory + "/" + fileName
    }

    /// Reads the token at `path`.
    public static func read(_ path: String) throws(Failure) -> ControllerToken {
        guard let text = readSmallFile(path) else {
            throw Failure(description: "cannot read the controller token \(path): \(String(cString: strerror(errno)))")
        }
        guard let token = ControllerToken(text: text) else {
            throw Failure(description: "\(path) is not a controller token (43 characters of base64url)")
        }
        return token
    }

    /// The token in `directory`, made there (with the directory) if there is none yet. Safe
    /// when several houses start at once: the file appears whole or not at all (written under
    /// a temporary name, then linked in place), and the one that loses the race reads the
    /// winner's.
    public static func readOrCreate(in directory: String) throws(Failure) -> (token: ControllerToken, created: Bool) {
        let path = path(in: directory)
        if access(path, F_OK) == 0 { return (try read(path), false) }
        try makeDirectories(directory)
        let token = ControllerToken.random()
        // Unique per attempt: a house killed between writing and linking leaves its file behind,
        // and in a container every start has the same pid.
        let temporary = path + ".\(getpid())-\(UInt64.random(in: 0...UInt64.max)).new"
        let fd = open(temporary, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o600)
        guard fd >= 0 else { throw Failure(description: "cannot write the controller token in \(directory): \(String(cString: strerror(errno)))") }
        let text = Array((token.text + "\n").utf8)
        let written = text.withUnsafeBytes { systemWrite(fd, $0.baseAddress, $0.count) }
        let synced = fsync(fd)
        close(fd)
        defer { unlink(temporary) }
        guard written == text.count, synced == 0 else {
            throw Failure(description: "cannot write the controller token \(path): \(String(cString: strerror(errno)))")
        }
        if link(temporary, path) == 0 { return (token, true) }
        guard errno == EEXIST else { throw Failure(description: "cannot write the controller token \(path): \(String(cString: strerror(errno)))") }
        return (try read(path), false)
    }

    /// Whether the file at `path` can be read by others than its owner: a token anyone on the
    /// machine can read protects nothing from them.
    public static func isExposed(_ path: String) -> Bool {
        var info = stat()
        return stat(path, &info) == 0 && info.st_mode & 0o077 != 0
    }

    public static func environmentVariables() -> [String: String] {
        var result: [String: String] = [:]
        var entry = environ
        while let pointer = entry.pointee {
            let pair = String(cString: pointer)
            if let equals = pair.firstIndex(of: "=") { result[String(pair[..<equals])] = String(pair[pair.index(after: equals)...]) }
            entry += 1
        }
        return result
    }

    private static func makeDirectories(_ directory: String) throws(Failure) {
        var prefix = directory.hasPrefix("/") ? "" : "."
        for component in directory.split(separator: "/") {
            prefix += "/" + component
            if mkdir(prefix, 0o700) != 0 && errno != EEXIST {
                throw Failure(description: "cannot make the state directory \(directory): \(String(cString: strerror(errno)))")
            }
        }
    }

    private static func readSmallFile(_ path: String) -> String? {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        var bytes = [UInt8](repeating: 0, count: 256)
        let count = bytes.withUnsafeMutableBytes { systemRead(fd, $0.baseAddress, $0.count) }
        guard count >= 0 else { return nil }
        return String(decoding: bytes[..<count], as: UTF8.self)
    }
}
