import Foundation
import TuttiProtocol

/// Finding songs in the library (`find`, `search`, `count`) and queueing what is found
/// (`findadd`, `searchadd`, `add DIRECTORY`), in MPD's database order.
extension MPDCommands {
    /// A song of the music directory, with its tags when the library has read them.
    struct FoundSong {
        var path: String
        var tags: LibraryTrack?
    }

    /// The music files under `directory`, in MPD's database order: a directory's songs by name,
    /// then each of its subdirectories in turn (`Directory::Walk`).
    static func songPaths(under directory: String) -> [String] {
        var paths: [String] = []
        // A directory is walked once, however many links lead to it: a link to its own parent
        // would otherwise recurse without end.
        var walked = Set<String>()
        func walk(_ directory: String) {
            guard walked.insert(URL(fileURLWithPath: directory).resolvingSymlinksInPath().path).inserted else { return }
            let names = ((try? FileManager.default.contentsOfDirectory(atPath: directory)) ?? []).filter { !$0.hasPrefix(".") }.sorted()
            var subdirectories: [String] = []
            for name in names {
                let path = directory + "/" + name
                var isDirectory: ObjCBool = false
                guard FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory) else { continue }
                if isDirectory.boolValue {
                    subdirectories.append(path)
                } else if musicExtensions.contains((name as NSString).pathExtension.lowercased()) {
                    paths.append(path)
                }
            }
            for subdirectory in subdirectories { walk(subdirectory) }
        }
        walk(directory)
        return paths
    }

    /// The songs of the directory `uri` names, or nil when it names none (a file, a URL).
    func songsOfDirectory(_ uri: String) throws(MPDError) -> [String]? {
        // Some clients add "/" for the whole database, which MPD still accepts.
        let uri = uri == "/" ? "" : uri
        guard !uri.contains("://"), !uri.hasPrefix("/"), let directory = uris.directory(forURI: uri) else { return nil }
        var isDirectory: ObjCBool = false
        guard FileManager.default.fileExists(atPath: directory, isDirectory: &isDirectory), isDirectory.boolValue else { return nil }
        guard !uri.split(separator: "/").contains("..") else { throw MPDError(.noExist, "No such directory") }
        return Self.songPaths(under: directory)
    }

    /// The library's songs that pass the filter in `arguments`, in database order, sorted and
    /// windowed as its options ask.
    func matching(_ arguments: [String], search: Bool) async throws(MPDError) -> ([FoundSong], MPDFilter.Options) {
        let (filter, options) = try MPDFilter.parse(arguments, search: search)
        let paths = uris.roots.flatMap { Self.songPaths(under: $0) }
        let tags = await house.libraryTracks(atPaths: paths)
        var found = paths.map { FoundSong(path: $0, tags: tags[$0]) }.filter { song in
            filter.matches(MPDFilter.Song(uri: uris.uri(forPath: song.path), artist: song.tags?.artist, album: song.tags?.album,
                                          title: song.tags?.title), foldCase: search)
        }
        if let sort = options.sort {
            let descending = sort.hasPrefix("-")
            let tag = (descending ? String(sort.dropFirst()) : sort).lowercased()
            guard MPDFilter.tags.contains(tag), tag != "any" else { throw MPDError(.argument, "Unknown sort tag: \(sort)") }
            func key(_ song: FoundSong) -> String {
                MPDFilter.Song(uri: uris.uri(forPath: song.path), artist: song.tags?.artist, album: song.tags?.album, title: song.tags?.title)
                    .values(tag).first ?? ""
            }
            // Stable, as MPD's: songs with equal keys keep database order.
            found = found.enumerated().sorted { a, b in
                let (ka, kb) = (key(a.element), key(b.element))
                if ka == kb { return a.offset < b.offset }
                return descending ? ka > kb : ka < kb
            }.map(\.element)
        }
        if let window = options.window {
            found = Array(found[min(window.lowerBound, found.count)..<min(window.upperBound, found.count)])
        }
        return (found, options)
    }

    /// `findadd` and `searchadd`: what `find` or `search` would list, queued (at `position`).
    mutating func addMatching(_ request: MPDRequest, into out: inout MPDResponse) async throws(MPDError) {
        let (songs, options) = try await matching(request.arguments, search: request.name == "searchadd")
        var at: Int?
        if let position = options.position {
            at = try await insertPosition(position)
        }
        try await add(songs.map(\.path), at: at, for: request.name)
    }

    /// Queues `paths` in order, from `at` (nil: at the end).
    func add(_ paths: [String], at: Int?, for command: String) async throws(MPDError) {
        for (offset, path) in paths.enumerated() {
            _ = try await perform(.queueAdd(file: path, at: at.map { $0 + offset }), for: command)
        }
    }

    /// MPD's insert position: `N`, or `+N`/`-N` relative to the song playing (`+0` right after it).
    mutating func insertPosition(_ text: String) async throws(MPDError) -> Int {
        guard let value = Int(text) else { throw MPDError(.argument, "Integer expected: \(text)") }
        guard text.hasPrefix("+") || text.hasPrefix("-") else {
            guard value >= 0 else { throw MPDError(.argument, "Number is negative: \(text)") }
            return value
        }
        let now = try await current()
        guard let item = now.status.item else { throw MPDError(.playerSync, "No current song") }
        let position = text.hasPrefix("+") ? item + 1 + value : item + value
        guard position >= 0 else { throw MPDError(.argument, "Bad position: \(text)") }
        return position
    }
}
