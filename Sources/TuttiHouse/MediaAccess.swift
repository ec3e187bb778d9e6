#if canImport(Glibc)
import Glibc
#endif
import TuttiProtocol

/// What a controller may make the house play: only what is meant to be played. A controller
/// is anyone on the network, and the house reads files with its own rights, so without this
/// `play /etc/shadow` or `play file:///root/.ssh/id_ed25519` would stream the file to every
/// room (and decode errors would name its bytes).
///
/// - URLs: http and https only. FFmpeg opens many more schemes (`file:`, `concat:`, `subfile:`,
///   `data:`, `tcp:`…), each a way around the directories.
/// - Files: only under the allowed directories (the library's roots and `--allow-dir`), after
///   resolving symbolic links, so a link in an allowed directory to a file outside is refused
///   too. `-` (the house's own standard input) and `pipe:PATH` are left to the house's
///   operator; a pipe's path is checked like a file's.
struct MediaAccess {
    /// Real paths, without a trailing slash; nil allows every file.
    let allowedDirectories: [String]?

    init(allowedDirectories: [String]?) {
        self.allowedDirectories = allowedDirectories?.map { Self.realPath($0) ?? $0 }.map { $0.count > 1 && $0.hasSuffix("/") ? String($0.dropLast()) : $0 }
    }

    /// Why `item` may not be played; nil if it may.
    func refusal(for item: String) -> ControlRefusal? {
        if let scheme = Self.scheme(of: item) {
            guard scheme == "http" || scheme == "https" else {
                return ControlRefusal("\(item): the house plays http and https URLs only, not \(scheme)", kind: .forbidden)
            }
            return nil
        }
        if item == "-" { return nil }
        guard let allowed = allowedDirectories else { return nil }
        let path = item.hasPrefix("pipe:") ? String(item.dropFirst(5)) : item
        guard path.hasPrefix("/") else {
            return ControlRefusal("\(item): give an absolute path (the house's directories are not the controller's)", kind: .invalid)
        }
        // A file that does not exist is refused later, as missing; its directory is checked now.
        let real = Self.realPath(path) ?? path
        guard allowed.contains(where: { real == $0 || real.hasPrefix($0 == "/" ? "/" : $0 + "/") }) else {
            return ControlRefusal("\(item): outside the directories the house plays from (\(allowed.joined(separator: ", "))); "
                                  + "start it with --allow-dir to add one", kind: .forbidden)
        }
        return nil
    }

    /// The URL scheme of `item` (`http` in `http://…`), lowercased; nil for a path.
    static func scheme(of item: String) -> String? {
        guard let colon = item.firstIndex(of: ":") else { return nil }
        let scheme = item[..<colon]
        // `pipe:` is the house's own input syntax, and a path may hold a colon after a slash.
        guard scheme != "pipe", !scheme.isEmpty, !scheme.contains("/"),
              scheme.allSatisfy({ $0.isLetter || $0.isNumber || $0 == "+" || $0 == "-" || $0 == "." }) else { return nil }
        return scheme.lowercased()
    }

    /// The path with every symbolic link resolved; nil if it does not exist.
    static func realPath(_ path: String) -> String? {
        guard let resolved = realpath(path, nil) else { return nil }
        defer { free(resolved) }
        return String(cString: resolved)
    }
}
