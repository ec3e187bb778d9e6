import Foundation
import Testing
@testable import TuttiHouseHTTP
import TuttiProtocol

/// The reply schemas of `/openapi.json` against the reports as `ControlJSON` encodes them: every
/// report with every field set conforms and uses every property its schema lists, and with no
/// optional set still conforms. A field added to a report, renamed or retyped fails here.
@Suite struct APISchemaTests {
    static let room: RoomReport = {
        var room = RoomReport(id: 3, name: "kitchen", group: "default", volume: 40, latencyMs: 12.5, state: "playing", bufferSeconds: 290.5,
                              syncErrorMicroseconds: -3.5, clockErrorMicroseconds: 21, underruns: 0, fillRate: 180, playheadSeconds: 12.25,
                              sentSeconds: 300, problem: "none", reconnects: 1)
        room.channel = .mono
        room.pair = StereoPairReport(left: .init(id: 3, name: "kitchen left", connected: true, syncErrorMicroseconds: 2),
                                     right: .init(id: 4, name: "kitchen right", connected: false, syncErrorMicroseconds: -1))
        return room
    }()
    static var full: [(String, ControlReply)] {
        var play = PlayReport(items: 2, rooms: ["kitchen"], startsInMs: 145)
        play.waitedMs = 20
        play.startsAtServerTimeNs = 123_601_789
        play.notReady = [UnreadyRoom(room: "attic", reason: "its clock is still settling")]
        play.roomStarts = [RoomStart(room: "kitchen", mode: .slewing, clockBoundMicroseconds: 320)]
        var status = StatusReport(server: "tutti", state: "playing", roomCount: 1, queueLength: 2, serverTimeNs: 123_456_789, stream: 7,
                                  positionSeconds: 12.5, bufferedAheadSeconds: 287.5, item: 0, title: "A", itemPositionSeconds: 12.5,
                                  itemDurationSeconds: 200.25, rooms: [room])
        status.groupVolume = 40
        status.path = "/m/a.flac"
        status.artist = "B"
        status.album = "C"
        status.library = LibraryStatus(tracks: 9, unreadable: 1, scanning: false, scannedFiles: 10, foundFiles: 10)
        status.playModes = PlayModes(repeat: true, random: false, single: false, consume: true)
        status.replayGain = ReplayGainSettings(mode: .auto, preampDB: 2, missingPreampDB: -3, limit: true)
        status.crossfadeSeconds = 6
        status.nextItem = 1
        status.storeProblem = "house.sqlite: cannot store the queue (database or disk is full); going on without it"
        status.group = "default"
        status.groupId = 1
        let waiting = WaitingSpeakerReport(name: "den", code: "372 737", address: "10.0.0.7", key: "mxFZD9Fi", waitingSeconds: 4.5)
        status.waiting = [waiting]
        var source = LiveSourceReport(kind: "airplay", sender: "10.0.0.9")
        source.senderName = "Phone"
        source.title = "T"
        source.artist = "B"
        source.album = "C"
        source.artworkRevision = 2
        status.source = source
        var group = GroupReport(id: 2, name: "Kitchen", isDefault: false, rooms: ["kitchen"], knownRooms: ["kitchen", "pantry"], state: "playing", queueLength: 2)
        group.stream = 9
        group.title = "A"
        group.positionSeconds = 1.5
        group.volume = 40
        group.airplay = "0.0.0.0:5001"
        group.source = source
        return [
            ("PlayReport", .started(play)),
            ("PauseReport", .paused(PauseReport(pausedAtSeconds: 3.5))),
            ("ResumeReport", .resumed(ResumeReport(resumedAtSeconds: 3.5, startsInMs: 150))),
            ("EditReport", .edited(EditReport(cut: StreamCut(fromSeconds: 12.5, aheadSeconds: 0.4, seamless: false, reason: "late"),
                                              item: 1, stopped: false, queueLength: 3))),
            ("RoomsReport", .rooms(RoomsReport(rooms: [room], waiting: [waiting]))),
            ("RoomChange", .room(RoomChange(id: 3, room: "kitchen", group: "kitchen", volume: 0, latencyMs: 80, channel: .left, pair: room.pair))),
            ("LibraryBrowseReport", .library(LibraryBrowseReport(artists: ["A"], albums: ["B"],
                                                                 tracks: [{ var track = LibraryTrack(path: "/m/a.flac", title: "A", artist: "B", album: "C", durationSeconds: 1, format: "flac 44100 Hz")
                                                                           track.loudnessLUFS = -14
                                                                           track.peak = 0.9
                                                                           track.albumLoudnessLUFS = -13
                                                                           return track }()],
                                                                 problems: [LibraryProblem(path: "/m/x.mp3", reason: "invalid data")]))),
            ("GroupVolumeReport", .group(GroupVolumeReport(percent: 40, rooms: [RoomChange(id: 3, room: "kitchen", group: "default", volume: 40, latencyMs: 0, channel: .right, pair: room.pair)]))),
            ("QueueReport", .queue(QueueReport(items: [{ var entry = QueueEntryReport(index: 0, path: "/m/a.flac", current: true, title: "A", durationSeconds: 200.25)
                                                            entry.id = 7
                                                            return entry }()],
                                               current: 0))),
            ("StatusReport", .status(status)),
            ("PairingReport", .pairing(PairingReport(code: "042917", validSeconds: 300))),
            ("StoredPlaylistsReport", .playlists(StoredPlaylistsReport(playlists: [.init(name: "Party", files: ["/m/a.flac"], modifiedSeconds: 1.7e9)]))),
            ("GroupsReport", .groups(GroupsReport(groups: [group]))),
        ]
    }
    static var bare: [(String, ControlReply)] {
        [
            ("PlayReport", .started(PlayReport(items: 1, rooms: [], startsInMs: 0))),
            ("EditReport", .edited(EditReport(queueLength: 0))),
            ("RoomsReport", .rooms(RoomsReport(rooms: [RoomReport(id: 1, name: "a", group: "default", volume: 100, latencyMs: 0, state: "connecting", sentSeconds: 0)]))),
            ("QueueReport", .queue(QueueReport(items: [QueueEntryReport(index: 0, path: "/m/a.flac", current: false)], current: nil))),
            ("StatusReport", .status(StatusReport(server: "tutti", state: "stopped", roomCount: 0, queueLength: 0, serverTimeNs: 0))),
            ("GroupsReport", .groups(GroupsReport(groups: [GroupReport(id: 1, name: "default", isDefault: true, rooms: [], knownRooms: [],
                                                                       state: "stopped", queueLength: 0)]))),
        ]
    }

