import Foundation
import GRDB
import TuttiMedia
import TuttiProtocol

/// The music library: every playable file under the library's roots (`tutti server --music`),
/// with its tags, duration and format, searchable with SQLite's FTS5, and the files that could
/// not be read, each with its reason.
///
/// Kept in `<state-dir>/library.sqlite` through GRDB (in memory without a state directory),
/// beside the house's own `house.sqlite` rather than in it: the library is a cache that a
/// rescan rebuilds from the files, so a damaged one never touches the house's state, and a
/// scan's long transactions never hold up the commits the house makes on its event loop.
///
/// Thread-safety: every method may be called from any thread. On disk it is a GRDB
/// `DatabasePool` (WAL): reads run beside a scan's writes instead of waiting for them — the
/// house reads an item's loudness on its loop (`HouseCore.loudness(ofPath:)`), which a
/// `DatabaseQueue` held behind a scan's batch for seconds. In memory, a `DatabaseQueue`.
public final class MusicLibrary: Sendable {
    /// A file as the library knows it.
    public struct Track: Sendable, Equatable {
        public var path: String
        public var modified: Double
        public var size: Int64
        public var title: String?
        public var artist: String?
        public var album: String?
        public var durationSeconds: Double?
        public var codec: String
        public var sampleRate: Int
        public var channelCount: Int
        public var hasArtwork: Bool
        /// Its integrated loudness and peak: its tags', else measured when scanned; nil for
        /// silence.
        public var loudness: Loudness? = nil
        /// Its album's, where its tags state one (else the library combines the album's tracks').
        public var albumLoudness: Loudness? = nil
        /// Whether `loudness` came from its tags.
        public var loudnessFromTags = false
    }

    let path: String
    private let database: any DatabaseWriter

    /// Opens (or creates) the library in `directory`; in memory when nil.
    public init(directory: String?) throws {
        if let directory {
            try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
            path = directory + "/library.sqlite"
            var configuration = Configuration()
            configuration.journalMode = .wal
            configuration.busyMode = .timeout(5)
            database = try DatabasePool(path: path, configuration: configuration)
        } else {
            path = ":memory:"
            database = try DatabaseQueue()
        }
        try Self.migrator.migrate(database)
    }

    private static var migrator: DatabaseMigrator {
        var migrator = DatabaseMigrator()
        migrator.registerMigration("v1") { db in
            try db.execute(sql: """
                CREATE TABLE track (id INTEGER PRIMARY KEY, path TEXT NOT NULL UNIQUE, modified REAL NOT NULL, size INTEGER NOT NULL,
                                    title TEXT, artist TEXT, album TEXT, duration_seconds REAL, codec TEXT NOT NULL,
                                    sample_rate INTEGER NOT NULL, channels INTEGER NOT NULL, has_artwork INTEGER NOT NULL);
                CREATE INDEX track_artist_album ON track (artist, album);
                CREATE VIRTUAL TABLE track_search USING fts5(title, artist, album, path, content='track', content_rowid='id',
                                                             tokenize='unicode61 remove_diacritics 2');
                CREATE TRIGGER track_added AFTER INSERT ON track BEGIN
                    INSERT INTO track_search (rowid, title, artist, album, path) VALUES (new.id, new.title, new.artist, new.album, new.path);
                END;
                CREATE TRIGGER track_removed AFTER DELETE ON track BEGIN
                    INSERT INTO track_search (track_search, rowid, title, artist, album, path) VALUES ('delete', old.id, old.title, old.artist, old.album, old.path);
                END;
                CREATE TRIGGER track_changed AFTER UPDATE ON track BEGIN
                    INSERT INTO track_search (track_search, rowid, title, artist, album, path) VALUES ('delete', old.id, old.title, old.artist, old.album, old.path);
                    INSERT INTO track_search (rowid, title, artist, album, path) VALUES (new.id, new.title, new.artist, new.album, new.path);
                END;
                CREATE TABLE unreadable (path TEXT PRIMARY KEY NOT NULL, modified REAL NOT NULL, size INTEGER NOT NULL, reason TEXT NOT NULL);
                """)
        }
        migrator.registerMigration("v2: loudness") { db in
            // A library scanned before knows no loudness: every file is read again (measured)
            // at the next scan, as if changed.
            try db.execute(sql: """
                ALTER TABLE track ADD COLUMN lufs REAL;
                ALTER TABLE track ADD COLUMN peak REAL;
                ALTER TABLE track ADD COLUMN album_lufs REAL;
                ALTER TABLE track ADD COLUMN album_peak REAL;
                ALTER TABLE track ADD COLUMN loudness_from_tags INTEGER NOT NULL DEFAULT 0;
                ALTER TABLE track ADD COLUMN loudness_state INTEGER NOT NULL DEFAULT 0;
                CREATE INDEX track_loudness_state ON track (loudness_state);
                UPDATE track SET modified = -1;
                """)
        }
        return migrator
    }

    // MARK: Scanning's side

