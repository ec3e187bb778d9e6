import Foundation
import NIOCore
import TuttiCore
import TuttiMedia
import TuttiProtocol

/// Everything of the house that changes: its rooms (`RoomRegistry`), its groups
/// (`GroupSession`, one per group), its store, library and observers. Commands are dispatched
/// by domain: a group's transport, queue and status to its `GroupSession`; rooms, groups,
/// playlists and the library here (`HouseCore+Rooms.swift`, `+Groups.swift`, `+Library.swift`).
///
/// Thread-safety: confined to the house's loop; `House` reaches it through a loop-bound box,
/// and every entry from outside asserts the loop.
final class HouseCore {
    let configuration: House.Configuration
    let loop: any EventLoop
    let clock: any HostClock
    let log: @Sendable (String) -> Void
    /// Where the state is kept across restarts (nil without a state directory).
    let store: HouseStore?
    /// Why what changes is not being kept (the last write failed, or the store could not be
    /// opened), for controllers: the status says it. Nil while the store takes writes.
    private(set) var storeProblem: String?
    let rooms: RoomRegistry
    private(set) var groups: [GroupID: GroupSession] = [:]
    /// Where each group's AirPlay receiver listens, as its front end said (`House.setAirPlayAddress`).
    var airPlayAddresses: [GroupID: String] = [:]
    /// The group new rooms join, and that cannot be removed (MPD's "default" partition).
    let defaultGroupID: GroupID = 1
    private var nextGroupID: GroupID = 2
    var nextConnectionIDStorage: UInt32 = 1
    private var nextStreamID: UInt32
    private var nextTag = 0
    /// How many times each room has connected since the house started.
    var connectionCounts: [RoomID: Int] = [:]
    /// The library's loudness of the files queued, by path (nil: not in the library), until the
    /// library changes (`loudness(ofPath:)`).
    var loudnessCache: [String: (track: Loudness?, album: Loudness?)?] = [:]
    /// The loudness of items outside the library, measured as they played (`ReplayGainSettings.measureAsPlayed`).
    var playedLoudness: [String: Loudness] = [:]
    /// Shuffles for `random` and `queue-shuffle`; seeded from the clock, so a simulated house
    /// shuffles the same way from the same seed.
    var randomSource: SplitMix64
    /// Front ends showing the house (`HouseChangeObservers.swift`).
    var changeObservers = ChangeObservers()
    /// The music library, its last scan's progress and its size (`HouseCore+Library.swift`).
    let library: MusicLibrary?
    var libraryScan: LibraryScanner.Progress?
    var libraryWatcher: LibraryWatcher?
    var librarySize = (tracks: 0, unreadable: 0)
    /// The stored playlists, by name.
    var storedPlaylists: [String: StoredPlaylistsReport.Playlist] = [:]
    /// The codes that sign a browser in (`pair-controller`).
    var pairing = ControllerPairing()
    /// The speakers let in, and those waiting (`HouseCore+Admission.swift`).
    var admission: SpeakerAdmission
    /// The admitted speakers' clock-sync sessions, shared with the clock-sync thread.
    let clockSessions: ClockSyncSessions
    /// Knocks logged in the current ten-second window: a stranger's flood of speakers is a few
    /// lines, not one per knock.
    var knocksLogged = (windowStart: Int64.min, count: 0)
    /// Connections rejected for bad input in the current ten-second window.
    private var rejections = (windowStart: Int64.min, logged: 0, suppressed: 0)

