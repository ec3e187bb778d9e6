import Foundation
import GRDB
import TuttiCore
import TuttiProtocol

/// What the house keeps across restarts, in SQLite (`<state-dir>/house.sqlite`, through GRDB,
/// in WAL mode): the queue with its entries' tags, room volumes and latencies, the group, and
/// the stream being played: its id and epoch, its anchors, and where each item starts on its
/// timeline. Each change is its own transaction, committed before the house acts on it, so a
/// house killed at any instant reopens with a prefix of its changes.
///
/// Write-ahead rules that make a restarted house agree with its rooms:
/// - an anchor is stored before any room is sent it (`House.apply`);
/// - an item's start is stored, on the producer thread, before any of its audio is encoded;
/// - a cut's epoch is stored before the cut is visible to the rooms' sender
///   (`ServerStream.truncate` calls `recordCut` under its lock).
///
/// The old `house.json` (queue, volumes, group) is imported once, then renamed
/// `house.json.migrated`.
///
/// Thread-safety: every method may be called from any thread (GRDB's `DatabaseQueue`
/// serializes them). Writes that fail (a full disk) return a one-line problem for the log;
/// the house goes on in memory.
final class HouseStore: Sendable {
    /// One item's start on a stream's timeline.
    struct TimelineItem: Sendable, Equatable {
        var startFrame: Int64
        /// The queue entry's tag (`House.queueTags`), stable across restarts.
        var tag: Int
        /// The item's own time at `startFrame`: zero, or where a seek or a restart started it.
        var itemStartTime: MediaTime
        var path: String
        var title: String?
        var durationSeconds: Double?
        /// Its tags, for now playing.
        var artist: String? = nil
        var album: String? = nil
    }

    struct StoredStream: Sendable, Equatable {
        var id: UInt32
        var epoch: Int
        var endFrame: Int64?
        var anchors: [TimelineAnchor]
        var items: [TimelineItem]
    }

    struct Snapshot: Sendable {
        var state = HouseState()
        var tags: [Int] = []
        var latencies: [String: Int64] = [:]
        var stream: StoredStream?
        var playlists: [String: StoredPlaylistsReport.Playlist] = [:]
    }

    let path: String
    private let database: DatabaseQueue

    /// Opens (or creates) the store in `directory`, importing an old `house.json` once.
    /// Returns the store and a problem worth a log line (a damaged JSON file), if any.
    static func open(directory: String) throws -> (HouseStore, String?) {
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        let store = try HouseStore(path: directory + "/house.sqlite")
        let json = directory + "/house.json"
        guard FileManager.default.fileExists(atPath: json) else { return (store, nil) }
        let (legacy, problem) = HouseState.loadJSON(path: json)
        if problem == nil {
            try store.database.write { db in
                // Only into an empty store: a store written since wins over a stale file.
                guard try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM queue_item") == 0 else { return }
                try Self.writeState(legacy, tags: Array(legacy.queue.indices), in: db)
            }
            try FileManager.default.moveItem(atPath: json, toPath: json + ".migrated")
        }
        return (store, problem)
    }

    init(path: String) throws {
        self.path = path
        var configuration = Configuration()
        configuration.journalMode = .wal
        configuration.busyMode = .timeout(5)
        configuration.prepareDatabase { db in
            // Durable against a killed process (the WAL is in the page cache), and a commit
            // costs no fsync: the house commits on its event loop.
            try db.execute(sql: "PRAGMA synchronous = NORMAL")
        }
        database = try DatabaseQueue(path: path, configuration: configuration)
        try Self.migrator.migrate(database)
    }

