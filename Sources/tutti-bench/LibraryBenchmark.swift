import ArgumentParser
import Foundation
import TuttiHouse
import TuttiSimulation

#if canImport(Glibc)
import Glibc
#endif

/// `tutti-bench library`: how fast the house's library scan reads a tree of tagged files,
/// against MPD's database update of the same tree, measured in the same run.
///
/// The tree: `--distinct` files made with the ffmpeg CLI (1 s each, FLAC and MP3, each with its
/// own title, artist and album), hard-linked into `--files` paths of artist/album folders, so a
/// tree of 10 000 costs seconds to make and no disk. Both scanners open every path.
///
/// Tutti: a `LibraryScanner` into a fresh library in a temporary directory (what `tutti server
/// --music` runs at start). MPD: Debian's `mpd`, headless (a null output, its own port and
/// files), started on the tree with no database, so it builds one; timed from its start until
/// `mpc stats` counts every file and no update runs (polled every 20 ms), minus its start-up
/// on an empty tree.
struct LibraryBenchmark: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "library",
        abstract: "Library scan rate against MPD's database update, on a generated tree of tagged files.",
        discussion: "Needs the ffmpeg CLI, and Debian's mpd and mpc for the anchor (without them, Tutti's figure alone).")

    @Option(help: "Files in the tree.") var files = 10_000
    @Option(help: "Distinct files made with ffmpeg; the rest are hard links to them.") var distinct = 100
    @Option(help: "Where the tree is made (kept between runs).") var directory = "out/bench/library"
    @Flag(help: "Print JSON.") var json = false

    func run() throws {
        let tree = try makeTree()
        Console.progress("library: scanning \(files) files with Tutti's LibraryScanner…")
        let state = directory + "/tutti-state-\(getpid())"
        try? FileManager.default.removeItem(atPath: state)
        defer { try? FileManager.default.removeItem(atPath: state) }
        let library = try MusicLibrary(directory: state)
        var scanned: LibraryScanner.Progress?
        let tuttiSeconds = try Stopwatch.measure { scanned = try LibraryScanner(roots: [tree], library: library).scan() }
        let tuttiTracks = try library.counts().tracks
        guard tuttiTracks == files else { throw BenchError("Tutti's library holds \(tuttiTracks) tracks of \(files) (\(scanned?.unreadable ?? 0) unreadable)") }
        let rescanSeconds = try Stopwatch.measure { _ = try LibraryScanner(roots: [tree], library: library).scan() }

        var mpdSeconds: Double?
        if which("mpd") && which("mpc") {
            Console.progress("library: the same tree with MPD's database update…")
            let empty = directory + "/empty"
            try FileManager.default.createDirectory(atPath: empty, withIntermediateDirectories: true)
            let startup = try mpdScan(musicDirectory: empty, expected: 0)
            mpdSeconds = max(0, try mpdScan(musicDirectory: tree, expected: files) - startup)
        } else {
            Console.progress("library: mpd or mpc not found (apt-get install mpd mpc): no anchor")
        }
        // "Music Player Daemon 0.23.12 (0.23.12)" → "MPD 0.23.12".
        let versionLine = which("mpd") ? (try? String(decoding: runCapturing("mpd", ["--version"]).prefix(200), as: UTF8.self))?.split(separator: "\n").first : nil
        let mpdVersion = "MPD " + (versionLine?.split(separator: " ").dropFirst(3).first.map(String.init) ?? "")
        Console.progress("library: \(scanned?.read ?? 0) files read by Tutti")
        if json {
            var fields: [String: Any] = ["files": files, "tuttiSeconds": tuttiSeconds, "tuttiFilesPerSecond": Double(files) / tuttiSeconds,
                                         "tuttiRescanSeconds": rescanSeconds]
            if let mpdSeconds { fields["mpdSeconds"] = mpdSeconds; fields["mpdFilesPerSecond"] = Double(files) / mpdSeconds }
            let data = try JSONSerialization.data(withJSONObject: fields, options: [.sortedKeys])
            Console.output(String(decoding: data, as: UTF8.self) + "\n")
            return
        }
        Console.output("library scan of \(files) tagged files (\(distinct) distinct, FLAC and MP3)\n")
        var rows = [["Tutti LibraryScanner (FFmpeg)", Format.fixed(tuttiSeconds, 2), Format.fixed(Double(files) / tuttiSeconds, 0), ""]]
        if let mpdSeconds {
            rows.append([mpdVersion, Format.fixed(mpdSeconds, 2), Format.fixed(Double(files) / mpdSeconds, 0), "anchor"])
            rows[0][3] = Format.fixed(mpdSeconds / tuttiSeconds, 2) + "× MPD's rate"
        }
        rows.append(["Tutti rescan, nothing changed", Format.fixed(rescanSeconds, 2), "", ""])
        Console.output(Format.table(header: ["scanner", "seconds", "files/s", ""], rows: rows))
    }

    /// The tree, made once: `distinct` files by ffmpeg, hard-linked into `files` paths.
    private func makeTree() throws -> String {
        let tree = FileManager.default.currentDirectoryPath + "/" + directory + "/tree-\(files)-\(distinct)"
        let marker = tree + "/.complete"
        if FileManager.default.fileExists(atPath: marker) { return tree }
        try? FileManager.default.removeItem(atPath: tree)
        let sources = directory + "/sources"
        try FileManager.default.createDirectory(atPath: sources, withIntermediateDirectories: true)
        Console.progress("library: making \(distinct) tagged files with ffmpeg…")
        var made: [String] = []
        for index in 0..<distinct {
            let path = sources + "/\(index).\(index % 2 == 0 ? "flac" : "mp3")"
            try MediaCache.make(path, regenerate: false) { temporary in
                try BenchProcess.ffmpeg(["-y", "-f", "lavfi", "-i", "sine=frequency=\(200 + index):duration=1", "-metadata", "title=Track \(index)",
                                         "-metadata", "artist=Artist \(index % 10)", "-metadata", "album=Album \(index % 20)", temporary])
            }
            made.append(path)
        }
        Console.progress("library: linking them into \(files) paths…")
        for index in 0..<files {
            let source = made[index % made.count]
            let folder = tree + "/Artist \(index % 50)/Album \(index % 500)"
            try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
            let target = folder + "/\(index).\(source.hasSuffix("flac") ? "flac" : "mp3")"
            guard link(source, target) == 0 else { throw BenchError("cannot link \(target): \(String(cString: strerror(errno)))") }
        }
        _ = FileManager.default.createFile(atPath: marker, contents: nil)
        return tree
    }

    /// Starts MPD on `musicDirectory` with no database and returns the seconds until it has
    /// `expected` songs and no update runs.
    private func mpdScan(musicDirectory: String, expected: Int) throws -> Double {
        let home = FileManager.default.currentDirectoryPath + "/" + directory + "/mpd-\(getpid())"
        try? FileManager.default.removeItem(atPath: home)
        try FileManager.default.createDirectory(atPath: home, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: home) }
        let port = 20000 + Int(getpid() % 20000)
        let absolute = musicDirectory.hasPrefix("/") ? musicDirectory : FileManager.default.currentDirectoryPath + "/" + musicDirectory
        try """
            music_directory "\(absolute)"
            db_file "\(home)/database"
            log_file "\(home)/log"
            state_file "\(home)/state"
            bind_to_address "127.0.0.1"
            port "\(port)"
            audio_output {
                type "null"
                name "null"
            }
            """.write(toFile: home + "/mpd.conf", atomically: true, encoding: .utf8)
        let start = Stopwatch.now()
        let daemon = Process()
        daemon.executableURL = URL(fileURLWithPath: "/usr/bin/mpd")
        daemon.arguments = ["--no-daemon", home + "/mpd.conf"]
        daemon.standardOutput = FileHandle.nullDevice
        daemon.standardError = FileHandle.nullDevice
        try SpawnSignalMask.withNoneBlocked { try daemon.run() }
        defer { daemon.terminate(); daemon.waitUntilExit() }
        let deadline = start + 600_000_000_000
        while Stopwatch.now() < deadline {
            if let stats = try? String(decoding: runCapturing("mpc", ["-p", "\(port)", "stats"]), as: UTF8.self),
               let status = try? String(decoding: runCapturing("mpc", ["-p", "\(port)", "status"]), as: UTF8.self),
               stats.contains("Songs:"), !status.contains("Updating DB") {
                let songs = stats.split(separator: "\n").first { $0.hasPrefix("Songs:") }.flatMap { Int($0.split(separator: " ").last ?? "") } ?? -1
                if songs == expected { return Double(Stopwatch.now() - start) / 1e9 }
            }
            usleep(20_000)
        }
        throw BenchError("MPD did not finish its database update within 600 s (its log: \(home)/log)")
    }

    private func which(_ program: String) -> Bool {
        (ProcessInfo.processInfo.environment["PATH"] ?? "").split(separator: ":").contains { FileManager.default.isExecutableFile(atPath: "\($0)/\(program)") }
    }

    private func runCapturing(_ executable: String, _ arguments: [String]) throws -> Data {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = [executable] + arguments
        let pipe = Pipe()
        process.standardOutput = pipe
        process.standardError = FileHandle.nullDevice
        try SpawnSignalMask.withNoneBlocked { try process.run() }
        let data = pipe.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        return data
    }
}