    init(configuration: House.Configuration, loop: any EventLoop, clock: any HostClock, log: @escaping @Sendable (String) -> Void,
         library: MusicLibrary?, clockSessions: ClockSyncSessions) {
        self.configuration = configuration
        self.clockSessions = clockSessions
        do { admission = try SpeakerAdmission(path: configuration.admittedSpeakersPath, initial: configuration.admittedSpeakers) } catch {
            // `tutti server` reads the file before it starts and refuses a broken one; here
            // (it broke since) the file is left as it is and admissions last until a restart.
            log("\(error); admitted speakers are kept in memory only")
            admission = .inMemory(initial: configuration.admittedSpeakers)
        }
        self.loop = loop
        self.clock = clock
        self.log = log
        self.library = library
        // Stream ids differ from one run of the house to the next, so a room that kept playing
        // through a restart never resumes its old stream into a new one of the same id. From
        // the clock: deterministic on simulated time.
        nextStreamID = UInt32(truncatingIfNeeded: clock.now() / 1_000_000) | 1
        randomSource = SplitMix64(seed: UInt64(bitPattern: clock.now()))
        store = configuration.stateDirectory.flatMap { Self.openStore(in: $0, busyTimeoutSeconds: configuration.storeBusyTimeoutSeconds, log: log) }
        if let directory = configuration.stateDirectory, store == nil {
            storeProblem = "the store in \(directory) cannot be opened (see the house's log): nothing is kept across a restart"
        }
        var snapshot = HouseStore.Snapshot()
        if let store {
            do { snapshot = try store.load() } catch { log("\(store.path): cannot read the stored state (\(error)); starting empty") }
        }
        rooms = RoomRegistry(records: snapshot.rooms)
        storedPlaylists = snapshot.playlists
        playedLoudness = snapshot.playedLoudness
        nextTag = (snapshot.groups.flatMap(\.tags).max() ?? -1) + 1
        for stored in snapshot.groups {
            groups[stored.id] = GroupSession(core: self, stored: stored)
            nextGroupID = max(nextGroupID, stored.id + 1)
        }
        if groups[defaultGroupID] == nil {
            let group = GroupSession(core: self, stored: HouseStore.StoredGroup(id: defaultGroupID, name: Self.defaultGroupName))
            groups[defaultGroupID] = group
            self.stored(store?.save(group.snapshot))
        }
        // A room of a group that is gone (a store written by hand) plays in the default group.
        for record in rooms.records.values where groups[record.group] == nil {
            rooms.update(record.id) { $0.group = defaultGroupID }
        }
        if let counts = try? library?.counts() { librarySize = counts }
    }

    /// The default group's name, as MPD names its default partition.
    static let defaultGroupName = "default"

    /// Once on the loop, after `init`.
    func started() {
        for group in groups.values where group.playModes.consume { group.watchConsumption() }
    }

    /// Opens the store in `directory`. Only a file that is not a database, or a damaged one, is
    /// moved aside, whole (with its `-wal` and `-shm`, which hold commits not yet in the main
    /// file), named in the log, and a new one started. Any other failure (a lock, a permission,
    /// a full disk) touches nothing: the house runs without a store and says so.
    private static func openStore(in directory: String, busyTimeoutSeconds: Double, log: @Sendable (String) -> Void) -> HouseStore? {
        do {
            let (store, problem) = try HouseStore.open(directory: directory, busyTimeoutSeconds: busyTimeoutSeconds)
            if let problem { log(problem) }
            return store
        } catch {
            let path = directory + "/house.sqlite"
            guard HouseStore.isDamage(error) else {
                log("\(path): cannot open the store (\(error)); left as it is, and nothing will be kept across restarts")
                return nil
            }
            let aside = path + ".damaged-\(Int(Date().timeIntervalSince1970))"
            do {
                for suffix in ["", "-wal", "-shm"] where FileManager.default.fileExists(atPath: path + suffix) {
                    try FileManager.default.moveItem(atPath: path + suffix, toPath: aside + suffix)
                }
            } catch let moving {
                log("\(path): damaged store (\(error)), and it cannot be moved aside (\(moving)); nothing will be kept across restarts")
                return nil
            }
            do {
                let (store, _) = try HouseStore.open(directory: directory, busyTimeoutSeconds: busyTimeoutSeconds)
                log("\(path): damaged store (\(error)); moved to \(aside) (with its -wal and -shm), starting empty")
                return store
            } catch {
                log("\(path): cannot open the store (\(error)); nothing will be kept across restarts")
                return nil
            }
        }
    }

    var now: Int64 { clock.now() }

    func makeTag() -> Int {
        defer { nextTag += 1 }
        return nextTag
    }

    func makeStreamID() -> UInt32 {
        defer { nextStreamID &+= 1 }
        return nextStreamID
    }

    /// Logs a store write that failed.
    /// Notes the outcome of a write to the store. A failure is logged once and kept for the
    /// status (`StatusReport.storeProblem`, which front ends look at on every change and tick).
    /// The first write that works after one failed writes the groups and rooms again: what
    /// failed may have been any of them, and only once they are all in is the state kept.
    func stored(_ problem: String?) {
        if let problem {
            if storeProblem == nil { log(problem) }
            storeProblem = problem
            failedWrites += 1
            return
        }
        // No store at all is not a write that worked again.
        guard storeProblem != nil, let store, !rewritingState else { return }
        rewritingState = true
        defer { rewritingState = false }
        var failure: String?
        for group in groups.values where failure == nil { failure = store.save(group.snapshot) }
        for record in rooms.records.values where failure == nil { failure = store.save(record) }
        if let failure {
            storeProblem = failure
            failedWrites += 1
        } else {
            storeProblem = nil
            log("the store takes writes again: the groups and rooms are written again, and kept from now on")
        }
    }

