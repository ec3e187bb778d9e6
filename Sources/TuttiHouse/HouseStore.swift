import Foundation
import GRDB
import TuttiCore
import TuttiMedia
import TuttiProtocol

/// What the house keeps across restarts, in SQLite (`<state-dir>/house.sqlite`, through GRDB,
/// in WAL mode): its groups (name, queue with its entries' tags, play modes), one record per
/// room (its name, volume, latencies and group), stored playlists, and each group's stream:
/// its id and epoch, its anchors, and where each item starts on its timeline. Each change is
/// its own transaction, committed before the house acts on it, so a house killed at any instant
/// reopens with a prefix of its changes.
///
/// Write-ahead rules that make a restarted house agree with its rooms:
/// - an anchor is stored before any room is sent it (`GroupSession.apply`);
/// - an item's start is stored, on the producer thread, before any of its audio is encoded;
/// - a cut's epoch is stored before the cut is visible to the rooms' sender
///   (`ServerStream.truncate` calls `recordCut` under its lock).
///
/// The old `house.json` (queue, volumes) is imported once into the default group and the
/// rooms' records, then renamed `house.json.migrated`; a store of one group (before v5) becomes
/// the default group's.
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

    /// What is kept of one group.
    struct StoredGroup: Sendable, Equatable {
        var id: UInt32
        var name: String
        var queue: [String] = []
        var tags: [Int] = []
        var playModes = PlayModes()
        var randomOrder: [Int] = []
        var replayGain = ReplayGainSettings()
        /// Its crossfade in seconds (0: gapless).
        var crossfadeSeconds = 0.0
        /// The stream it was playing (only when read).
        var stream: StoredStream? = nil
    }

    struct Snapshot: Sendable {
        var groups: [StoredGroup] = []
        var rooms: [RoomRecord] = []
        var playlists: [String: StoredPlaylistsReport.Playlist] = [:]
        /// The loudness of items outside the library, measured as they played, by input.
        var playedLoudness: [String: Loudness] = [:]
    }

    /// The most inputs whose played loudness is kept (the oldest measured give way).
    static let playedLoudnessLimit = 10_000

    let path: String
    private let database: DatabaseQueue

    /// Opens (or creates) the store in `directory`, importing an old `house.json` once.
    /// Returns the store and a problem worth a log line (a damaged JSON file), if any.
    static func open(directory: String, busyTimeoutSeconds: Double = 5) throws -> (HouseStore, String?) {
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        try checkHeader(of: directory + "/house.sqlite")
        let store = try HouseStore(path: directory + "/house.sqlite", busyTimeoutSeconds: busyTimeoutSeconds)
        let json = directory + "/house.json"
        guard FileManager.default.fileExists(atPath: json) else { return (store, nil) }
        guard let data = FileManager.default.contents(atPath: json) else { return (store, nil) }
        /// The three things `house.json` knew.
        struct Legacy: Decodable {
            var queue: [String] = []
            var volumes: [String: Int] = [:]
        }
        let legacy: Legacy
        do { legacy = try JSONDecoder().decode(Legacy.self, from: data) } catch {
            return (store, "\(json): unreadable state (\(error.localizedDescription)); not imported")
        }
        try store.database.write { db in
            // Only into an empty store: a store written since wins over a stale file.
            guard try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM group_queue_item") == 0 else { return }
            try Self.write(StoredGroup(id: 1, name: "default", queue: legacy.queue, tags: Array(legacy.queue.indices)), in: db)
            for (index, (name, volume)) in legacy.volumes.sorted(by: { $0.key < $1.key }).enumerated() {
                try Self.write(RoomRecord(id: RoomID(index + 1), speakerName: name, name: name, volume: volume, group: 1), in: db)
            }
        }
        try FileManager.default.moveItem(atPath: json, toPath: json + ".migrated")
        return (store, nil)
    }

    /// Whether an error opening the store says the file is not a database or is damaged, as
    /// opposed to one that leaves it intact (busy, locked, no permission, no space).
    static func isDamage(_ error: any Error) -> Bool {
        if error is NotADatabase { return true }
        guard let error = error as? DatabaseError else { return false }
        return [.SQLITE_NOTADB, .SQLITE_CORRUPT].contains(error.resultCode)
    }

    /// A store file that does not start as SQLite's files do.
    struct NotADatabase: Error, CustomStringConvertible {
        var description: String { "not an SQLite database (its header is not SQLite's)" }
    }

    /// A stored value this version cannot read.
    struct StoreError: Error, CustomStringConvertible {
        var description: String
        init(_ description: String) { self.description = description }
    }

    /// Throws `NotADatabase` for a file that is not SQLite's, before SQLite opens it: SQLite,
    /// failing to open it, deletes its `-wal` on close, and those may be the last commits.
    private static func checkHeader(of path: String) throws {
        guard let file = FileHandle(forReadingAtPath: path) else { return }
        defer { try? file.close() }
        let header = (try? file.read(upToCount: 16)) ?? Data()
        // An empty file is an empty database to SQLite.
        guard !header.isEmpty else { return }
        guard header == Data("SQLite format 3\u{0}".utf8) else { throw NotADatabase() }
    }

    init(path: String, busyTimeoutSeconds: Double = 5) throws {
        self.path = path
        var configuration = Configuration()
        configuration.journalMode = .wal
        configuration.busyMode = .timeout(busyTimeoutSeconds)
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
        migrator.registerMigration("v5: groups, and one record per room") { db in
            try db.execute(sql: """
                CREATE TABLE house_group (id INTEGER PRIMARY KEY NOT NULL, name TEXT NOT NULL UNIQUE, play_modes TEXT NOT NULL,
                                          random_order TEXT NOT NULL);
                CREATE TABLE group_queue_item (group_id INTEGER NOT NULL, position INTEGER NOT NULL, tag INTEGER NOT NULL, path TEXT NOT NULL,
                                               PRIMARY KEY (group_id, position));
                CREATE TABLE room_record (id INTEGER PRIMARY KEY NOT NULL, speaker_name TEXT NOT NULL UNIQUE, name TEXT NOT NULL,
                                          volume INTEGER NOT NULL, latency_set_ns INTEGER, latency_known_ns INTEGER, group_id INTEGER NOT NULL);
                ALTER TABLE stream ADD COLUMN group_id INTEGER NOT NULL DEFAULT 1;
                """)
            // The one group there was becomes the default group; each room, a record in it.
            let setting = { (key: String) in try String.fetchOne(db, sql: "SELECT value FROM setting WHERE key = ?", arguments: [key]) }
            try db.execute(sql: "INSERT INTO house_group (id, name, play_modes, random_order) VALUES (1, 'default', ?, ?)",
                           arguments: [try setting("play_modes") ?? String(decoding: try JSONEncoder().encode(PlayModes()), as: UTF8.self),
                                       try setting("random_order") ?? "[]"])
            try db.execute(sql: "INSERT INTO group_queue_item (group_id, position, tag, path) SELECT 1, position, tag, path FROM queue_item")
            // One record per speaker. A renamed room can have two rows: one under its speaker's
            // name, written before the rename (stale), and one under its new name, written since;
            // the newer row's values win, the stale one's fill what it lacks.
            var renamedTo: [String: String] = [:]
            for row in try Row.fetchAll(db, sql: "SELECT speaker_name, room_name FROM room_name") { renamedTo[row["speaker_name"]] = row["room_name"] }
            let speakerOf = Dictionary(renamedTo.map { ($0.value, $0.key) }, uniquingKeysWith: { first, _ in first })
            struct Old { var volume: Int?; var known: Int64?; var set: Int64? }
            var rows: [String: Old] = [:]
            for row in try Row.fetchAll(db, sql: "SELECT name, volume, latency_ns, latency_set_ns FROM room") {
                rows[row["name"]] = Old(volume: row["volume"], known: row["latency_ns"], set: row["latency_set_ns"])
            }
            let speakers = Set(rows.keys.map { speakerOf[$0] ?? $0 }).union(renamedTo.keys).sorted()
            // Rooms left out of the one group (the old `group` setting) played nothing: each goes
            // to a group of its own, named after it.
            let members = try setting("group").map { try JSONDecoder().decode([String].self, from: Data($0.utf8)) }
            var groupNames: Set<String> = ["default"]
            for (index, speaker) in speakers.enumerated() {
                let name = renamedTo[speaker] ?? speaker
                let current = rows[name], stale = name == speaker ? nil : rows[speaker]
                var group: Int64 = 1
                if let members, !members.contains(name) {
                    var groupName = name, suffix = 2
                    while groupNames.contains(groupName) {
                        groupName = "\(name) \(suffix)"
                        suffix += 1
                    }
                    groupNames.insert(groupName)
                    group = Int64(groupNames.count)
                    try db.execute(sql: "INSERT INTO house_group (id, name, play_modes, random_order) VALUES (?, ?, ?, '[]')",
                                   arguments: [group, groupName, String(decoding: try JSONEncoder().encode(PlayModes()), as: UTF8.self)])
                }
                try db.execute(sql: """
                    INSERT INTO room_record (id, speaker_name, name, volume, latency_set_ns, latency_known_ns, group_id) VALUES (?, ?, ?, ?, ?, ?, ?)
                    """, arguments: [index + 1, speaker, name, current?.volume ?? stale?.volume ?? 100, current?.set ?? stale?.set,
                                     current?.known ?? stale?.known, group])
            }
            try db.execute(sql: """
                DROP TABLE queue_item; DROP TABLE room; DROP TABLE room_name;
                DELETE FROM setting WHERE key IN ('group', 'play_modes', 'random_order');
                """)
        }
        migrator.registerMigration("v6: channel modes and stereo pairs") { db in
            try db.execute(sql: """
                ALTER TABLE room_record ADD COLUMN channel TEXT NOT NULL DEFAULT 'stereo';
                ALTER TABLE room_record ADD COLUMN partner_id INTEGER;
                ALTER TABLE room_record ADD COLUMN pair_name TEXT;
                """)
        }
        migrator.registerMigration("v7: replay gain") { db in
            try db.execute(sql: "ALTER TABLE house_group ADD COLUMN replay_gain TEXT")
        }
        migrator.registerMigration("v8: crossfade") { db in
            try db.execute(sql: "ALTER TABLE house_group ADD COLUMN crossfade REAL NOT NULL DEFAULT 0")
        }
        migrator.registerMigration("v9: loudness of items outside the library, measured as they played") { db in
            try db.execute(sql: """
                CREATE TABLE played_loudness (input TEXT PRIMARY KEY NOT NULL, lufs REAL NOT NULL, peak REAL NOT NULL,
                                              measured_seconds REAL NOT NULL)
                """)
        }
        return migrator
    }

    // MARK: Reading

    func load() throws -> Snapshot {
        try database.read { db in
            var snapshot = Snapshot()
            let decoder = JSONDecoder()
            for row in try Row.fetchAll(db, sql: "SELECT id, name, play_modes, random_order, replay_gain, crossfade FROM house_group ORDER BY id") {
                let id: Int64 = row["id"]
                var group = StoredGroup(id: UInt32(truncatingIfNeeded: id), name: row["name"])
                group.crossfadeSeconds = row["crossfade"]
                if let replayGain: String = row["replay_gain"] {
                    group.replayGain = try decoder.decode(ReplayGainSettings.self, from: Data(replayGain.utf8))
                }
                group.playModes = try decoder.decode(PlayModes.self, from: Data((row["play_modes"] as String).utf8))
                group.randomOrder = try decoder.decode([Int].self, from: Data((row["random_order"] as String).utf8))
                for item in try Row.fetchAll(db, sql: "SELECT tag, path FROM group_queue_item WHERE group_id = ? ORDER BY position", arguments: [id]) {
                    group.tags.append(item["tag"])
                    group.queue.append(item["path"])
                }
                group.stream = try Self.stream(ofGroup: id, in: db)
                snapshot.groups.append(group)
            }
            for row in try Row.fetchAll(db, sql: "SELECT * FROM room_record ORDER BY id") {
                let id: Int64 = row["id"], group: Int64 = row["group_id"], partner: Int64? = row["partner_id"], channel: String = row["channel"]
                var record = RoomRecord(id: RoomID(truncatingIfNeeded: id), speakerName: row["speaker_name"], name: row["name"],
                                        volume: row["volume"], latencySet: row["latency_set_ns"], latencyKnown: row["latency_known_ns"],
                                        group: GroupID(truncatingIfNeeded: group))
                guard let mode = ChannelMode(rawValue: channel) else {
                    throw StoreError("room \(record.name): unknown channel mode \(channel.debugDescription)")
                }
                record.channel = mode
                record.partner = partner.map { RoomID(truncatingIfNeeded: $0) }
                record.pairName = row["pair_name"]
                snapshot.rooms.append(record)
            }
            for row in try Row.fetchAll(db, sql: "SELECT input, lufs, peak FROM played_loudness") {
                snapshot.playedLoudness[row["input"]] = Loudness(integratedLUFS: row["lufs"], peak: row["peak"])
            }
            for row in try Row.fetchAll(db, sql: "SELECT name, files, modified_seconds FROM stored_playlist") {
                let name: String = row["name"], files: String = row["files"]
                snapshot.playlists[name] = StoredPlaylistsReport.Playlist(name: name, files: try decoder.decode([String].self, from: Data(files.utf8)),
                                                                          modifiedSeconds: row["modified_seconds"])
            }
            return snapshot
        }
    }

    private static func stream(ofGroup group: Int64, in db: Database) throws -> StoredStream? {
        guard let row = try Row.fetchOne(db, sql: "SELECT id, epoch, end_frame FROM stream WHERE group_id = ?", arguments: [group]) else { return nil }
        let id: Int64 = row["id"]
        let anchors = try Row.fetchAll(db, sql: "SELECT * FROM anchor WHERE stream_id = ? ORDER BY ordinal", arguments: [id]).map { a in
            TimelineAnchor(timelineFrame: a["timeline_frame"], serverTime: a["server_time"], isPlaying: a["is_playing"])
        }
        let items = try Row.fetchAll(db, sql: "SELECT * FROM timeline_item WHERE stream_id = ? ORDER BY start_frame", arguments: [id]).map { i in
            TimelineItem(startFrame: i["start_frame"], tag: i["tag"],
                         itemStartTime: MediaTime(value: i["item_start_value"], timescale: i["item_start_timescale"]),
                         path: i["path"], title: i["title"], durationSeconds: i["duration_seconds"], artist: i["artist"], album: i["album"])
        }
        return StoredStream(id: UInt32(truncatingIfNeeded: id), epoch: row["epoch"], endFrame: row["end_frame"], anchors: anchors, items: items)
    }

    // MARK: Writing

    /// A group: its name, queue (with its tags) and play modes, replacing what was stored of it.
    func save(_ group: StoredGroup) -> String? {
        attempt("\(group.name)'s queue") { db in try Self.write(group, in: db) }
    }

    private static func write(_ group: StoredGroup, in db: Database) throws {
        let encoder = JSONEncoder()
        try db.execute(sql: """
            INSERT INTO house_group (id, name, play_modes, random_order, replay_gain, crossfade) VALUES (?, ?, ?, ?, ?, ?)
            ON CONFLICT(id) DO UPDATE SET name = excluded.name, play_modes = excluded.play_modes, random_order = excluded.random_order,
                replay_gain = excluded.replay_gain, crossfade = excluded.crossfade
            """, arguments: [Int64(group.id), group.name, String(decoding: try encoder.encode(group.playModes), as: UTF8.self),
                             String(decoding: try encoder.encode(group.randomOrder), as: UTF8.self),
                             String(decoding: try encoder.encode(group.replayGain), as: UTF8.self), group.crossfadeSeconds])
        try db.execute(sql: "DELETE FROM group_queue_item WHERE group_id = ?", arguments: [Int64(group.id)])
        for (position, (path, tag)) in zip(group.queue, group.tags).enumerated() {
            try db.execute(sql: "INSERT INTO group_queue_item (group_id, position, tag, path) VALUES (?, ?, ?, ?)",
                           arguments: [Int64(group.id), position, tag, path])
        }
    }

    /// A group removed: its queue and stream go with it.
    func deleteGroup(_ id: UInt32) -> String? {
        attempt("the removal of group \(id)") { db in
            try Self.deleteStream(ofGroup: id, in: db)
            try db.execute(sql: "DELETE FROM group_queue_item WHERE group_id = ?; DELETE FROM house_group WHERE id = ?",
                           arguments: [Int64(id), Int64(id)])
        }
    }

    /// A room's record, replacing what was stored of it.
    func save(_ room: RoomRecord) -> String? {
        attempt("room \(room.name)") { db in try Self.write(room, in: db) }
    }

    private static func write(_ room: RoomRecord, in db: Database) throws {
        try db.execute(sql: """
            INSERT OR REPLACE INTO room_record (id, speaker_name, name, volume, latency_set_ns, latency_known_ns, group_id, channel, partner_id, pair_name)
            VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
            """, arguments: [Int64(room.id), room.speakerName, room.name, room.volume, room.latencySet, room.latencyKnown, Int64(room.group),
                             room.channel.rawValue, room.partner.map { Int64($0) }, room.pairName])
    }

    /// Stores `playlist`, replacing one of its name.
    func savePlaylist(_ playlist: StoredPlaylistsReport.Playlist) -> String? {
        attempt("playlist \(playlist.name)") { db in
            try db.execute(sql: "INSERT OR REPLACE INTO stored_playlist (name, files, modified_seconds) VALUES (?, ?, ?)",
                           arguments: [playlist.name, String(decoding: try JSONEncoder().encode(playlist.files), as: UTF8.self), playlist.modifiedSeconds])
        }
    }

    /// The loudness of an item outside the library, measured as it played.
    func savePlayedLoudness(_ loudness: Loudness, ofInput input: String, at seconds: Double) -> String? {
        attempt("the loudness of \(input)") { db in
            try db.execute(sql: "INSERT OR REPLACE INTO played_loudness (input, lufs, peak, measured_seconds) VALUES (?, ?, ?, ?)",
                           arguments: [input, loudness.integratedLUFS, loudness.peak, seconds])
            try db.execute(sql: """
                DELETE FROM played_loudness WHERE input NOT IN
                    (SELECT input FROM played_loudness ORDER BY measured_seconds DESC LIMIT ?)
                """, arguments: [Self.playedLoudnessLimit])
        }
    }

    func deletePlaylist(named name: String) -> String? {
        attempt("playlist \(name)") { db in try db.execute(sql: "DELETE FROM stored_playlist WHERE name = ?", arguments: [name]) }
    }

    /// A group's new stream replaces the one stored for it.
    func beginStream(id: UInt32, group: UInt32, epoch: Int) -> String? {
        attempt("stream \(id)") { db in
            try Self.deleteStream(ofGroup: group, in: db)
            try db.execute(sql: "INSERT INTO stream (id, epoch, group_id) VALUES (?, ?, ?)", arguments: [Int64(id), epoch, Int64(group)])
        }
    }

    func endStream(group: UInt32) -> String? {
        attempt("the end of a stream") { db in try Self.deleteStream(ofGroup: group, in: db) }
    }

    private static func deleteStream(ofGroup group: UInt32, in db: Database) throws {
        for id in try Int64.fetchAll(db, sql: "SELECT id FROM stream WHERE group_id = ?", arguments: [Int64(group)]) {
            try db.execute(sql: "DELETE FROM anchor WHERE stream_id = ?; DELETE FROM timeline_item WHERE stream_id = ?; DELETE FROM stream WHERE id = ?",
                           arguments: [id, id, id])
        }
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

    /// Caps the database at `pages` pages on the house's connection (at least what it holds):
    /// a write that needs more fails as on a full disk (SQLITE_FULL). For tests.
    func limitPages(to pages: Int) throws {
        try database.writeWithoutTransaction { try $0.execute(sql: "PRAGMA max_page_count = \(pages)") }
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
