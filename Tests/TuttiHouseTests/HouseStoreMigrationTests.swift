import Foundation
import GRDB
import Testing
import TuttiProtocol
@testable import TuttiHouse
import TuttiTestSupport

/// A store written by a house from before groups (schema v4: one queue, rooms by name, the
/// names controllers gave them, play modes in settings, the one group's members) opens as the
/// default group's, with one record per room; a room left out of the old group gets a group of
/// its own, and a renamed room's stale row (under its speaker's name) merges into its record.
@Suite struct HouseStoreMigrationTests {
    @Test func aStoreFromBeforeGroupsBecomesTheDefaultGroups() async throws {
        let directory = try TemporaryDirectory("house-store-v4")
        defer { directory.remove() }
        let state = directory.file("state")
        try FileManager.default.createDirectory(atPath: state, withIntermediateDirectories: true)
        // Exactly what the migrations v1 to v4 made, and rows such a house wrote.
        let old = try DatabaseQueue(path: state + "/house.sqlite")
        try await old.write { db in
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
                ALTER TABLE timeline_item ADD COLUMN artist TEXT; ALTER TABLE timeline_item ADD COLUMN album TEXT;
                ALTER TABLE room ADD COLUMN latency_set_ns INTEGER;
                CREATE TABLE room_name (speaker_name TEXT PRIMARY KEY NOT NULL, room_name TEXT NOT NULL);
                CREATE TABLE stored_playlist (name TEXT PRIMARY KEY NOT NULL, files TEXT NOT NULL, modified_seconds REAL NOT NULL);
                CREATE TABLE grdb_migrations (identifier TEXT NOT NULL PRIMARY KEY);
                INSERT INTO grdb_migrations VALUES ('v1'), ('v2: artist and album for now playing'),
                    ('v3: latencies and names controllers set'), ('v4: stored playlists');
                INSERT INTO queue_item VALUES (0, 5, '/music/x.flac'), (1, 3, '/music/y.flac');
                INSERT INTO room (name, volume, latency_ns, latency_set_ns) VALUES ('kitchen', 40, 30000000, NULL), ('Den', NULL, 0, 80000000),
                    ('study', 70, 5000000, NULL);
                INSERT INTO room_name VALUES ('study', 'Den');
                INSERT INTO setting VALUES ('play_modes', '{"repeat":true,"random":false,"single":false,"consume":false}'), ('random_order', '[]'),
                    ('group', '["kitchen"]');
                INSERT INTO stored_playlist VALUES ('Sunday', '["/music/y.flac"]', 1700000000);
                """)
        }
        try old.close()
        var configuration = House.Configuration()
        configuration.stateDirectory = state
        let harness = HouseHarness(configuration: configuration)
        let opened = try await harness.onLoop { house in
            (house.groups.values.map(\.name), house.defaultGroup.queue, house.defaultGroup.tags, house.defaultGroup.playModes,
             house.rooms.records.values.sorted { $0.id < $1.id }.map { "\($0.speakerName)→\($0.name) \($0.volume) \($0.latencySet ?? -1) \($0.latencyKnown ?? -1) \($0.group)" })
        }
        #expect(harness.logLines.all.isEmpty, "\(harness.logLines.all)")
        #expect(opened.0.sorted() == ["Den", "default"])
        #expect(opened.1 == ["/music/x.flac", "/music/y.flac"] && opened.2 == [5, 3])
        #expect(opened.3 == PlayModes(repeat: true, random: false, single: false, consume: false))
        #expect(opened.4 == ["kitchen→kitchen 40 -1 30000000 1", "study→Den 70 80000000 0 2"], "\(opened.4)")
        #expect(try await harness.control(.playlists).playlists?.playlists.map(\.name) == ["Sunday"])
        // The renamed room's speaker, connecting under its own name, is that room.
        try await harness.connect("study")
        #expect(try await harness.control(.rooms).rooms?.rooms.map { "\($0.name) \($0.group) \($0.latencyMs) \($0.volume)" } == ["Den Den 80.0 70"])
    }
}
