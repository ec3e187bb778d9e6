/// MPD names songs by URI: a path relative to the music directory. The house may have several
/// (`--music`); a song is named relative to the first that holds it, and a path elsewhere (a
/// file under `--allow-dir`) or a URL by itself.
struct MPDSongURIs: Sendable {
    /// Without a trailing slash.
    let roots: [String]

    init(roots: [String]) {
        self.roots = roots.map { $0.count > 1 && $0.hasSuffix("/") ? String($0.dropLast()) : $0 }
    }

    func uri(forPath path: String) -> String {
        for root in roots where path.hasPrefix(root + "/") { return String(path.dropFirst(root.count + 1)) }
        return path
    }

    /// The path of `uri` on the house's disk (or the URL): relative ones under the first root
    /// that holds them. `..` is left to the house's `MediaAccess`, which resolves it.
    func path(forURI uri: String) -> String {
        if uri.hasPrefix("/") || uri.contains("://") { return uri }
        let trimmed = uri.hasPrefix("file:///") ? String(uri.dropFirst(7)) : uri
        if trimmed.hasPrefix("/") { return trimmed }
        for root in roots {
            let candidate = root + "/" + trimmed
            if access(candidate, F_OK) == 0 { return candidate }
        }
        return (roots.first ?? "") + "/" + trimmed
    }

    /// The directory `uri` names ("" the top): under the first root.
    func directory(forURI uri: String) -> String? {
        guard let root = roots.first else { return nil }
        let trimmed = uri.hasSuffix("/") ? String(uri.dropLast()) : uri
        return trimmed.isEmpty ? root : root + "/" + trimmed
    }
}

#if canImport(Glibc)
import Glibc
#endif
