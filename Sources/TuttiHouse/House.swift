import Foundation
import NIOCore
import Synchronization
import TuttiCore
import TuttiMedia
import TuttiProtocol
import TuttiEngine

/// The house: rooms, the queue, the stream that plays it and the timeline every room follows.
///
/// The queue plays through the playback engine `QueuePlayer` uses (`QueueProducer`), writing
/// into a `StreamTimelineOutput` instead of a device's ring: items join gaplessly, broken
/// items are skipped, and queue edits, seeks and skips cut the stream's timeline by the same
/// rule (`QueueEditPlan`); the rooms are told `flush(from:)` for each cut.
///
/// Thread-safety: confined to `loop`; every method must be called on it (the network handlers
/// and the producer hop there). The server runs it on a one-thread event loop group.
public final class House: @unchecked Sendable {
    public struct Configuration: Sendable {
        public var name = "tutti"
        public var stateDirectory: String?
        public var sampleRate = 48000
        public var channelCount = 2
        public var codec: StreamCodec = .flac
        public var chunkFrames = 2048
        /// How far ahead of the playhead audio is produced and sent: enhanced buffering.
        public var bufferDepthNanoseconds: Int64 = 300_000_000_000
        /// How long an anchor (a start, resume or pause) needs to reach every room and be
        /// applied there: the house's store commit, the network, the speaker's loop. Anchors are
        /// scheduled this far ahead *beyond* the group's largest commitment (`House.largestCommitment`:
        /// a room's output lead plus its latency, about 95 ms for a speaker on a virtual or
        /// ALSA card), so `play` with ready rooms is heard about 145 ms after the command. (At
        /// 90 ms in all, less than a room's commitment, rooms on a loaded machine began 5–45 ms
        /// into the track.)
        public var startDelayNanoseconds: Int64 = 50_000_000
        /// Queue edits, seeks and skips cut the stream this far ahead of what is heard, beyond
        /// the group's largest commitment: the house's time to decode, encode and deliver the
        /// audio after the cut, which a busy machine needs (at 150 ms in all a loaded house was
        /// seen to deliver it late, and the room fell silent for 10 ms).
        public var editLeadNanoseconds: Int64 = 160_000_000
        /// A queue edit that cuts the stream at least this far ahead of the playhead is seamless
        /// in every room; closer (down to the start delay) the rooms may have decoded past the
        /// cut, and the reply says so.
        public var flushMarginNanoseconds: Int64 = 500_000_000
        /// A joining room starts this far after the playhead (the data must reach it first).
        public var joinMarginNanoseconds: Int64 = 200_000_000
        /// `play` waits at most this long for its rooms to be ready (`PendingStart`); a room not
        /// ready by then joins in sync later.
        public var startWaitNanoseconds: Int64 = 1_500_000_000
        /// A room is ready to start once it has been sent this much of the stream (and its clock
        /// is settled).
        public var readyAudioNanoseconds: Int64 = 250_000_000
        /// Produce on the house's event loop, a step at a time, instead of on a thread of its own:
        /// for a simulated house, whose production must be a function of the queue and the
        /// playhead, not of thread timing. Steps run every `productionStepNanoseconds` and at
        /// once after an edit.
        public var stepsProductionOnLoop = false
        public var productionStepNanoseconds: Int64 = 100_000_000
        /// Opens queue items that are URLs; nil refuses them, each with a one-line error.
        public var network: (any NetworkInputOpener)?
        /// The directories a controller may play files from (`MediaAccess`), besides the
        /// library's; nil for any readable file (a house in a test, or a simulated one).
        public var allowedDirectories: [String]?
        /// The music library's roots (`tutti server --music`); none, no library.
        public var musicDirectories: [String] = []
        public init() {}
    }