    private static var migrator: DatabaseMigrator {
        var migrator = DatabaseMigrator()
        migrator.registerMigration("v1") { db in
            try db.execute(sql: """
                CREATE TABLE setting (key TEXT PRIMARY KEY NOT NULL, value TEXT NOT NULL);
                CREATE TABLE queue_item (position INTEGER PRIMARY KEY NOT NULL, tag INTEGER NOT NULL, path TEXT NOT NULL);
                CREATE TABLE room (name TEXT PRIMARY KEY NOT NULL, volume INTEGER, latency_ns INTEGER);
                CREATE TABLE stream (id INTEGER PRIMARY KEY NOT NULL, epoch INTEGER NOT NULL, end_frame INTEGER);
                CREATE TABLE anchor (stream_id INTEGER NOT NULL, ordinal INTEGER NOT NULL, timeline_frame INTEGER NOT NULL,
                                     server_time INTEGER NOT NULL, is_playing INTEGER NOT NULL, PRIMARY KEY (stream_id, ordinal));
                CREATE TABLE timeline_item (stream_id INTEGER NOT NULL, start_frame INTEGER NOT NULL, tag INTEGER NOT NULL,
                                            item_start_value INTEGER NOT NULL, item_start_timescale INTEGER NOT NULL,
                                            path TEXT NOT NULL, title TEXT, duration_seconds REAL,
                                            PRIMARY KEY (stream_id, start_frame));
                """)
        }
        migrator.registerMigration("v2: artist and album for now playing") { db in
            try db.execute(sql: "ALTER TABLE timeline_item ADD COLUMN artist TEXT; ALTER TABLE timeline_item ADD COLUMN album TEXT;")
        }
        migrator.registerMigration("v3: latencies and names controllers set") { db in
            try db.execute(sql: """
                ALTER TABLE room ADD COLUMN latency_set_ns INTEGER;
                CREATE TABLE room_name (speaker_name TEXT PRIMARY KEY NOT NULL, room_name TEXT NOT NULL);
                """)
        }
        migrator.registerMigration("v4: stored playlists") { db in
            try db.execute(sql: "CREATE TABLE stored_playlist (name TEXT PRIMARY KEY NOT NULL, files TEXT NOT NULL, modified_seconds REAL NOT NULL)")
        }
        return migrator
    }

    // MARK: Reading

    func load() throws -> Snapshot {
        try database.read { db in
            var snapshot = Snapshot()
            for row in try Row.fetchAll(db, sql: "SELECT tag, path FROM queue_item ORDER BY position") {
                snapshot.tags.append(row["tag"])
                snapshot.state.queue.append(row["path"])
            }
            for row in try Row.fetchAll(db, sql: "SELECT speaker_name, room_name FROM room_name") {
                snapshot.state.roomNames[row["speaker_name"]] = row["room_name"]
            }
            for row in try Row.fetchAll(db, sql: "SELECT name, volume, latency_ns, latency_set_ns FROM room") {
                let name: String = row["name"]
                if let set: Int64 = row["latency_set_ns"] { snapshot.state.latencies[name] = set }
                if let volume: Int = row["volume"] { snapshot.state.volumes[name] = volume }
                if let latency: Int64 = row["latency_ns"] { snapshot.latencies[name] = latency }
            }
            if let group = try String.fetchOne(db, sql: "SELECT value FROM setting WHERE key = 'group'") {
                snapshot.state.group = try JSONDecoder().decode([String].self, from: Data(group.utf8))
            }
            if let modes = try String.fetchOne(db, sql: "SELECT value FROM setting WHERE key = 'play_modes'") {
                snapshot.state.playModes = try JSONDecoder().decode(PlayModes.self, from: Data(modes.utf8))
            }
            if let order = try String.fetchOne(db, sql: "SELECT value FROM setting WHERE key = 'random_order'") {
                snapshot.state.randomOrder = try JSONDecoder().decode([Int].self, from: Data(order.utf8))
            }
            for row in try Row.fetchAll(db, sql: "SELECT name, files, modified_seconds FROM stored_playlist") {
                let name: String = row["name"], files: String = row["files"]
                snapshot.playlists[name] = StoredPlaylistsReport.Playlist(name: name, files: try JSONDecoder().decode([String].self, from: Data(files.utf8)),
                                                                          modifiedSeconds: row["modified_seconds"])
            }
            if let row = try Row.fetchOne(db, sql: "SELECT id, epoch, end_frame FROM stream") {
                let id: Int64 = row["id"]
                let anchors = try Row.fetchAll(db, sql: "SELECT * FROM anchor WHERE stream_id = ? ORDER BY ordinal", arguments: [id]).map { a in
                    TimelineAnchor(timelineFrame: a["timeline_frame"], serverTime: a["server_time"], isPlaying: a["is_playing"])
                }
                let items = try Row.fetchAll(db, sql: "SELECT * FROM timeline_item WHERE stream_id = ? ORDER BY start_frame", arguments: [id]).map { i in
                    TimelineItem(startFrame: i["start_frame"], tag: i["tag"],
                                 itemStartTime: MediaTime(value: i["item_start_value"], timescale: i["item_start_timescale"]),
                                 path: i["path"], title: i["title"], durationSeconds: i["duration_seconds"], artist: i["artist"], album: i["album"])
                }
                snapshot.stream = StoredStream(id: UInt32(truncatingIfNeeded: id), epoch: row["epoch"], endFrame: row["end_frame"],
                                               anchors: anchors, items: items)
            }
            return snapshot
        }
    }

