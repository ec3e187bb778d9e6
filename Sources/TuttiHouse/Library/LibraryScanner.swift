import Foundation
import TuttiMedia

/// Scans the library's roots into a `MusicLibrary`: new and changed files (by modification time
/// and size) are read with FFmpeg, unchanged ones skipped, vanished ones removed. A file that
/// cannot be read is kept with its reason and never stops the scan. Runs on the thread that
/// calls `scan`; reports its progress as it goes.
///
/// Not thread-safe; one scan at a time per library.
public struct LibraryScanner {
    /// File names the scan reads (others are not music: covers, playlists, notes).
    static let extensions: Set<String> = ["flac", "mp3", "ogg", "oga", "opus", "m4a", "mp4", "aac", "wav", "aif", "aiff", "wv", "ape", "mka", "webm", "alac"]
    /// Changes are written in batches of this many files, one transaction each.
    static let batchSize = 200

    public struct Progress: Sendable, Equatable {
        /// Files looked at so far, of `total` found under the roots.
        public var done: Int
        public var total: Int
        /// Read anew (new or changed), and of those, unreadable.
        public var read: Int
        public var unreadable: Int
        /// Removed from the library: gone from the disk.
        public var removed: Int
        public var finished: Bool
    }

    public let roots: [String]
    public let library: MusicLibrary

    public init(roots: [String], library: MusicLibrary) {
        self.roots = roots
        self.library = library
    }

    /// Scans every root; `progress` is called after each batch and at the end (on this thread).
    @discardableResult
    public func scan(progress: (Progress) -> Void = { _ in }) throws -> Progress {
        let known = try library.knownFiles()
        let files = roots.flatMap(Self.musicFiles(under:))
        var state = Progress(done: 0, total: files.count, read: 0, unreadable: 0, removed: 0, finished: false)
        var tracks: [MusicLibrary.Track] = []
        var unreadable: [(path: String, modified: Double, size: Int64, reason: String)] = []
        var seen = Set<String>()
        func flush() throws {
            try library.apply(tracks: tracks, unreadable: unreadable, removed: [])
            tracks.removeAll(keepingCapacity: true)
            unreadable.removeAll(keepingCapacity: true)
            progress(state)
        }
        for file in files {
            seen.insert(file.path)
            state.done += 1
            if let old = known[file.path], old.modified == file.modified, old.size == file.size { continue }
            state.read += 1
            do {
                let info = try AudioFileDecoder(path: file.path).info
                tracks.append(MusicLibrary.Track(path: file.path, modified: file.modified, size: file.size, title: info.title, artist: info.artist,
                                                 album: info.album, durationSeconds: info.duration?.seconds, codec: info.codec,
                                                 sampleRate: info.sampleRate, channelCount: info.channelCount, hasArtwork: info.hasArtwork))
            } catch {
                state.unreadable += 1
                unreadable.append((file.path, file.modified, file.size, error.reason))
            }
            if tracks.count + unreadable.count >= Self.batchSize { try flush() }
        }
        let removed = known.keys.filter { !seen.contains($0) }
        state.removed = removed.count
        state.finished = true
        try library.apply(tracks: tracks, unreadable: unreadable, removed: removed)
        progress(state)
        return state
    }

    /// The music files under `root` with their modification times and sizes, in path order.
    static func musicFiles(under root: String) -> [(path: String, modified: Double, size: Int64)] {
        let keys: [URLResourceKey] = [.isRegularFileKey, .contentModificationDateKey, .fileSizeKey]
        guard let walk = FileManager.default.enumerator(at: URL(fileURLWithPath: root), includingPropertiesForKeys: keys,
                                                        options: [.skipsHiddenFiles]) else { return [] }
        var files: [(String, Double, Int64)] = []
        for case let url as URL in walk where extensions.contains(url.pathExtension.lowercased()) {
            guard let values = try? url.resourceValues(forKeys: Set(keys)), values.isRegularFile == true else { continue }
            files.append((url.path, values.contentModificationDate?.timeIntervalSince1970 ?? 0, Int64(values.fileSize ?? 0)))
        }
        return files.sorted { $0.0 < $1.0 }
    }
}

private extension Error {
    /// One line: a `MediaError`'s reason, or the error.
    var reason: String { (self as? MediaError).map { "\($0.reason)" } ?? "\(self)" }
}