    /// Set while `stored` writes the state again after a failure.
    private var rewritingState = false
    /// Writes to the store that failed so far: a command during which this grows says so in its
    /// reply (`storeProblem`).
    private var failedWrites = 0

    var defaultGroup: GroupSession { groups[defaultGroupID]! }

    func allocateGroupID() -> GroupID {
        defer { nextGroupID += 1 }
        return nextGroupID
    }

    func addGroup(_ group: GroupSession) { groups[group.id] = group }

    func removeGroup(_ id: GroupID) { groups[id] = nil }

    /// The groups, the default first, then by name.
    var orderedGroups: [GroupSession] {
        groups.values.sorted { ($0.isDefault ? 0 : 1, $0.name) < ($1.isDefault ? 0 : 1, $1.name) }
    }

    /// The group a controller names: by its id (all digits; no name is), else by its name.
    func group(named reference: String) throws(ControlRefusal) -> GroupSession {
        if let group = GroupID(reference).flatMap({ groups[$0] }) ?? groups.values.first(where: { $0.name == reference }) { return group }
        throw ControlRefusal("no such group: \(reference) (groups: \(orderedGroups.map(\.name).joined(separator: ", ")))", kind: .notFound)
    }

    /// The group a room plays in.
    func group(of room: RoomLink) -> GroupSession {
        rooms.records[room.roomID].flatMap { groups[$0.group] } ?? defaultGroup
    }

    func resumeStoredStreams() {
        loop.preconditionInEventLoop()
        for group in orderedGroups { group.resumeStoredStream() }
    }

    func stop() {
        loop.preconditionInEventLoop()
        for group in groups.values {
            group.stopStream()
            group.stopLive()
        }
        libraryWatcher?.stop()
    }

    /// Logs why a connection was closed, at most five lines per ten seconds, then how many more:
    /// a flood of them (a port scan, random bytes from a broken client) does not flood the log.
    func logRejection(_ line: String) {
        loop.preconditionInEventLoop()
        let now = self.now
        if rejections.windowStart == .min || now - rejections.windowStart >= 10_000_000_000 {
            if rejections.suppressed > 0 { log("\(rejections.suppressed) more connections closed for bad input in the last 10 s (not each logged)") }
            rejections = (now, 0, 0)
        }
        rejections.logged += 1
        guard rejections.logged > 5 else { return log(line) }
        rejections.suppressed += 1
        if rejections.suppressed == 1 {
            // The count is told when the window ends, whether or not more come.
            let window = rejections.windowStart
            loop.assumeIsolated().scheduleTask(in: .nanoseconds(window + 10_000_000_000 - now)) { [weak self] in
                guard let self, self.rejections.windowStart == window, self.rejections.suppressed > 0 else { return }
                self.log("\(self.rejections.suppressed) more connections closed for bad input in the last 10 s (not each logged)")
                self.rejections.suppressed = 0
            }
        }
    }

    /// Tells every observer that something may have changed.
    func noteChange() {
        loop.preconditionInEventLoop()
        changeObservers.notify()
    }

    // MARK: Commands

    /// Performs `request`; `respond` is called once, on the loop, at once or when the engine
    /// has applied an edit.
    func control(_ request: ControlRequest, respond answer: @escaping House.Respond) {
        loop.preconditionInEventLoop()
        let command = request.command
        let failedBefore = failedWrites
        let respond: House.Respond = { [self] result in
            // A command that took effect but could not be kept says so, not only the log.
            if case .success(var reply) = result, failedWrites != failedBefore, reply.storeProblem == nil, let storeProblem {
                reply.storeProblem = storeProblem
                answer(.success(reply))
            } else {
                answer(result)
            }
            if case .success = result, !command.onlyReads { noteChange() }
        }
        do {
            if let problem = command.problem { throw ControlRefusal(problem) }
            // Only a command that acts on a group looks its group up: the others ignore it.
            var group = defaultGroup
            if command.actsOnAGroup, let reference = request.group { group = try self.group(named: reference) }
            if case .leave(let reference) = command, request.group == nil, let room = rooms.find(reference), let own = groups[room.group] {
                // Out of its own group, whichever that is.
                group = own
            }
            if let reply = try perform(command, in: group, respond) { respond(.success(reply)) }
        } catch let refusal as ControlRefusal {
            respond(.failure(refusal))
        } catch {
            respond(.failure(ControlRefusal("\(error)")))
        }
    }

