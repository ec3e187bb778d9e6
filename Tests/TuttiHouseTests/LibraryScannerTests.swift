import Foundation
import Testing
@testable import TuttiHouse
import TuttiProtocol
import TuttiTestSupport

/// The library from real files made with the ffmpeg CLI: tags read, FTS5 search by words and
/// prefixes, browsing, a broken file listed with its reason without stopping the scan, and
/// rescans that read only what changed and drop what is gone.
@Suite struct LibraryScannerTests {
    @Test func scansSearchesAndRescansOnlyWhatChanged() throws {
        let directory = try TemporaryDirectory("library")
        defer { directory.remove() }
        let music = directory.file("music")
        try FileManager.default.createDirectory(atPath: music + "/Röyksopp/Melody", withIntermediateDirectories: true)
        func tone(_ path: String, title: String, artist: String, album: String, seconds: Int = 1) throws {
            try TestMedia.ffmpeg(["-f", "lavfi", "-i", "sine=frequency=440:duration=\(seconds)", "-metadata", "title=\(title)",
                                  "-metadata", "artist=\(artist)", "-metadata", "album=\(album)", music + "/" + path])
        }
        try tone("Röyksopp/Melody/01 Eple.flac", title: "Eple", artist: "Röyksopp", album: "Melody A.M.", seconds: 2)
        try tone("Röyksopp/Melody/02 Sparks.mp3", title: "Sparks", artist: "Röyksopp", album: "Melody A.M.")
        try tone("loose.ogg", title: "Help!", artist: "The Beatles", album: "Help!")
        _ = FileManager.default.createFile(atPath: music + "/broken.flac", contents: Data((0..<4000).map { UInt8(truncatingIfNeeded: $0 &* 7919) }))
        _ = FileManager.default.createFile(atPath: music + "/cover.jpg", contents: Data([0xFF, 0xD8]))

        let library = try MusicLibrary(directory: directory.file("state"))
        let scanner = LibraryScanner(roots: [music], library: library)
        var reports: [LibraryScanner.Progress] = []
        let first = try scanner.scan { reports.append($0) }
        #expect(first.total == 4 && first.read == 4 && first.unreadable == 1 && first.finished)
        #expect(reports.last == first)
        #expect(try library.counts() == (tracks: 3, unreadable: 1))
        let problems = try library.unreadableFiles()
        #expect(problems.map(\.path) == [music + "/broken.flac"] && !problems[0].reason.isEmpty && !problems[0].reason.contains("\n"))

        // Words as prefixes, diacritics folded, in any field.
        let eple = try library.search("royk epl", limit: 10)
        #expect(eple.map(\.title) == ["Eple"])
        #expect(eple.first?.durationSeconds.map { abs($0 - 2) < 0.01 } ?? false)
        #expect(eple.first?.format.hasPrefix("flac") ?? false)
        #expect(try library.search("melody", limit: 10).count == 2)
        #expect(try library.search("help", limit: 10).map(\.artist) == ["The Beatles"])
        #expect(try library.search("\"; DROP TABLE track; --", limit: 10).isEmpty)
        #expect(try library.browse(artist: nil, album: nil).artists == ["Röyksopp", "The Beatles"])
        #expect(try library.browse(artist: "Röyksopp", album: nil).albums == ["Melody A.M."])
        #expect(try library.browse(artist: "Röyksopp", album: "Melody A.M.").tracks?.map(\.title) == ["Eple", "Sparks"])

        // Nothing changed: nothing read. A file rewritten and one removed: one read, one dropped.
        let again = try scanner.scan()
        #expect(again.read == 0 && again.removed == 0)
        try FileManager.default.removeItem(atPath: music + "/loose.ogg")
        try tone("Röyksopp/Melody/02 Sparks.mp3", title: "Sparks (Remix)", artist: "Röyksopp", album: "Melody A.M.", seconds: 3)
        let third = try scanner.scan()
        #expect(third.read == 1 && third.removed == 1)
        #expect(try library.search("remix", limit: 10).map(\.title) == ["Sparks (Remix)"])
        #expect(try library.search("help", limit: 10).isEmpty)
        // Reopened from its file, it holds the same.
        #expect(try MusicLibrary(directory: directory.file("state")).counts() == (tracks: 2, unreadable: 1))
    }
}