    @Test func everyReportConformsAndUsesEveryProperty() throws {
        for (name, reply) in Self.full + Self.bare {
            let json = try JSONSerialization.jsonObject(with: Data(ControlJSON.encode(reply).utf8))
            var unused = Set<String>()
            let problems = SchemaCheck.problems(json, .reference(name), at: name, unusedProperties: &unused)
            #expect(problems.isEmpty, "\(problems)")
        }
        for (name, reply) in Self.full {
            // With the field every reply may carry: the command's failed write to the store.
            var reply = reply
            reply.storeProblem = "house.sqlite: cannot store the queue (database or disk is full); going on without it"
            let json = try JSONSerialization.jsonObject(with: Data(ControlJSON.encode(reply).utf8))
            var unused = Set<String>()
            _ = SchemaCheck.problems(json, .reference(name), at: name, unusedProperties: &unused)
            // A reply's own storeProblem, not the one of a report nested in it (a group volume's
            // rooms are room changes, each of which may be a reply of its own).
            unused = unused.filter { !($0.hasSuffix(".storeProblem") && $0.contains("]")) }
            #expect(unused.isEmpty, "\(name): the schema lists properties the report does not have: \(unused.sorted())")
        }
        // The check itself tells a wrong type, an unknown key and a missing one.
        var scratch = Set<String>()
        #expect(!SchemaCheck.problems(["pausedAtSeconds": "soon"], .reference("PauseReport"), at: "", unusedProperties: &scratch).isEmpty)
        #expect(!SchemaCheck.problems(["pausedAtSeconds": 1, "extra": 1], .reference("PauseReport"), at: "", unusedProperties: &scratch).isEmpty)
        #expect(!SchemaCheck.problems([String: Any](), .reference("PauseReport"), at: "", unusedProperties: &scratch).isEmpty)
        #expect(!SchemaCheck.problems(["id": 1, "room": "a", "group": 1, "volume": 5], .reference("RoomChange"), at: "", unusedProperties: &scratch).isEmpty)
        let refusal = try JSONSerialization.jsonObject(with: Data(ControlJSON.encode(ControlRefusal("no such room: attic", kind: .notFound)).utf8))
        var unused = Set<String>()
        #expect(SchemaCheck.problems(refusal, .reference("Refusal"), at: "Refusal", unusedProperties: &unused).isEmpty)
    }

