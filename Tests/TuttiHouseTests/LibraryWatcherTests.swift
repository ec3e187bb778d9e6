import Foundation
import Synchronization
import Testing
@testable import TuttiHouse
import TuttiTestSupport

/// The library follows the disk through inotify: files written, rewritten, deleted; a directory
/// made with files in it, moved out of the tree and back in; each change applied by the
/// scanner as the house applies it, and checked in the library itself.
@Suite struct LibraryWatcherTests {
    @Test(.timeLimit(.minutes(1)))
    func followsFilesAndDirectories() throws {
        let directory = try TemporaryDirectory("library-watch")
        defer { directory.remove() }
        let music = directory.file("music")
        try FileManager.default.createDirectory(atPath: music + "/Album", withIntermediateDirectories: true)
        func tone(_ path: String, title: String, seconds: Int = 1) throws {
            // Written beside, then moved in, as a copy or a download manager does, or straight in.
            try TestMedia.ffmpeg(["-f", "lavfi", "-i", "sine=frequency=440:duration=\(seconds)", "-metadata", "title=\(title)", path])
        }
        try tone(music + "/Album/one.flac", title: "One")
        let library = try MusicLibrary(directory: nil)
        let scanner = LibraryScanner(roots: [music], library: library)
        try scanner.scan()
        let updates = Mutex<[LibraryScanner.Progress]>([])
        let watcher = LibraryWatcher(roots: [music], quietMilliseconds: 200, log: { print("watcher: \($0)") }) { changes in
            do {
                let result = try scanner.update(changes)
                updates.withLock { $0.append(result) }
            } catch {
                Issue.record("update failed: \(error)")
            }
        }
        try watcher.start()
        defer { watcher.stop() }
        #expect(watcher.watchedCount == 2)

        func titles() throws -> [String] { try library.browse(artist: "", album: "").tracks?.compactMap(\.title).sorted() ?? [] }
        /// Waits (guarded) until the library holds `expected`.
        func waitFor(_ expected: [String], _ step: String) throws {
            let deadline = Date().addingTimeInterval(20)
            while try titles() != expected {
                guard Date() < deadline else { throw TestTimeout("\(step): the library holds \(try titles()), not \(expected)") }
                usleep(20_000)
            }
        }

        try tone(music + "/Album/two.mp3", title: "Two")
        try waitFor(["One", "Two"], "a file written")
        try tone(music + "/Album/two.mp3", title: "Two (edit)", seconds: 2)
        try waitFor(["One", "Two (edit)"], "a file rewritten")
        try FileManager.default.removeItem(atPath: music + "/Album/one.flac")
        try waitFor(["Two (edit)"], "a file deleted")

        // A directory made with its files already in it (moved in whole), then a file written
        // into it once it is watched.
        let staging = directory.file("staging/New")
        try FileManager.default.createDirectory(atPath: staging, withIntermediateDirectories: true)
        try tone(staging + "/three.ogg", title: "Three")
        try FileManager.default.moveItem(atPath: staging, toPath: music + "/New")
        try waitFor(["Three", "Two (edit)"], "a directory moved in")
        try tone(music + "/New/four.flac", title: "Four")
        try waitFor(["Four", "Three", "Two (edit)"], "a file written in the new directory")
        // Moved out: its tracks leave the library; a stray non-music file changes nothing.
        try FileManager.default.moveItem(atPath: music + "/New", toPath: directory.file("staging/New"))
        try waitFor(["Two (edit)"], "a directory moved out")
        _ = FileManager.default.createFile(atPath: music + "/Album/notes.txt", contents: Data("liner notes".utf8))
        // A broken file is listed with its reason, as a scan lists it.
        _ = FileManager.default.createFile(atPath: music + "/Album/broken.flac", contents: Data((0..<3000).map { UInt8(truncatingIfNeeded: $0 &* 31) }))
        let deadline = Date().addingTimeInterval(20)
        while try library.unreadableFiles().isEmpty {
            guard Date() < deadline else { throw TestTimeout("the broken file was never listed") }
            usleep(20_000)
        }
        #expect(try library.unreadableFiles().map(\.path) == [music + "/Album/broken.flac"])
        #expect(try titles() == ["Two (edit)"])
        print("library watch: \(updates.withLock { $0.count }) updates: \(updates.withLock { $0.map { "read \($0.read), removed \($0.removed)" } })")
    }
}