    // MARK: Writing

    /// The queue (with its tags), volumes and group, replacing what was stored.
    func save(_ state: HouseState, tags: [Int]) -> String? {
        attempt("the queue") { db in try Self.writeState(state, tags: tags, in: db) }
    }

    private static func writeState(_ state: HouseState, tags: [Int], in db: Database) throws {
        try db.execute(sql: "DELETE FROM queue_item")
        for (position, (path, tag)) in zip(state.queue, tags).enumerated() {
            try db.execute(sql: "INSERT INTO queue_item (position, tag, path) VALUES (?, ?, ?)", arguments: [position, tag, path])
        }
        try db.execute(sql: "UPDATE room SET volume = NULL, latency_set_ns = NULL")
        for (name, volume) in state.volumes {
            try db.execute(sql: "INSERT INTO room (name, volume) VALUES (?, ?) ON CONFLICT(name) DO UPDATE SET volume = excluded.volume",
                           arguments: [name, volume])
        }
        for (name, latency) in state.latencies {
            try db.execute(sql: "INSERT INTO room (name, latency_set_ns) VALUES (?, ?) ON CONFLICT(name) DO UPDATE SET latency_set_ns = excluded.latency_set_ns",
                           arguments: [name, latency])
        }
        try db.execute(sql: "DELETE FROM room_name")
        for (speaker, room) in state.roomNames {
            try db.execute(sql: "INSERT INTO room_name (speaker_name, room_name) VALUES (?, ?)", arguments: [speaker, room])
        }
        if let group = state.group {
            let json = String(decoding: try JSONEncoder().encode(group), as: UTF8.self)
            try db.execute(sql: "INSERT OR REPLACE INTO setting (key, value) VALUES ('group', ?)", arguments: [json])
        } else {
            try db.execute(sql: "DELETE FROM setting WHERE key = 'group'")
        }
        try db.execute(sql: "INSERT OR REPLACE INTO setting (key, value) VALUES ('play_modes', ?)",
                       arguments: [String(decoding: try JSONEncoder().encode(state.playModes), as: UTF8.self)])
        try db.execute(sql: "INSERT OR REPLACE INTO setting (key, value) VALUES ('random_order', ?)",
                       arguments: [String(decoding: try JSONEncoder().encode(state.randomOrder), as: UTF8.self)])
    }

    /// Stores `playlist`, replacing one of its name.
    func savePlaylist(_ playlist: StoredPlaylistsReport.Playlist) -> String? {
        attempt("playlist \(playlist.name)") { db in
            try db.execute(sql: "INSERT OR REPLACE INTO stored_playlist (name, files, modified_seconds) VALUES (?, ?, ?)",
                           arguments: [playlist.name, String(decoding: try JSONEncoder().encode(playlist.files), as: UTF8.self), playlist.modifiedSeconds])
        }
    }