    /// Every operation's reply schema and refusal schema exist, and the document is JSON.
    @Test func documentIsWhole() throws {
        let document = try #require(try JSONSerialization.jsonObject(with: Data(OpenAPIDocument.json().utf8)) as? [String: Any])
        #expect(document["openapi"] as? String == "3.1.0")
        let paths = try #require(document["paths"] as? [String: [String: Any]])
        // Every operation, the artwork route (the one whose reply is an image) and the login
        // page's three.
        #expect(paths.values.map(\.count).reduce(0, +) == APIOperation.all.count + 1 + 3)
        // Every operation but the login page's needs the token or the session cookie.
        let schemes = try #require((document["components"] as? [String: Any])?["securitySchemes"] as? [String: Any])
        #expect(Set(schemes.keys) == ["bearerToken", "sessionCookie"])
        #expect((document["security"] as? [[String: [String]]])?.count == 2)
        for path in ["/api/login", "/api/logout", "/api/session"] {
            let operation = try #require(paths[path]?.values.first as? [String: Any], "\(path)")
            #expect((operation["security"] as? [Any])?.isEmpty == true, "\(path)")
        }
        let artwork = try #require(paths[ArtworkRoute.path]?["get"] as? [String: Any])
        let artworkResponses = try #require(artwork["responses"] as? [String: Any])
        #expect(Set(artworkResponses.keys) == ["200", "400", "403", "404", "422"])
        for operation in APIOperation.all {
            #expect(APISchemas.components[operation.reply] != nil, "\(operation.path)")
            let described = try #require(paths[operation.path]?[operation.method.rawValue.lowercased()] as? [String: Any], "\(operation.path)")
            let responses = try #require(described["responses"] as? [String: Any])
            #expect(responses["200"] != nil && responses["400"] != nil && responses["401"] != nil)
        }
    }
}

/// Checks a JSON value against a `JSONSchema`, resolving references in `APISchemas.components`.
enum SchemaCheck {
    static func problems(_ value: Any, _ schema: JSONSchema, at path: String, unusedProperties: inout Set<String>) -> [String] {
        switch schema {
        case .reference(let name):
            guard let resolved = APISchemas.components[name] else { return ["\(path): no schema \(name)"] }
            return problems(value, resolved, at: path, unusedProperties: &unusedProperties)
        case .anyOf(let choices):
            var scratch = Set<String>()
            return choices.contains { problems(value, $0, at: path, unusedProperties: &scratch).isEmpty } ? [] : ["\(path): matches no choice"]
        case .string(let values):
            guard let string = value as? String else { return ["\(path): not a string"] }
            return values.map { $0.contains(string) ? [] : ["\(path): \(string) not in \($0)"] } ?? []
        case .integer(let minimum, let maximum):
            guard let number = value as? NSNumber, !isBool(number), number.doubleValue == number.doubleValue.rounded() else { return ["\(path): not an integer"] }
            if let minimum, number.intValue < minimum { return ["\(path): below \(minimum)"] }
            if let maximum, number.intValue > maximum { return ["\(path): above \(maximum)"] }
            return []
        case .number(let minimum, let maximum):
            guard let number = value as? NSNumber, !isBool(number) else { return ["\(path): not a number"] }
            if let minimum, number.doubleValue < minimum { return ["\(path): below \(minimum)"] }
            if let maximum, number.doubleValue > maximum { return ["\(path): above \(maximum)"] }
            return []
        case .boolean:
            guard let number = value as? NSNumber, isBool(number) else { return ["\(path): not a boolean"] }
            return []
        case .array(let element, let minItems):
            guard let array = value as? [Any] else { return ["\(path): not an array"] }
            if let minItems, array.count < minItems { return ["\(path): fewer than \(minItems) items"] }
            return array.enumerated().flatMap { problems($1, element, at: "\(path)[\($0)]", unusedProperties: &unusedProperties) }
        case .object(let properties):
            guard let object = value as? [String: Any] else { return ["\(path): not an object"] }
            var found: [String] = []
            for key in object.keys where !properties.contains(where: { $0.name == key }) { found.append("\(path).\(key): not in the schema") }
            for property in properties {
                if let member = object[property.name] {
                    unusedProperties.remove("\(path).\(property.name)")
                    found += problems(member, property.schema, at: "\(path).\(property.name)", unusedProperties: &unusedProperties)
                } else {
                    if property.required { found.append("\(path).\(property.name): required, missing") }
                    unusedProperties.insert("\(path).\(property.name)")
                }
            }
            return found
        }
    }

    /// JSONSerialization gives booleans as NSNumbers of type "c" (char), numbers as "q" or "d".
    static func isBool(_ number: NSNumber) -> Bool { String(cString: number.objCType) == "c" }
}
