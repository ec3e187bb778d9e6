import Testing
@testable import TuttiProtocol

/// The control messages' one JSON round trip: every command and every reply reads back as
/// itself, and malformed requests get one line naming the command and the field.
@Suite struct ControlJSONTests {
    static let commands: [ControlCommand] = [
        .play(files: ["/m/a.flac", "http://h/b.mp3"], rooms: ["kitchen", "office"]), .play(files: ["/m/a.flac"]),
        .pause, .resume, .seek(seconds: 42.5), .next, .rooms, .join(room: "attic"), .leave(room: "attic"),
        .volume(room: "kitchen", percent: 40), .queue, .queueAdd(file: "/m/c.ogg", at: 1), .queueAdd(file: "/m/d.ogg"),
        .queueRemove(index: 3), .queueMove(from: 4, to: 1), .status, .previous, .groupVolume(percent: 30), .queueClear,
        .roomLatency(room: "living room", milliseconds: 82.5), .queuePlay(index: 2), .stop, .roomRename(room: "kitchen", to: "Küche links"),
        .roomChannel(room: "bathroom", channel: .mono), .pair(left: "kitchen left", right: "kitchen right", name: "Küche"), .unpair(room: "Küche"),
        .replayGain(mode: .album, preampDB: 3, missingPreampDB: -6, limit: false), .replayGain(mode: .off), .crossfade(seconds: 4.5),
        .librarySearch(query: "help beatles", limit: 20), .librarySearch(query: "x"), .libraryBrowse(), .libraryBrowse(artist: "A"),
        .libraryBrowse(artist: "A", album: "B"), .libraryProblems, .queueShuffle, .playModes(repeat: true), .playModes(random: false, consume: true),
        .playModes(repeat: false, random: true, single: true, consume: false), .playlists, .playlistSave(name: "Party mix"),
        .playlistLoad(name: "Party mix"), .playlistRemove(name: "Ärger"), .groups, .groupCreate(name: "Kök"), .groupRename(to: "Upstairs"),
        .groupRemove, .playlistAdd(name: "Party mix", files: ["/m/a.flac", "http://radio.example/stream"]), .pairController,
        .admit(speaker: "kitchen"), .forget(speaker: "372 737"),
    ]

    @Test func everyCommandReadsBackAsItself() throws {
        for command in Self.commands {
            let json = ControlJSON.encode(command)
            #expect(try ControlJSON.decodeCommand(json) == command, "\(json)")
            #expect(json.contains(#""command":"\#(command.name)""#))
        }
        #expect(Set(Self.commands.map(\.name)) == Set(ControlCommand.names))
    }

    /// A request names the group it acts on beside its command's own fields, and reads back.
    @Test func aRequestCarriesItsGroup() throws {
        for request in [ControlRequest(.pause, group: "Kitchen"), ControlRequest(.join(room: "attic"), group: "2"), ControlRequest(.status)] {
            let json = ControlJSON.encode(request)
            #expect(try ControlJSON.decodeRequest(json) == request, "\(json)")
        }
        #expect(ControlJSON.encode(ControlRequest(.seek(seconds: 3), group: "Radio")) == #"{"command":"seek","group":"Radio","seconds":3}"#)
        #expect(try ControlJSON.decodeCommand(#"{"command":"pause","group":"x"}"#) == .pause)
        #expect(throws: ControlRefusal.self) { try ControlJSON.decodeRequest(#"{"command":"pause","group":7}"#) }
    }

