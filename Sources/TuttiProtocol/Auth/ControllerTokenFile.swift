#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
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
        guard let text = StateFile.read(path, limit: 256) else {
            throw Failure(description: "cannot read the controller token \(path): \(String(cString: strerror(errno)))")
        }
        guard let token = ControllerToken(text: text) else {
            throw Failure(description: "\(path) is not a controller token (43 characters of base64url)")
        }
        return token
    }

    /// The token in `directory`, made there (with the directory) if there is none yet. Safe
    /// when several houses start at once (`StateFile.readOrCreate`).
    public static func readOrCreate(in directory: String) throws(Failure) -> (token: ControllerToken, created: Bool) {
        let made: (text: String, created: Bool)
        do { made = try StateFile.readOrCreate(fileName, in: directory, what: "the controller token") { ControllerToken.random().text + "\n" } }
        catch { throw Failure(description: error.description) }
        guard let token = ControllerToken(text: made.text) else {
            throw Failure(description: "\(path(in: directory)) is not a controller token (43 characters of base64url)")
        }
        return (token, made.created)
    }

    /// Whether the file at `path` can be read by others than its owner: a token anyone on the
    /// machine can read protects nothing from them.
    public static func isExposed(_ path: String) -> Bool { StateFile.isExposed(path) }

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
}