    /// Every known file (readable or not) with its modification time and size: what a rescan
    /// compares the disk with.
    func knownFiles() throws -> [String: (modified: Double, size: Int64)] {
        try database.read { db in
            var known: [String: (Double, Int64)] = [:]
            for row in try Row.fetchAll(db, sql: "SELECT path, modified, size FROM track UNION ALL SELECT path, modified, size FROM unreadable") {
                known[row["path"]] = (row["modified"], row["size"])
            }
            return known
        }
    }

    /// Applies one batch of a scan in one transaction.
    func apply(tracks: [Track], unreadable: [(path: String, modified: Double, size: Int64, reason: String)], removed: [String]) throws {
        try database.write { db in
            // Prepared once per connection, not once per file.
            for track in tracks {
                try db.cachedStatement(sql: "DELETE FROM unreadable WHERE path = ?").execute(arguments: [track.path])
                try db.cachedStatement(sql: """
                    INSERT INTO track (path, modified, size, title, artist, album, duration_seconds, codec, sample_rate, channels, has_artwork,
                                       lufs, peak, album_lufs, album_peak, loudness_from_tags, loudness_state)
                    VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
                    ON CONFLICT(path) DO UPDATE SET modified = excluded.modified, size = excluded.size, title = excluded.title,
                        artist = excluded.artist, album = excluded.album, duration_seconds = excluded.duration_seconds, codec = excluded.codec,
                        sample_rate = excluded.sample_rate, channels = excluded.channels, has_artwork = excluded.has_artwork,
                        lufs = excluded.lufs, peak = excluded.peak, album_lufs = excluded.album_lufs, album_peak = excluded.album_peak,
                        loudness_from_tags = excluded.loudness_from_tags, loudness_state = excluded.loudness_state
                    """).execute(arguments: [track.path, track.modified, track.size, track.title, track.artist, track.album, track.durationSeconds,
                                     track.codec, track.sampleRate, track.channelCount, track.hasArtwork,
                                     track.loudness?.integratedLUFS, track.loudness?.peak, track.albumLoudness?.integratedLUFS,
                                     track.albumLoudness?.peak, track.loudnessFromTags,
                                     track.loudnessFromTags ? LoudnessState.known.rawValue : LoudnessState.pending.rawValue])
            }
            for file in unreadable {
                try db.execute(sql: "DELETE FROM track WHERE path = ?", arguments: [file.path])
                try db.execute(sql: "INSERT OR REPLACE INTO unreadable (path, modified, size, reason) VALUES (?, ?, ?, ?)",
                               arguments: [file.path, file.modified, file.size, file.reason])
            }
            for path in removed {
                try db.execute(sql: "DELETE FROM track WHERE path = ?", arguments: [path])
                try db.execute(sql: "DELETE FROM unreadable WHERE path = ?", arguments: [path])
            }
        }
    }

    /// Where a track's loudness stands: waiting for the scan's second pass, known (its tags', or
    /// measured; none for silence), or not measurable (its audio does not decode to the end).
    enum LoudnessState: Int {
        case pending = 0, known = 1, failed = 2
    }

    /// A loudness the second pass measured, for the file as it was then.
    struct MeasuredLoudness: Sendable {
        var path: String
        var modified: Double
        var size: Int64
        var loudness: Loudness?
        var failure: String?
    }

    /// The tracks whose loudness is still to be measured, as they were listed.
    func tracksNeedingLoudness() throws -> [(path: String, modified: Double, size: Int64)] {
        try database.read { db in
            try Row.fetchAll(db, sql: "SELECT path, modified, size FROM track WHERE loudness_state = 0 ORDER BY path").map {
                (path: $0["path"], modified: $0["modified"], size: $0["size"])
            }
        }
    }

    /// Stores measured loudness, each only if its file is still as it was listed (a file
    /// changed meanwhile was listed again, and waits for its own measurement).
    func setLoudness(_ measured: [MeasuredLoudness]) throws {
        try database.write { db in
            for item in measured {
                try db.cachedStatement(sql: """
                    UPDATE track SET lufs = ?, peak = ?, loudness_state = ? WHERE path = ? AND modified = ? AND size = ? AND loudness_state = 0
                    """).execute(arguments: [item.loudness?.integratedLUFS, item.loudness?.peak,
                                             (item.failure == nil ? LoudnessState.known : LoudnessState.failed).rawValue,
                                             item.path, item.modified, item.size])
            }
        }
    }

    // MARK: Reading