    @Test func everyReplyReadsBackAsItself() throws {
        let room = RoomReport(id: 3, name: "kitchen", group: "default", volume: 40, latencyMs: 12, state: "playing", bufferSeconds: 181.5,
                              syncErrorMicroseconds: -3.5, clockErrorMicroseconds: 8, underruns: 0, fillRate: 210,
                              playheadSeconds: 12.25, sentSeconds: 193.75)
        let cut = StreamCut(fromSeconds: 4, aheadSeconds: 0.2, seamless: false, reason: "the change takes effect 0.20 s ahead")
        let replies: [(ControlCommand, ControlReply)] = [
            (.play(files: ["a"]), .started(PlayReport(items: 1, rooms: ["kitchen"], startsInMs: 120))),
            (.pause, .paused(PauseReport(pausedAtSeconds: 3.5))),
            (.pairController, .pairing(PairingReport(code: "042917", validSeconds: 300))),
            (.admit(speaker: "372737"), .rooms(RoomsReport(rooms: [room], waiting: [WaitingSpeakerReport(name: "den", code: "111 222", address: "10.0.0.9",
                                                                                                        key: "mxFZD9Fi", waitingSeconds: 3.5)]))),
            (.librarySearch(query: "a"), .library(LibraryBrowseReport(tracks: [LibraryTrack(path: "/m/a.flac", title: "A", artist: "B", album: "C",
                                                                                          durationSeconds: 3.5, format: "flac 44100 Hz")]))),
            (.libraryProblems, .library(LibraryBrowseReport(problems: [LibraryProblem(path: "/m/x.mp3", reason: "invalid data")]))),
            (.groupVolume(percent: 30), .group(GroupVolumeReport(percent: 30, rooms: [RoomChange(id: 3, room: "kitchen", group: "default", volume: 20)]))),
            (.resume, .resumed(ResumeReport(resumedAtSeconds: 3.5, startsInMs: 150))),
            (.seek(seconds: 4), .edited(EditReport(cut: cut, item: 0, queueLength: 2))),
            (.next, .edited(EditReport(stopped: true, queueLength: 2))),
            (.playlistSave(name: "p"), .playlists(StoredPlaylistsReport(playlists: [.init(name: "p", files: ["/m/a.flac"], modifiedSeconds: 1.7e9)]))),
            (.queueRemove(index: 0), .edited(EditReport(queueLength: 1))),
            (.rooms, .rooms(RoomsReport(rooms: [room, RoomReport(id: 4, name: "attic", group: "attic", volume: 100, latencyMs: 0,
                                                                  state: "connecting", sentSeconds: 0)]))),
            (.volume(room: "kitchen", percent: 40), .room(RoomChange(id: 3, room: "kitchen", group: "default", volume: 40))),
            (.queue, .queue(QueueReport(items: [QueueEntryReport(index: 0, path: "/m/a.flac", current: true, title: "A", durationSeconds: 3)],
                                        current: 0))),
            (.groups, .groups(GroupsReport(groups: [GroupReport(id: 1, name: "default", isDefault: true, rooms: ["kitchen"], knownRooms: ["kitchen", "hall"],
                                                                state: "playing", queueLength: 3)]))),
            (.status, .status(StatusReport(server: "house", state: "playing", roomCount: 1, queueLength: 1, serverTimeNs: 123_456_789,
                                           stream: 7, positionSeconds: 1.5, item: 0, title: "A", rooms: [room]))),
        ]
        for (command, reply) in replies {
            #expect(try ControlJSON.decodeReply(ControlJSON.encode(reply), to: command) == reply)
        }
        let refusal = ControlRefusal("nothing is playing")
        #expect(ControlJSON.decodeRefusal(ControlJSON.encode(refusal)) == refusal)
    }

    @Test(arguments: [
        ("not json", #"request is not a JSON object with a "command""#),
        (#"{"files":["a"]}"#, #"request is not a JSON object with a "command""#),
        (#"{"command":"dance"}"#, "unknown command \"dance\" (known: play, pause"),
        // A next line (U+0085), a line separator and a quote in the name: escaped, one line.
        ("{\"command\":\"ra\u{85}io\u{2028}\\\"x\"}", #"unknown command "ra\u{85}io\u{2028}\"x" (known: play"#),
        (#"{"command":"play"}"#, #"play: missing "files""#),
        (#"{"command":"play","files":"a.flac"}"#, #"play: "files" must be a list"#),
        (#"{"command":"seek","seconds":"soon"}"#, #"seek: "seconds" must be a number"#),
        (#"{"command":"volume","room":"kitchen"}"#, #"volume: missing "percent""#),
        (#"{"command":"queue-move","from":1,"to":null}"#, #"queue-move: "to" must be a whole number, not null"#),
    ])
    func malformedRequestsAreNamedInOneLine(request: String, reason: String) {
        #expect(throws: ControlRefusal.self) { try ControlJSON.decodeCommand(request) }
        do {
            _ = try ControlJSON.decodeCommand(request)
        } catch {
            #expect(error.error.hasPrefix(reason), "\(request) → \(error.error)")
            #expect(!error.error.contains { $0.isNewline })
        }
    }

    /// Values that no house state could make sense of are refused before the house looks.
    @Test func nonsensicalValuesAreProblems() {
        #expect(ControlCommand.play(files: []).problem == "play needs at least one file")
        #expect(ControlCommand.seek(seconds: -1).problem != nil)
        #expect(ControlCommand.seek(seconds: .infinity).problem != nil)
        #expect(ControlCommand.volume(room: "a", percent: 101).problem != nil)
        #expect(ControlCommand.crossfade(seconds: -1).problem == "crossfade needs seconds from 0 to 30")
        #expect(ControlCommand.crossfade(seconds: .nan).problem != nil && ControlCommand.crossfade(seconds: 30).problem == nil)
        #expect(ControlCommand.queueAdd(file: "a", at: -1).problem != nil)
        #expect(ControlCommand.volume(room: "a", percent: 100).problem == nil)
        #expect(ControlCommand.playModes().problem == "play-modes needs at least one of repeat, random, single and consume")
        #expect(ControlCommand.playlistSave(name: "a/b").problem == "playlist-save: a playlist name cannot contain a slash or a line break: \"a/b\"")
        #expect(ControlCommand.playlistLoad(name: "").problem != nil)
        #expect(ControlCommand.playlistSave(name: "Sunday morning").problem == nil)
    }
}
