import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// Watches the library's directories with inotify and says which paths changed, so the library
/// follows the disk without a rescan: a file written, moved in or out, deleted; a directory
/// made, moved or removed (each new directory is watched in turn).
///
/// Changes are gathered until the tree has been quiet for `quietMilliseconds` (a copy of an
/// album is one update, not a dozen), then handed to `onChanges` on the watcher's own thread.
/// Thread-safety: `start` and `stop` from any one thread; `onChanges` runs on the watcher's.
public final class LibraryWatcher: @unchecked Sendable {
    /// What changed under the roots since the last call: paths written or moved in (files, or
    /// directories whose whole tree is new), and paths deleted or moved out (files or trees).
    public struct Changes: Sendable, Equatable {
        public var changed: Set<String> = []
        public var removed: Set<String> = []
        public var isEmpty: Bool { changed.isEmpty && removed.isEmpty }
    }

    public let roots: [String]
    private let quietMilliseconds: Int32
    private let onChanges: @Sendable (Changes) -> Void
    private let log: @Sendable (String) -> Void
    private var descriptor: Int32 = -1
    /// Written to stop the thread's poll.
    private var wakePipe: [Int32] = [-1, -1]
    /// Watch descriptor → the directory it watches. Only the watcher's thread touches it after `start`.
    private var directories: [Int32: String] = [:]
    private var saidFull = false
    private var thread: Thread?
    private let stopped = DispatchSemaphore(value: 0)

    /// The number of directories watched (for tests and the log).
    public private(set) var watchedCount = 0

    public init(roots: [String], quietMilliseconds: Int32 = 500, log: @escaping @Sendable (String) -> Void,
                onChanges: @escaping @Sendable (Changes) -> Void) {
        self.roots = roots
        self.quietMilliseconds = quietMilliseconds
        self.log = log
        self.onChanges = onChanges
    }

    /// Watches every directory under the roots, then follows them on a thread of its own.
    /// Throws if inotify cannot be had at all.
    public func start() throws {
        descriptor = inotify_init1(Int32(IN_CLOEXEC | IN_NONBLOCK))
        guard descriptor >= 0 else { throw LibraryWatcherError("inotify: \(String(cString: strerror(errno)))") }
        guard pipe(&wakePipe) == 0 else { throw LibraryWatcherError("pipe: \(String(cString: strerror(errno)))") }
        for root in roots { watchTree(root) }
        watchedCount = directories.count
        let thread = Thread { [self] in
            run()
            stopped.signal()
        }
        thread.name = "tutti library watch"
        self.thread = thread
        thread.start()
    }

    public func stop() {
        guard thread != nil else { return }
        var byte: UInt8 = 1
        _ = write(wakePipe[1], &byte, 1)
        stopped.wait()
        thread = nil
        close(descriptor)
        close(wakePipe[0])
        close(wakePipe[1])
    }

    private static let mask = UInt32(IN_CLOSE_WRITE | IN_MOVED_TO | IN_MOVED_FROM | IN_DELETE | IN_CREATE | IN_DELETE_SELF | IN_ONLYDIR)

    /// Adds a watch on `root` and every directory under it.
    private func watchTree(_ root: String) {
        watch(root)
        guard let walk = FileManager.default.enumerator(at: URL(fileURLWithPath: root), includingPropertiesForKeys: [.isDirectoryKey],
                                                        options: [.skipsHiddenFiles]) else { return }
        for case let url as URL in walk where (try? url.resourceValues(forKeys: [.isDirectoryKey]))?.isDirectory == true {
            watch(url.path)
        }
    }

    private func watch(_ directory: String) {
        let wd = inotify_add_watch(descriptor, directory, Self.mask)
        if wd >= 0 {
            directories[wd] = directory
        } else if errno == ENOSPC && !saidFull {
            saidFull = true
            log("library: cannot watch more than \(directories.count) directories (raise fs.inotify.max_user_watches); changes beyond them are found at the next start")
        }
    }

    private func run() {
        var pending = Changes()
        let buffer = UnsafeMutableRawPointer.allocate(byteCount: 64 * 1024, alignment: 8)
        defer { buffer.deallocate() }
        while true {
            var fds = [pollfd(fd: descriptor, events: Int16(POLLIN), revents: 0), pollfd(fd: wakePipe[0], events: Int16(POLLIN), revents: 0)]
            // Waits for events; once some are pending, only until the tree is quiet.
            let ready = poll(&fds, 2, pending.isEmpty ? -1 : quietMilliseconds)
            if ready < 0 && errno == EINTR { continue }
            if fds[1].revents != 0 { return }
            if ready == 0 {
                watchedCount = directories.count
                onChanges(pending)
                pending = Changes()
                continue
            }
            let count = read(descriptor, buffer, 64 * 1024)
            guard count > 0 else { continue }
            var offset = 0
            while offset + MemoryLayout<inotify_event>.size <= count {
                let event = buffer.load(fromByteOffset: offset, as: inotify_event.self)
                let nameStart = buffer.advanced(by: offset + MemoryLayout<inotify_event>.size)
                let nameLength = Int(event.len)
                let name = nameLength > 0 ? String(cString: nameStart.assumingMemoryBound(to: CChar.self)) : ""
                offset += MemoryLayout<inotify_event>.size + nameLength
                handle(event, name: name, into: &pending)
            }
        }
    }

    private func handle(_ event: inotify_event, name: String, into pending: inout Changes) {
        if event.mask & UInt32(IN_Q_OVERFLOW) != 0 {
            // Events were lost: everything under the roots may have changed.
            for root in roots { pending.changed.insert(root) }
            return
        }
        if event.mask & UInt32(IN_IGNORED) != 0 || event.mask & UInt32(IN_DELETE_SELF) != 0 {
            directories[event.wd] = nil
            return
        }
        guard let directory = directories[event.wd], !name.isEmpty, !name.hasPrefix(".") else { return }
        let path = directory + "/" + name
        let isDirectory = event.mask & UInt32(IN_ISDIR) != 0
        if event.mask & UInt32(IN_DELETE | IN_MOVED_FROM) != 0 {
            pending.removed.insert(path)
            pending.changed.remove(path)
        } else if event.mask & UInt32(IN_CLOSE_WRITE | IN_MOVED_TO) != 0 || (isDirectory && event.mask & UInt32(IN_CREATE) != 0) {
            // A new directory's files may be there before its watch is: its whole tree is read.
            if isDirectory { watchTree(path) }
            pending.changed.insert(path)
            pending.removed.remove(path)
        }
    }
}

public struct LibraryWatcherError: Error, CustomStringConvertible {
    public var description: String
    init(_ description: String) { self.description = description }
}