    func deletePlaylist(named name: String) -> String? {
        attempt("playlist \(name)") { db in try db.execute(sql: "DELETE FROM stored_playlist WHERE name = ?", arguments: [name]) }
    }

    func saveLatency(room: String, nanoseconds: Int64) -> String? {
        attempt("room \(room)'s latency") { db in
            try db.execute(sql: "INSERT INTO room (name, latency_ns) VALUES (?, ?) ON CONFLICT(name) DO UPDATE SET latency_ns = excluded.latency_ns",
                           arguments: [room, nanoseconds])
        }
    }

    /// A new stream replaces the stored one.
    func beginStream(id: UInt32, epoch: Int) -> String? {
        attempt("stream \(id)") { db in
            try Self.deleteStreams(in: db)
            try db.execute(sql: "INSERT INTO stream (id, epoch) VALUES (?, ?)", arguments: [Int64(id), epoch])
        }
    }

    func endStream() -> String? {
        attempt("the end of the stream") { db in try Self.deleteStreams(in: db) }
    }

    private static func deleteStreams(in db: Database) throws {
        try db.execute(sql: "DELETE FROM stream; DELETE FROM anchor; DELETE FROM timeline_item")
    }

    func saveAnchors(_ anchors: [TimelineAnchor], streamID: UInt32) -> String? {
        attempt("stream \(streamID)'s anchors") { db in
            try db.execute(sql: "DELETE FROM anchor WHERE stream_id = ?", arguments: [Int64(streamID)])
            for (ordinal, anchor) in anchors.enumerated() {
                try db.execute(sql: "INSERT INTO anchor (stream_id, ordinal, timeline_frame, server_time, is_playing) VALUES (?, ?, ?, ?, ?)",
                               arguments: [Int64(streamID), ordinal, anchor.timelineFrame, anchor.serverTime, anchor.isPlaying])
            }
        }
    }

    /// An item started at `item.startFrame`: whatever was stored from there on was cut.
    func recordItem(_ item: TimelineItem, streamID: UInt32) -> String? {
        attempt("stream \(streamID)'s item at frame \(item.startFrame)") { db in
            try db.execute(sql: "DELETE FROM timeline_item WHERE stream_id = ? AND start_frame >= ?", arguments: [Int64(streamID), item.startFrame])
            try db.execute(sql: """
                INSERT INTO timeline_item (stream_id, start_frame, tag, item_start_value, item_start_timescale, path, title, duration_seconds,
                                           artist, album)
                VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
                """, arguments: [Int64(streamID), item.startFrame, item.tag, item.itemStartTime.value, item.itemStartTime.timescale,
                                 item.path, item.title, item.durationSeconds, item.artist, item.album])
        }
    }

    /// The stream was cut at `frame`, moving it to `epoch`: items from there on are gone, and
    /// so is its end.
    func recordCut(streamID: UInt32, epoch: Int, frame: Int64) -> String? {
        attempt("stream \(streamID)'s cut at frame \(frame)") { db in
            try db.execute(sql: "DELETE FROM timeline_item WHERE stream_id = ? AND start_frame >= ?", arguments: [Int64(streamID), frame])
            try db.execute(sql: "UPDATE stream SET epoch = ?, end_frame = NULL WHERE id = ?", arguments: [epoch, Int64(streamID)])
        }
    }

    func recordEnd(streamID: UInt32, frame: Int64) -> String? {
        attempt("stream \(streamID)'s end") { db in
            try db.execute(sql: "UPDATE stream SET end_frame = ? WHERE id = ?", arguments: [frame, Int64(streamID)])
        }
    }

    private func attempt(_ what: String, _ write: (Database) throws -> Void) -> String? {
        do {
            try database.write(write)
            return nil
        } catch {
            return "\(path): cannot store \(what) (\(error)); going on without it"
        }
    }
}