    public func counts() throws -> (tracks: Int, unreadable: Int) {
        try database.read { db in
            (try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM track") ?? 0, try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM unreadable") ?? 0)
        }
    }

    /// The tracks the library knows at these paths, by path (files it does not know are absent).
    public func tracks(atPaths paths: [String]) throws -> [String: LibraryTrack] {
        try database.read { db in
            var found: [String: LibraryTrack] = [:]
            for path in Set(paths) {
                if let row = try Row.fetchOne(db.cachedStatement(sql: "SELECT * FROM track WHERE path = ?"), arguments: [path]) {
                    found[path] = Self.track(row)
                }
            }
            return found
        }
    }

    /// Tracks whose title, artist, album or path match every word of `query` (each as a
    /// prefix), best matches first.
    public func search(_ query: String, limit: Int) throws -> [LibraryTrack] {
        let words = query.split(whereSeparator: { !$0.isLetter && !$0.isNumber }).map { "\"\($0)\"*" }
        guard !words.isEmpty else { return [] }
        return try database.read { db in
            try Row.fetchAll(db, sql: """
                SELECT track.* FROM track_search JOIN track ON track.id = track_search.rowid
                WHERE track_search MATCH ? ORDER BY bm25(track_search), track.artist, track.album, track.path LIMIT ?
                """, arguments: [words.joined(separator: " "), limit]).map(Self.track)
        }
    }

    /// Artists (no `artist`), an artist's albums, or an album's tracks.
    public func browse(artist: String?, album: String?) throws -> LibraryBrowseReport {
        try database.read { db in
            guard let artist else {
                let names = try String.fetchAll(db, sql: "SELECT DISTINCT COALESCE(artist, '') FROM track ORDER BY 1 COLLATE NOCASE")
                return LibraryBrowseReport(artists: names)
            }
            let artistClause = "COALESCE(artist, '') = ?"
            guard let album else {
                let names = try String.fetchAll(db, sql: "SELECT DISTINCT COALESCE(album, '') FROM track WHERE \(artistClause) ORDER BY 1 COLLATE NOCASE",
                                                arguments: [artist])
                return LibraryBrowseReport(albums: names)
            }
            let tracks = try Row.fetchAll(db, sql: "SELECT * FROM track WHERE \(artistClause) AND COALESCE(album, '') = ? ORDER BY path",
                                          arguments: [artist, album]).map(Self.track)
            return LibraryBrowseReport(tracks: tracks)
        }
    }

    /// The files that could not be read, with their reasons.
    public func unreadableFiles() throws -> [LibraryProblem] {
        try database.read { db in
            try Row.fetchAll(db, sql: "SELECT path, reason FROM unreadable ORDER BY path").map { LibraryProblem(path: $0["path"], reason: $0["reason"]) }
        }
    }

    private static func track(_ row: Row) -> LibraryTrack {
        var track = LibraryTrack(path: row["path"], title: row["title"], artist: row["artist"], album: row["album"],
                                 durationSeconds: row["duration_seconds"], format: "\(row["codec"] as String) \(row["sample_rate"] as Int) Hz")
        track.loudnessLUFS = row["lufs"]
        track.peak = row["peak"]
        track.albumLoudnessLUFS = row["album_lufs"]
        return track
    }

    /// The loudness of the tracks at `paths` and of their albums, by path: a track's is its tags'
    /// or was measured at the scan; its album's is its tags', else the combination of every
    /// track the library holds in the same directory with the same album tag (a track with no
    /// album tag is an album of its own). Files the library does not know are absent.
    public func loudness(atPaths paths: [String]) throws -> [String: (track: Loudness?, album: Loudness?)] {
        try database.read { db in
            var found: [String: (track: Loudness?, album: Loudness?)] = [:]
            for path in Set(paths) {
                guard let row = try Row.fetchOne(db.cachedStatement(sql: "SELECT lufs, peak, album, album_lufs, album_peak FROM track WHERE path = ?"),
                                                 arguments: [path]) else { continue }
                let track = Self.loudness(row["lufs"], row["peak"])
                var album = Self.loudness(row["album_lufs"], row["album_peak"])
                if album == nil, let name: String = row["album"] {
                    let directory = (path as NSString).deletingLastPathComponent
                    let siblings = try Row.fetchAll(db.cachedStatement(sql: """
                        SELECT path, lufs, peak, duration_seconds FROM track WHERE album = ? AND path LIKE ? ESCAPE '\\'
                        """), arguments: [name, Self.likePrefix(directory + "/")])
                    album = Loudness.combined(siblings.compactMap { sibling in
                        // Only the directory's own files, not its subdirectories'.
                        guard ((sibling["path"] as String) as NSString).deletingLastPathComponent == directory,
                              let loudness = Self.loudness(sibling["lufs"], sibling["peak"]) else { return nil }
                        return (loudness, sibling["duration_seconds"] ?? 0)
                    })
                } else if album == nil {
                    album = track
                }
                found[path] = (track, album)
            }
            return found
        }
    }

    private static func loudness(_ lufs: Double?, _ peak: Double?) -> Loudness? {
        guard let lufs else { return nil }
        return Loudness(integratedLUFS: lufs, peak: peak ?? 1)
    }

    /// `prefix` as a LIKE pattern matching what starts with it (its wildcards escaped).
    private static func likePrefix(_ prefix: String) -> String {
        prefix.replacingOccurrences(of: "\\", with: "\\\\").replacingOccurrences(of: "%", with: "\\%").replacingOccurrences(of: "_", with: "\\_") + "%"
    }
}