    /// Dispatches `command` by domain; returns the reply, or nil when `respond` will be called later.
    private func perform(_ command: ControlCommand, in group: GroupSession, _ respond: @escaping House.Respond) throws -> ControlReply? {
        switch command {
        case .rooms:
            return .rooms(RoomsReport(rooms: roomReports(), waiting: waitingReports()))
        case .admit(let speaker, let code):
            return .rooms(try admit(speaker, code: code))
        case .forget(let speaker):
            return .rooms(try forget(speaker))
        case .pairController:
            // The system's generator: a code must not follow from anything a stranger can see.
            var generator = SystemRandomNumberGenerator()
            let code = pairing.issue(now: now, using: &generator)
            log("pairing code issued for a controller's login page, valid \(ControllerPairing.validityNanoseconds / 60_000_000_000) minutes")
            return .pairing(PairingReport(code: code, validSeconds: Int(ControllerPairing.validityNanoseconds / 1_000_000_000)))
        case .join(let reference):
            let room = try room(named: reference)
            try move(room, to: group, refusingNoChange: true)
            return .room(roomChange(room.id)!)
        case .leave(let reference):
            let room = try room(named: reference)
            guard room.group == group.id else { throw ControlRefusal("room \(room.name) is not in \(group)", kind: .conflict) }
            try move(room, to: ownGroup(for: room), refusingNoChange: false)
            return .room(roomChange(room.id)!)
        case .volume(let reference, let percent):
            let room = try room(named: reference)
            setVolume(of: room.id, to: percent)
            return .room(roomChange(room.id)!)
        case .roomLatency(let reference, let milliseconds):
            return .room(try setLatency(of: room(named: reference), milliseconds: milliseconds))
        case .roomRename(let reference, let name):
            return .room(try rename(room(named: reference), to: name))
        case .roomChannel(let reference, let mode):
            return .room(try setChannel(of: reference, to: mode))
        case .pair(let left, let right, let name):
            return .room(try pair(left: left, right: right, as: name))
        case .unpair(let reference):
            return .rooms(try unpair(reference))
        case .groups:
            return .groups(groupsReport())
        case .groupCreate(let name):
            return .groups(try createGroup(named: name))
        case .groupRename(let name):
            return .groups(try rename(group, to: name))
        case .groupRemove:
            return .groups(try remove(group))
        case .playlists:
            return .playlists(playlistsReport)
        case .playlistRemove(let name):
            return .playlists(try removePlaylist(named: name))
        case .playlistAdd(let name, let files):
            // A stored playlist is played again later: standard input and pipes cannot be.
            if let live = files.first(where: { $0 == "-" || $0.hasPrefix("pipe:") }) {
                throw ControlRefusal("playlist-add: \(live) is read once as it plays, and cannot be stored in a playlist", kind: .unplayable)
            }
            try checkReadable(files)
            return .playlists(savePlaylist(named: name, files: (storedPlaylists[name]?.files ?? []) + files))
        case .librarySearch, .libraryBrowse, .libraryProblems:
            try queryLibrary(command, respond)
            return nil
        case .play(let files, let names?) where !names.isEmpty:
            // Exactly these rooms play: they come into the group, its others leave it. Nothing
            // moves for a play that is refused.
            try checkReadable(files)
            let members = try names.map { try room(named: $0) }
            // A stereo pair named is both its halves.
            for record in rooms.members(of: group.id) where !members.contains(where: { $0.id == record.id || $0.partner == record.id }) {
                try move(record, to: ownGroup(for: record), refusingNoChange: false)
            }
            for record in members where record.group != group.id { try move(record, to: group, refusingNoChange: false) }
            return try group.perform(.play(files: files), respond)
        default:
            return try group.perform(command, respond)
        }
    }

    /// Refuses what the house will not play (`MediaAccess`), and files it cannot open at all
    /// (a damaged file is found while decoding).
    func checkReadable(_ files: [String]) throws {
        let access = MediaAccess(allowedDirectories: configuration.allowedDirectories.map { $0 + configuration.musicDirectories })
        for file in files {
            if let refusal = access.refusal(for: file) { throw refusal }
            guard !file.contains("://") && file != "-" && !file.hasPrefix("pipe:") else { continue }
            var isDirectory: ObjCBool = false
            guard FileManager.default.fileExists(atPath: file, isDirectory: &isDirectory) else { throw ControlRefusal("\(file): no such file", kind: .unplayable) }
            guard !isDirectory.boolValue else { throw ControlRefusal("\(file): is a directory", kind: .unplayable) }
            guard FileManager.default.isReadableFile(atPath: file) else { throw ControlRefusal("\(file): permission denied", kind: .unplayable) }
        }
    }
}