    public let configuration: Configuration
    public let loop: any EventLoop
    let clock: any HostClock
    let log: @Sendable (String) -> Void
    var rooms: [UInt32: RoomLink] = [:]
    private var nextClientID: UInt32 = 1
    var state: HouseState
    /// Tags naming the queue's entries for the engine, parallel to `state.queue`: an edit
    /// moves an item's tag with it, so the engine knows which decoded item is which.
    var queueTags: [Int] = []
    private var nextTag = 0
    var stream: ServerStream?
    private var nextStreamID: UInt32 = 1
    /// Where the state is kept across restarts (nil without a state directory).
    let store: HouseStore?
    /// The stream the house was playing when it stopped, until `resumeStoredStream` takes it.
    private var storedStream: HouseStore.StoredStream?
    /// Item starts of a resumed stream from before the frame it was produced again from: what
    /// is heard until the new production reaches the playhead.
    var restoredItems: [HouseStore.TimelineItem] = []
    /// Every room's amplifier latency as last seen, stored: a restarted house needs its group's
    /// largest before the rooms reconnect.
    var knownLatencies: [String: Int64] = [:]
    /// A `play` waiting for its rooms to be ready.
    var pendingStart: PendingStart?
    /// How many times a room of each name has connected since the house started.
    var connectionCounts: [String: Int] = [:]
    /// The music library, with `musicDirectories` (`HouseLibrary.swift`).
    let library: MusicLibrary?
    /// The last scan's progress, and the library's size after it (on the loop).
    var libraryScan: LibraryScanner.Progress?
    /// Follows the library's directories once its scan has started (`HouseLibrary.swift`).
    var libraryWatcher: LibraryWatcher?
    var librarySize = (tracks: 0, unreadable: 0)
    /// Front ends showing the house (`HouseChangeObservers.swift`).
    var changeObservers = ChangeObservers()
    /// The item `single` plays: the one the stream started with, or heard when it was turned on
    /// (`HousePlayModes.swift`).
    var singleTag: Int?
    /// The look for items to consume, while `consume` is on, and the stream and frame it
    /// looked up to.
    var consumeWatch: RepeatedTask?
    var consumedUntil: (stream: UInt32, frame: Int64)?
    /// Shuffles for `random` and `queue-shuffle`; seeded from the clock, so a simulated house
    /// shuffles the same way from the same seed.
    var randomSource: SplitMix64
    /// The stored playlists, by name (`HouseStoredPlaylists.swift`).
    var storedPlaylists: [String: StoredPlaylistsReport.Playlist] = [:]

    public init(configuration: Configuration, loop: any EventLoop, clock: any HostClock, log: @escaping @Sendable (String) -> Void) {
        self.configuration = configuration
        self.loop = loop
        self.clock = clock
        self.log = log
        // Stream ids differ from one run of the house to the next, so a room that kept playing
        // through a restart never resumes its old stream into a new one of the same id. From
        // the clock: deterministic on simulated time.
        nextStreamID = UInt32(truncatingIfNeeded: clock.now() / 1_000_000) | 1
        randomSource = SplitMix64(seed: UInt64(bitPattern: clock.now()))
        var snapshot = HouseStore.Snapshot()
        store = configuration.stateDirectory.flatMap { Self.openStore(in: $0, log: log) }
        if let store {
            do { snapshot = try store.load() } catch { log("\(store.path): cannot read the stored state (\(error)); starting empty") }
        }
        state = snapshot.state
        queueTags = snapshot.tags.count == state.queue.count ? snapshot.tags : state.queue.indices.map { $0 }
        nextTag = (queueTags.max() ?? -1) + 1
        knownLatencies = snapshot.latencies
        storedPlaylists = snapshot.playlists
        storedStream = snapshot.stream
        if configuration.musicDirectories.isEmpty {
            library = nil
        } else {
            do { library = try MusicLibrary(directory: configuration.stateDirectory) } catch {
                log("cannot open the library in \(configuration.stateDirectory ?? "memory") (\(error)); keeping it in memory")
                library = try? MusicLibrary(directory: nil)
            }
            if let counts = try? library?.counts() { librarySize = counts }
        }
        if state.playModes.consume { loop.execute { [weak self] in self?.watchConsumption() } }
    }

