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
        /// Whether both passes are done: every file listed, every loudness measured.
        public var finished: Bool
        /// Whether the first pass (tags) is done: every file is listed and searchable.
        public var listed = false
        /// Tracks whose loudness the second pass measured (`measureLoudness`).
        public var measured = 0
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
        var state = try reconcile(found: roots.flatMap(Self.musicFiles(under:)), under: nil, progress: progress)
        // The first pass's tracks are listed and searchable already; then their loudness.
        state.measured = try measureLoudness()
        state.finished = true
        progress(state)
        return state
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
            } else if let file = Self.musicFile(path) {
                found.append(file)
            }
        }
        var state = try reconcile(found: found, under: looked + changes.removed.filter(isUnderRoots))
        state.measured = try measureLoudness()
        state.finished = true
        return state
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
        // The reading threads run ahead while this one writes each batch as it completes.
        // The first pass: headers and tags (`TrackProbe`), with the loudness the tags state;
        // untagged files are measured by the second (`measureLoudness`), so that a new library
        // is listed and searchable first.
        let job = Self.startReading(changed.map(\.path)) { path throws(MediaError) in try TrackProbe.read(path: path) }
        for (index, file) in changed.enumerated() {
            let outcome = job.outcome(index)
            state.done += 1
            state.read += 1
            switch outcome {
            case .success(let info):
                let tagged = info.loudnessTags.track
                tracks.append(MusicLibrary.Track(path: file.path, modified: file.modified, size: file.size, title: info.title, artist: info.artist,
                                                 album: info.album, durationSeconds: info.duration?.seconds, codec: info.codec,
                                                 sampleRate: info.sampleRate, channelCount: info.channelCount, hasArtwork: info.hasArtwork,
                                                 loudness: tagged, albumLoudness: info.loudnessTags.album, loudnessFromTags: tagged != nil))
            case .failure(let error):
                state.unreadable += 1
                unreadable.append((file.path, file.modified, file.size, error.reason))
            }
            if tracks.count + unreadable.count == Self.batchSize { try flush() }
        }
        if !changed.isEmpty { try flush() }
        let prefixes = paths?.map { $0.hasSuffix("/") ? $0 : $0 + "/" }
        let removed = known.keys.filter { path in
            guard !seen.contains(path) else { return false }
            guard let paths, let prefixes else { return true }
            return paths.contains(path) || prefixes.contains { path.hasPrefix($0) }
        }
        state.removed = removed.count
        state.listed = true
        try library.apply(tracks: tracks, unreadable: unreadable, removed: removed)
        progress(state)
        return state
    }

    /// Starts `read` on every path on one background thread per core, each at nice 10;
    /// `ReadJob.outcome(_:)` waits for each in turn.
    static func startReading<Value: Sendable>(_ paths: [String], _ read: @escaping @Sendable (String) throws(MediaError) -> Value) -> ReadJob<Value> {
        let job = ReadJob(paths: paths, read: read)
        let workers = max(1, min(ProcessInfo.processInfo.activeProcessorCount, paths.count))
        for _ in 0..<(paths.isEmpty ? 0 : workers) {
            let thread = Thread {
                #if os(Linux)
                // Per thread on Linux (`who` 0 is the calling thread).
                _ = setpriority(__priority_which_t(PRIO_PROCESS.rawValue), 0, 10)
                #endif
                job.work()
            }
            thread.name = "tutti library read"
            thread.start()
        }
        return job
    }

    /// Paths shared out among reading threads, one at a time, and what each read gave.
    final class ReadJob<Value: Sendable>: @unchecked Sendable {
        let paths: [String]
        private let read: @Sendable (String) throws(MediaError) -> Value
        private let next = Atomic(0)
        /// Guards `outcomes`; signalled as each arrives.
        private let arrived = NSCondition()
        private var outcomes: [Result<Value, MediaError>?]

        init(paths: [String], read: @escaping @Sendable (String) throws(MediaError) -> Value) {
            self.paths = paths
            self.read = read
            outcomes = [Result<Value, MediaError>?](repeating: nil, count: paths.count)
        }

        func work() {
            while true {
                let index = next.add(1, ordering: .relaxed).oldValue
                guard index < paths.count else { return }
                let outcome: Result<Value, MediaError>
                do { outcome = .success(try read(paths[index])) } catch { outcome = .failure(error) }
                arrived.lock()
                outcomes[index] = outcome
                arrived.broadcast()
                arrived.unlock()
            }
        }

        /// The outcome of `paths[index]`, once read.
        func outcome(_ index: Int) -> Result<Value, MediaError> {
            arrived.lock()
            defer { arrived.unlock() }
            while outcomes[index] == nil { arrived.wait() }
            return outcomes[index]!
        }
    }

    /// The second pass: measures the loudness of every track the library holds without one
    /// (untagged, new or changed since), decoding each whole (`LoudnessMeter`), and stores it in
    /// batches; a file that changed meanwhile keeps waiting for the next pass. Returns how many
    /// were measured.
    @discardableResult
    func measureLoudness() throws -> Int {
        let pending = try library.tracksNeedingLoudness()
        let job = Self.startReading(pending.map(\.path)) { path throws(MediaError) in try LoudnessMeter.measure(path: path) }
        var batch: [MusicLibrary.MeasuredLoudness] = []
        for (index, file) in pending.enumerated() {
            switch job.outcome(index) {
            case .success(let loudness):
                batch.append(.init(path: file.path, modified: file.modified, size: file.size, loudness: loudness, failure: nil))
            case .failure(let error):
                // Listed, but not decodable to the end: it plays without a gain of its own.
                batch.append(.init(path: file.path, modified: file.modified, size: file.size, loudness: nil, failure: error.reason))
            }
            if batch.count == Self.batchSize {
                try library.setLoudness(batch)
                batch.removeAll(keepingCapacity: true)
            }
        }
        if !batch.isEmpty { try library.setLoudness(batch) }
        return pending.count
    }

    /// The music files under `root` with their modification times and sizes, in path order;
    /// hidden files and directories are skipped. A POSIX walk (readdir, fstatat): Foundation's
    /// enumerator with resource values took most of a rescan's time.
    static func musicFiles(under root: String) -> [(path: String, modified: Double, size: Int64)] {
        var files: [(path: String, modified: Double, size: Int64)] = []
        var pending = [root.count > 1 && root.hasSuffix("/") ? String(root.dropLast()) : root]
        while let directory = pending.popLast() {
            guard let handle = opendir(directory) else { continue }
            defer { closedir(handle) }
            let descriptor = dirfd(handle)
            while let entry = readdir(handle) {
                let name = withUnsafeBytes(of: entry.pointee.d_name) { raw in
                    String(decoding: raw.prefix { $0 != 0 }, as: UTF8.self)
                }
                guard !name.hasPrefix(".") else { continue }
                let path = directory + "/" + name
                var type = entry.pointee.d_type
                var info = stat()
                // Symbolic links and file systems without d_type: ask the inode.
                if type == UInt8(DT_UNKNOWN) || type == UInt8(DT_LNK) || type == UInt8(DT_REG) {
                    guard fstatat(descriptor, name, &info, 0) == 0 else { continue }
                    type = info.st_mode & S_IFMT == S_IFDIR ? UInt8(DT_DIR) : info.st_mode & S_IFMT == S_IFREG ? UInt8(DT_REG) : UInt8(DT_UNKNOWN)
                }
                if type == UInt8(DT_DIR) {
                    pending.append(path)
                } else if type == UInt8(DT_REG), let dot = name.lastIndex(of: "."), extensions.contains(name[name.index(after: dot)...].lowercased()) {
                    let modified = Double(info.st_mtim.tv_sec) + Double(info.st_mtim.tv_nsec) / 1e9
                    files.append((path, modified, Int64(info.st_size)))
                }
            }
        }
        return files.sorted { $0.path < $1.path }
    }

    /// A music file's path, modification time and size; nil for anything else.
    static func musicFile(_ path: String) -> (path: String, modified: Double, size: Int64)? {
        let name = path.split(separator: "/").last.map(String.init) ?? path
        var info = stat()
        guard !name.hasPrefix("."), let dot = name.lastIndex(of: "."), extensions.contains(name[name.index(after: dot)...].lowercased()),
              stat(path, &info) == 0, info.st_mode & S_IFMT == S_IFREG else { return nil }
        return (path, Double(info.st_mtim.tv_sec) + Double(info.st_mtim.tv_nsec) / 1e9, Int64(info.st_size))
    }
}


