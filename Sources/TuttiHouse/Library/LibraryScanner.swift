import Foundation
import Synchronization
import TuttiMedia

#if canImport(Glibc)
import Glibc
#endif

/// Scans the library's roots into a `MusicLibrary`: new and changed files (by modification time
/// and size) are read with FFmpeg, unchanged ones skipped, vanished ones removed. A file that
/// cannot be read is kept with its reason and never stops the scan. Files are read on one
/// thread per core, each at nice 10: a scan at the house's start uses the machine while it is
/// idle and yields to the house's event loop, which keeps rooms in sync. Batches are written
/// and progress reported on the thread that calls `scan`.
///
/// Not thread-safe; one scan at a time per library.
public struct LibraryScanner: Sendable {
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
        try reconcile(found: roots.flatMap(Self.musicFiles(under:)), under: nil, progress: progress)
    }

    /// Applies what `LibraryWatcher` saw: each changed path (a file, or a directory whose whole
    /// tree is looked at) is read if new or different, and files gone from it dropped; each
    /// removed path (a file or a tree) is dropped.
    @discardableResult
    public func update(_ changes: LibraryWatcher.Changes) throws -> Progress {
        var found: [(path: String, modified: Double, size: Int64)] = []
        var looked: [String] = []
        for path in changes.changed.sorted() where isUnderRoots(path) {
            looked.append(path)
            var isDirectory: ObjCBool = false
            guard FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory) else { continue }
            if isDirectory.boolValue {
                found += Self.musicFiles(under: path)
            } else if let file = Self.musicFile(URL(fileURLWithPath: path)) {
                found.append(file)
            }
        }
        return try reconcile(found: found, under: looked + changes.removed.filter(isUnderRoots))
    }

    private func isUnderRoots(_ path: String) -> Bool {
        roots.contains { path == $0 || path.hasPrefix($0.hasSuffix("/") ? $0 : $0 + "/") }
    }

    /// Makes the library hold exactly `found` under `paths` (files, or directories meaning their
    /// trees; nil: everywhere, so a root no longer scanned is emptied): what is new or changed is
    /// read, what is known there and not found is removed.
    private func reconcile(found files: [(path: String, modified: Double, size: Int64)], under paths: [String]?,
                           progress: (Progress) -> Void = { _ in }) throws -> Progress {
        let known = try library.knownFiles()
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
        var changed: [(path: String, modified: Double, size: Int64)] = []
        for file in files {
            seen.insert(file.path)
            if let old = known[file.path], old.modified == file.modified, old.size == file.size { state.done += 1 } else { changed.append(file) }
        }
        for start in stride(from: 0, to: changed.count, by: Self.batchSize) {
            let batch = Array(changed[start..<min(changed.count, start + Self.batchSize)])
            for (file, outcome) in zip(batch, Self.read(batch)) {
                state.done += 1
                state.read += 1
                switch outcome {
                case .success(let info):
                    tracks.append(MusicLibrary.Track(path: file.path, modified: file.modified, size: file.size, title: info.title, artist: info.artist,
                                                     album: info.album, durationSeconds: info.duration?.seconds, codec: info.codec,
                                                     sampleRate: info.sampleRate, channelCount: info.channelCount, hasArtwork: info.hasArtwork))
                case .failure(let error):
                    state.unreadable += 1
                    unreadable.append((file.path, file.modified, file.size, error.reason))
                }
            }
            try flush()
        }
        let prefixes = paths?.map { $0.hasSuffix("/") ? $0 : $0 + "/" }
        let removed = known.keys.filter { path in
            guard !seen.contains(path) else { return false }
            guard let paths, let prefixes else { return true }
            return paths.contains(path) || prefixes.contains { path.hasPrefix($0) }
        }
        state.removed = removed.count
        state.finished = true
        try library.apply(tracks: tracks, unreadable: unreadable, removed: removed)
        progress(state)
        return state
    }

    /// Reads `files` with FFmpeg on one background thread per core; the outcomes in their order.
    static func read(_ files: [(path: String, modified: Double, size: Int64)]) -> [Result<TrackInfo, MediaError>] {
        let job = ReadJob(paths: files.map(\.path))
        let workers = max(1, min(ProcessInfo.processInfo.activeProcessorCount, files.count))
        let finished = DispatchSemaphore(value: 0)
        for _ in 0..<workers {
            let thread = Thread {
                #if os(Linux)
                // Per thread on Linux (`who` 0 is the calling thread).
                _ = setpriority(__priority_which_t(PRIO_PROCESS.rawValue), 0, 10)
                #endif
                job.work()
                finished.signal()
            }
            thread.name = "tutti library read"
            thread.start()
        }
        for _ in 0..<workers { finished.wait() }
        return job.outcomes.withLock { $0.map { $0! } }
    }

    /// Paths shared out among reading threads, one at a time, and what each read gave.
    private final class ReadJob: Sendable {
        let paths: [String]
        let next = Atomic(0)
        let outcomes: Mutex<[Result<TrackInfo, MediaError>?]>

        init(paths: [String]) {
            self.paths = paths
            outcomes = Mutex([Result<TrackInfo, MediaError>?](repeating: nil, count: paths.count))
        }

        func work() {
            while true {
                let index = next.add(1, ordering: .relaxed).oldValue
                guard index < paths.count else { return }
                let outcome: Result<TrackInfo, MediaError>
                do { outcome = .success(try TrackProbe.read(path: paths[index])) } catch { outcome = .failure(error) }
                outcomes.withLock { $0[index] = outcome }
            }
        }
    }

    /// The music files under `root` with their modification times and sizes, in path order.
    static func musicFiles(under root: String) -> [(path: String, modified: Double, size: Int64)] {
        let keys: [URLResourceKey] = [.isRegularFileKey, .contentModificationDateKey, .fileSizeKey]
        guard let walk = FileManager.default.enumerator(at: URL(fileURLWithPath: root), includingPropertiesForKeys: keys,
                                                        options: [.skipsHiddenFiles]) else { return [] }
        var files: [(String, Double, Int64)] = []
        for case let url as URL in walk {
            if let file = musicFile(url) { files.append(file) }
        }
        return files.sorted { $0.0 < $1.0 }
    }

    /// A music file's path, modification time and size; nil for anything else.
    static func musicFile(_ url: URL) -> (path: String, modified: Double, size: Int64)? {
        let keys: Set<URLResourceKey> = [.isRegularFileKey, .contentModificationDateKey, .fileSizeKey]
        guard extensions.contains(url.pathExtension.lowercased()), !url.lastPathComponent.hasPrefix("."),
              let values = try? url.resourceValues(forKeys: keys), values.isRegularFile == true else { return nil }
        return (url.path, values.contentModificationDate?.timeIntervalSince1970 ?? 0, Int64(values.fileSize ?? 0))
    }
}