    /// Opens the store in `directory`; one that cannot be opened (not a database) is moved
    /// aside, named in the log, and a new one started.
    private static func openStore(in directory: String, log: @Sendable (String) -> Void) -> HouseStore? {
        do {
            let (store, problem) = try HouseStore.open(directory: directory)
            if let problem { log(problem) }
            return store
        } catch {
            let path = directory + "/house.sqlite"
            let aside = path + ".damaged-\(Int(Date().timeIntervalSince1970))"
            try? FileManager.default.moveItem(atPath: path, toPath: aside)
            for suffix in ["-wal", "-shm"] { try? FileManager.default.removeItem(atPath: path + suffix) }
            do {
                let (store, _) = try HouseStore.open(directory: directory)
                log("\(path): unreadable store (\(error)); moved to \(aside), starting empty")
                return store
            } catch {
                log("\(path): cannot open the store (\(error)); nothing will be kept across restarts")
                return nil
            }
        }
    }

    /// Connections rejected for bad input in the current ten-second window: a flood of them
    /// (a port scan, random bytes from a broken client) logs five lines and then a count.
    private var rejections = (windowStart: Int64.min, logged: 0, suppressed: 0)

    /// Logs why a connection was closed, at most five lines per ten seconds, then how many more.
    func logRejection(_ line: String) {
        loop.preconditionInEventLoop()
        let now = clock.now()
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
            loop.scheduleTask(in: .nanoseconds(window + 10_000_000_000 - now)) { [weak self] in
                guard let self, self.rejections.windowStart == window, self.rejections.suppressed > 0 else { return }
                self.log("\(self.rejections.suppressed) more connections closed for bad input in the last 10 s (not each logged)")
                self.rejections.suppressed = 0
            }
        }
    }

    /// Logs a store write that failed.
    func stored(_ problem: String?) {
        if let problem { log(problem) }
    }

    func makeTag() -> Int {
        defer { nextTag += 1 }
        return nextTag
    }

    var sampleRate: Int { configuration.sampleRate }
    func frames(_ nanoseconds: Int64) -> Int64 { WideMath.multiplyDivide(nanoseconds, Int64(sampleRate), 1_000_000_000) }

    // MARK: Connections

    /// Registers a connection that said hello and returns its id. A speaker is sent nothing
    /// yet: its handler calls `startSending(toRoom:)` once it holds the id, because a flush can
    /// drain the socket at once and report writability before this returns.
    func connect(channel: any Channel, hello: WireMessage.Hello) -> UInt32 {
        loop.preconditionInEventLoop()
        let id = nextClientID
        nextClientID += 1
        guard hello.role == .speaker else { return id }
        let name = state.roomNames[hello.name] ?? hello.name
        if let existing = rooms.values.first(where: { $0.name == name }) {
            // A room that reconnects (or a duplicate name): the newest connection wins.
            log("room \(name) reconnected; closing its previous connection")
            rooms[existing.id] = nil
            existing.channel.close(promise: nil)
        }
        let latency = state.latencies[name] ?? hello.latencyNanoseconds
        // `serve(connection:)` built the pipeline: a connection without the writer is a bug.
        guard let chunkWriter = try? channel.pipeline.syncOperations.handler(type: FramedChunkWriter.self) else {
            preconditionFailure("a house connection's pipeline has no FramedChunkWriter: serve(connection:) builds it")
        }
        let room = RoomLink(id: id, name: name, speakerName: hello.name, latencyNanoseconds: latency, outputLeadNanoseconds: hello.outputLeadNanoseconds,
                            channel: channel, chunkWriter: chunkWriter)
        if knownLatencies[name] != latency {
            knownLatencies[name] = latency
            stored(store?.saveLatency(room: name, nanoseconds: latency))
        }
        room.resume = hello.resume
        rooms[id] = room
        connectionCounts[name, default: 0] += 1
        log("room \(name) connected from \(channel.remoteAddress.map { "\($0)" } ?? "?")" + (name != hello.name ? " (its speaker says \(hello.name))" : ""))
        noteChange()
        return id
    }

    /// Sends a newly connected room its volume and what it is missing of the current stream.
    func startSending(toRoom id: UInt32) {
        loop.preconditionInEventLoop()
        guard let room = rooms[id] else { return }
        if room.name != room.speakerName || state.latencies[room.name] != nil {
            send(.roomSettings(.init(name: room.name, latencyNanoseconds: room.latencyNanoseconds)), to: room)
        }
        if let level = state.volumes[room.name] { send(.volume(.init(level: Self.gain(percent: level), rampNanoseconds: 0)), to: room) }
        if let resume = room.resume, resume.streamID != stream?.id || !inGroup(room) {
            // It holds a stream that has ended or been replaced while it was away, or one its
            // room no longer plays.
            room.resume = nil
            send(.flush(.init(streamID: resume.streamID, fromFrame: .min)), to: room)
        }
        pump(room)
    }

    func disconnect(id: UInt32) {
        loop.preconditionInEventLoop()
        if let room = rooms.removeValue(forKey: id) { log("room \(room.name) disconnected") }
        checkPendingStart()
        noteChange()
    }

    func received(status: WireMessage.SpeakerStatus, from id: UInt32) {
        guard let room = rooms[id] else { return }
        if !status.problem.isEmpty, status.problem != room.status?.problem {
            log("room \(room.name): \(status.problem)")
        }
        room.status = status
        room.statusTime = clock.now()
        // Level-triggered, beside the writability edges: a room behind on a writable
        // connection is sent more whatever edge was missed.
        if room.channel.isWritable { pump(room) }
        checkPendingStart()
        noteChange()
    }

    // MARK: Timeline

    var now: Int64 { clock.now() }

    /// The timeline frame heard now (frozen while paused), if a stream exists.
    func playhead(at time: Int64? = nil) -> Int64 {
        stream?.schedule.heardFrame(atServer: time ?? now) ?? 0
    }

    var isPlaying: Bool { stream?.schedule.anchors.last?.isPlaying ?? false }

    func inGroup(_ room: RoomLink) -> Bool { state.group.map { $0.contains(room.name) } ?? true }
    var groupRooms: [RoomLink] { rooms.values.filter(inGroup).sorted { $0.name < $1.name } }
    /// The longest a room of the group needs between an anchor reaching it and the anchored
    /// frame being heard: its output lead plus its latency (`RoomLink.commitmentNanoseconds`).
    var largestCommitment: Int64 { groupRooms.map(\.commitmentNanoseconds).max() ?? 0 }

    /// When a start, resume or pause anchored now is heard: every room can still honour it.
    var anchorTime: Int64 { now + configuration.startDelayNanoseconds + largestCommitment }

    /// Starts a new stream of the queue from `item` at `offset`, heard after the start delay;
    /// or, not `anchored`, with no anchor yet: rooms get the stream and its audio and play
    /// nothing until `apply` anchors its start (`PendingStart`).
    func startStream(item: Int, offset: MediaTime = .zero, anchored: Bool = true) throws(MediaError) {
        stopStream()
        let id = nextStreamID
        nextStreamID += 1
        let (stream, encoder) = try makeStream(id: id)
        stored(store?.beginStream(id: id, epoch: stream.epoch))
        restoredItems = []
        if anchored {
            let startTime = anchorTime
            stream.schedule.apply(TimelineAnchor(timelineFrame: 0, serverTime: startTime, isPlaying: true), now: now)
            stored(store?.saveAnchors(stream.schedule.anchors, streamID: id))
        }
        startProducing(stream, encoder: encoder, item: item, offset: offset)
    }

    /// A stream with its encoder, whose cuts and end are stored as they happen.
    private func makeStream(id: UInt32) throws(MediaError) -> (ServerStream, ChunkEncoder) {
        let encoder = try ChunkEncoder(codec: configuration.codec, sampleRate: sampleRate, channelCount: configuration.channelCount)
        let stream = ServerStream(id: id, codec: configuration.codec, sampleRate: sampleRate, channelCount: configuration.channelCount,
                                  codecHeader: encoder.codecHeader)
        if let store {
            let log = self.log
            stream.willCut = { epoch, frame in if let problem = store.recordCut(streamID: id, epoch: epoch, frame: frame) { log(problem) } }
            stream.didFinish = { frame in if let problem = store.recordEnd(streamID: id, frame: frame) { log(problem) } }
        }
        return (stream, encoder)
    }

    /// Makes `stream` the one the house plays and starts its production from `item` at
    /// `offset`, at the stream's produced end (0, or where a resumed stream produces again).
    private func startProducing(_ stream: ServerStream, encoder: ChunkEncoder, item: Int, offset: MediaTime) {
        let id = stream.id
        self.stream = stream
        singleTag = queueTags.indices.contains(item) ? queueTags[item] : nil
        publishListening()
        let loop = self.loop
        let output = StreamTimelineOutput(stream: stream, encoder: encoder, chunkFrames: configuration.chunkFrames,
                                          depthFrames: frames(configuration.bufferDepthNanoseconds), clock: clock,
                                          notify: { [weak self] in loop.execute { [weak self] in self?.produced(streamID: id) } })
        var engineConfiguration = QueueProducer.Configuration(outputFormat: AudioFormat(sampleRate: sampleRate, channelCount: configuration.channelCount))
        engineConfiguration.startTag = queueTags.indices.contains(item) ? queueTags[item] : nil
        engineConfiguration.startTime = offset
        engineConfiguration.network = configuration.network
        engineConfiguration.passes = enginePasses
        let engine = QueueProducer(entries: queueEntries, configuration: engineConfiguration, output: output)
        let log = self.log, store = self.store
        let reported = Mutex(Set<String>())
        engine.onItem = { outcome in
            // On the producer thread, before any of the item's audio is encoded: a restarted
            // house must know what every frame its rooms hold is.
            if let info = outcome.info { output.noteSourceBits(info.wireBits, fromFrame: outcome.startFrame) }
            if let store, let info = outcome.info {
                let item = HouseStore.TimelineItem(startFrame: outcome.startFrame, tag: outcome.tag, itemStartTime: outcome.itemStartTime,
                                                   path: outcome.path, title: info.displayTitle, durationSeconds: info.duration?.seconds,
                                                   artist: info.artist, album: info.album)
                if let problem = store.recordItem(item, streamID: id) { log(problem) }
            }
            guard let error = outcome.error else { return }
            if reported.withLock({ $0.insert("\(outcome.tag)/\(outcome.startFrame)/\(error)").inserted }) { log("\(error)") }
        }
        stream.engine = engine
        if configuration.stepsProductionOnLoop {
            produceStep(streamID: id)
        } else {
            engine.start(threadName: "tutti-produce", raisedAfterCuts: true)
        }
        for room in rooms.values { pump(room) }
    }

    /// How long after a restart rooms may take to reconnect: a speaker's reconnection backoff
    /// reaches 2 s, ±20 % (`ReconnectBackoff`).
    static let reconnectAllowanceNanoseconds: Int64 = 2_500_000_000

    /// Takes up the stream the house was playing when it stopped (killed, or restarted), if it
    /// is still heard or paused: the same stream, anchors and timeline, so rooms that played on
    /// from their buffers keep playing without a gap. Production starts again at the first
    /// frame an edit could still change once the rooms have
    /// reconnected (`editLeadNanoseconds`, the group's largest latency and
    /// `reconnectAllowanceNanoseconds` from now), with a cut there that every room is told of when it reconnects; a
    /// room whose buffer ran out meanwhile joins at the playhead, in sync. Call once, on the
    /// loop, before rooms connect.
    public func resumeStoredStream() {
        loop.preconditionInEventLoop()
        guard let previous = storedStream else { return }
        storedStream = nil
        var schedule = TimelineSchedule(sampleRate: sampleRate)
        for anchor in previous.anchors { schedule.apply(anchor, now: now) }
        let head = schedule.heardFrame(atServer: now)
        if let end = previous.endFrame, head >= end {
            stored(store?.endStream())
            return log("the stream playing when the house stopped (\(previous.id)) ended at timeline frame \(end) while it was down")
        }
        guard !schedule.anchors.isEmpty else {
            // It was waiting for its rooms: start it now.
            let first = previous.items.first.flatMap { item in queueTags.firstIndex(of: item.tag) } ?? 0
            log("play was waiting for its rooms when the house stopped; starting it now")
            do { try startStream(item: first) } catch { log("cannot start the queue again: \(error)") }
            return
        }
        let latency = (state.group ?? Array(knownLatencies.keys)).compactMap { knownLatencies[$0] }.max() ?? 0
        // The rooms hear of the cut only when they reconnect, up to their largest backoff
        // later: the cut must lie beyond where they will be by then. (At the edit lead alone, a
        // room that reconnected 0.3 s later on a loaded machine reached the cut before the
        // audio after it.) Rooms hold minutes ahead, so a later cut costs nothing.
        var resumeFrame = schedule.heardFrame(atServer: now + configuration.editLeadNanoseconds + latency + Self.reconnectAllowanceNanoseconds)
        if let end = previous.endFrame { resumeFrame = min(resumeFrame, end) }
        guard let item = previous.items.last(where: { $0.startFrame <= resumeFrame }), let index = queueTags.firstIndex(of: item.tag) else {
            stored(store?.endStream())
            return log("the stream playing when the house stopped (\(previous.id)) cannot be resumed: no stored item plays at timeline frame \(resumeFrame)")
        }
        let offset = item.itemStartTime + MediaTime(frame: resumeFrame - item.startFrame, sampleRate: sampleRate)
        let stream: ServerStream, encoder: ChunkEncoder
        do { (stream, encoder) = try makeStream(id: previous.id) } catch { return log("cannot resume stream \(previous.id): \(error)") }
        stream.schedule = schedule
        stored(store?.saveAnchors(schedule.anchors, streamID: stream.id))
        stored(store?.recordCut(streamID: stream.id, epoch: previous.epoch + 1, frame: resumeFrame))
        stream.resumeProduction(at: resumeFrame, storedEpoch: previous.epoch)
        restoredItems = previous.items.filter { $0.startFrame < resumeFrame }
        let playing = schedule.anchor(atServer: now)?.isPlaying == true ? "heard" : "paused"
        log("resuming stream \(stream.id), \(playing) at timeline frame \(head) (queue item \(index + 1) at \(String(format: "%.3f", offset.seconds)) s from frame \(resumeFrame)); rooms that kept playing go on, the others join in sync")
        startProducing(stream, encoder: encoder, item: index, offset: offset)
    }

    /// One step of stepped production (`Configuration.stepsProductionOnLoop`): produces what the
    /// buffer depth allows and sends it, then steps again later while production goes on.
    private func produceStep(streamID: UInt32) {
        guard let stream, stream.id == streamID, let engine = stream.engine else { return }
        let going = engine.produceAvailable()
        for room in rooms.values { pump(room) }
        checkPendingStart()
        if going {
            loop.scheduleTask(in: .nanoseconds(configuration.productionStepNanoseconds)) { [weak self] in
                self?.produceStep(streamID: streamID)
            }
        }
    }

    /// An edit or a moved playhead may let production go on: wakes the producer thread, or
    /// steps stepped production at once.
    func productionMayProceed() {
        guard let stream, let engine = stream.engine else { return }
        if configuration.stepsProductionOnLoop {
            let id = stream.id
            loop.execute { [weak self] in
                guard let self, self.stream?.id == id, let engine = self.stream?.engine else { return }
                _ = engine.produceAvailable()
                for room in self.rooms.values { self.pump(room) }
                self.checkPendingStart()
            }
        } else {
            engine.output.wake()
        }
    }

    /// Tells the stream's producer what it needs of the timeline: the anchors and the lead an
    /// edit needs to reach every room.
    func publishListening() {
        guard let stream else { return }
        let lead = configuration.editLeadNanoseconds + largestCommitment
        stream.listening.withLock { $0 = ServerStream.Listening(schedule: stream.schedule, editLeadNanoseconds: lead) }
    }

    func stopStream() {
        guard let old = stream else { return }
        old.engine?.stop()
        // Stepped production ends at its next step; take it now.
        if configuration.stepsProductionOnLoop { _ = old.engine?.produceAvailable() }
        stream = nil
        restoredItems = []
        stored(store?.endStream())
        for room in rooms.values where room.streamID == old.id {
            send(.flush(.init(streamID: old.id, fromFrame: .min)), to: room)
            room.streamID = nil
            room.sentUntilFrame = 0
        }
    }

    private func produced(streamID: UInt32) {
        guard let stream, stream.id == streamID else { return }
        for room in rooms.values { pump(room) }
        checkPendingStart()
    }

    /// Sends a room what it is missing of the current stream, as far as its connection takes.
    func pump(_ room: RoomLink) {
        loop.preconditionInEventLoop()
        // The playhead moved: production may go on if it waited at the buffer depth (stepped
        // production steps on its own schedule).
        if !configuration.stepsProductionOnLoop { stream?.engine?.output.wake() }
        publishListening()
        guard let stream, inGroup(room) else { return }
        let channel = room.channel
        if room.streamID != stream.id {
            room.streamID = stream.id
            room.sentEnd = false
            if let resume = room.resume, resume.streamID == stream.id {
                room.resume = nil
                resumeSending(to: room, from: resume, stream)
            } else {
                // A room joining a playing stream starts a little after the playhead.
                let startFrame = isHeard(stream) ? playhead() + frames(configuration.joinMarginNanoseconds) : playhead()
                (room.nextChunk, room.epoch) = stream.joinPoint(at: startFrame)
                room.sentUntilFrame = startFrame
                channel.write(WireMessage.streamStart(.init(streamID: stream.id, codec: stream.codec.wireName, sampleRate: UInt32(stream.sampleRate),
                                                            channelCount: UInt8(stream.channelCount), codecHeader: stream.codecHeader,
                                                            epoch: UInt32(room.epoch))), promise: nil)
                for anchor in stream.schedule.anchors { channel.write(WireMessage.anchor(wire(anchor, stream)), promise: nil) }
            }
        }
        // Queue edits cut the stream: the room drops its audio from each cut before it is sent
        // what follows.
        let (cuts, epoch) = stream.cuts(after: room.epoch)
        for cut in cuts {
            channel.write(WireMessage.flush(.init(streamID: stream.id, fromFrame: cut.frame, epoch: UInt32(cut.epoch))), promise: nil)
            room.nextChunk = min(room.nextChunk, cut.chunkCount)
            room.sentEnd = false
        }
        room.epoch = epoch
        var limit = playhead() + frames(configuration.bufferDepthNanoseconds)
        if stream.schedule.anchors.isEmpty {
            // A start not anchored yet (`PendingStart`): only the first audio, so the anchor that
            // starts it does not queue behind seconds of audio on the way to the room.
            limit = min(limit, frames(configuration.readyAudioNanoseconds))
        }
        while channel.isWritable, let chunk = stream.chunk(at: room.nextChunk, epoch: epoch) {
            if chunk.firstFrame > limit { break }
            room.chunkWriter.write(framed: chunk.wire)
            room.nextChunk += 1
            room.sentUntilFrame = chunk.endFrame
        }
        if !room.sentEnd, let (end, count) = stream.end(epoch: epoch), room.nextChunk >= count {
            channel.write(WireMessage.streamEnd(.init(streamID: stream.id, endFrame: end)), promise: nil)
            room.sentEnd = true
        }
        channel.flush()
    }

    /// A room that reconnected holding audio of the current stream: it keeps what is still
    /// valid and is sent only what follows. Its stream header stays; the anchors are sent again
    /// (applying them twice changes nothing), and the cuts made since the last it saw reach it
    /// as flushes before any audio (`pump`).
    private func resumeSending(to room: RoomLink, from resume: WireMessage.Resume, _ stream: ServerStream) {
        // From the anchor in force: re-applying an older one would briefly leave the room a
        // schedule of that anchor alone.
        let anchors = stream.schedule.anchors
        let inForce = anchors.lastIndex { $0.serverTime <= now } ?? 0
        for anchor in anchors[inForce...] { room.channel.write(WireMessage.anchor(wire(anchor, stream)), promise: nil) }
        let epoch = min(Int(resume.epoch), stream.epoch)
        let firstCut = stream.cuts(after: epoch).cuts.map(\.frame).min() ?? .max
        // What it holds that no cut since has changed, and that was ever sent.
        let valid = resume.held.compactMap { range -> Range<Int64>? in
            let end = min(range.upperBound, firstCut, stream.producedEnd)
            return range.lowerBound < end ? range.lowerBound..<end : nil
        }
        let head = playhead()
        let resumeFrame: Int64
        if let playing = valid.first(where: { $0.contains(head) }) {
            resumeFrame = playing.upperBound
        } else {
            // It no longer holds what is heard now: it joins like a new room.
            resumeFrame = isHeard(stream) ? head + frames(configuration.joinMarginNanoseconds) : head
        }
        room.nextChunk = stream.joinPoint(at: resumeFrame).chunk
        room.epoch = epoch
        room.sentUntilFrame = resumeFrame
        log("room \(room.name) resumes stream \(stream.id): it holds \(valid.map { "\($0.lowerBound)..<\($0.upperBound)" }.joined(separator: ", ")); sending from timeline frame \(resumeFrame)")
    }

    /// Whether the stream's audio is being heard now (a room joining now must start a little
    /// after the playhead), rather than paused or held for its start.
    private func isHeard(_ stream: ServerStream) -> Bool {
        stream.schedule.anchor(atServer: now)?.isPlaying == true
    }

    func wire(_ anchor: TimelineAnchor, _ stream: ServerStream) -> WireMessage.Anchor {
        .init(streamID: stream.id, timelineFrame: anchor.timelineFrame, serverTime: anchor.serverTime, isPlaying: anchor.isPlaying)
    }

    func apply(_ anchor: TimelineAnchor) {
        guard let stream else { return }
        stream.schedule.apply(anchor, now: now)
        // Stored before any room hears of it: a restarted house plays the timeline its rooms play.
        stored(store?.saveAnchors(stream.schedule.anchors, streamID: stream.id))
        publishListening()
        for room in rooms.values where room.streamID == stream.id {
            send(.anchor(wire(anchor, stream)), to: room)
        }
    }

    func send(_ message: WireMessage, to room: RoomLink) {
        room.channel.writeAndFlush(message, promise: nil)
    }

    static func gain(percent: Int) -> Float {
        // 60 dB across the scale, so equal steps sound equal; 0 is silence.
        percent <= 0 ? 0 : Float(pow(10, Double(min(percent, 100) - 100) * 0.6 / 20))
    }

    func saveState() {
        reconcileRandomOrder()
        stored(store?.save(state, tags: queueTags))
    }
}
