import Foundation
import NIOCore
import Synchronization
import TuttiCore
import TuttiEngine
import TuttiMedia
import TuttiProtocol

/// A group's identity: the same across renames and restarts.
typealias GroupID = UInt32

/// One group of the house: its rooms play its queue, on its stream and timeline, and nothing
/// done to it reaches another group.
///
/// The queue plays through the playback engine `QueuePlayer` uses (`QueueProducer`), writing
/// into a `StreamTimelineOutput` instead of a device's ring: items join gaplessly, broken items
/// are skipped, and queue edits, seeks and skips cut the stream's timeline by the same rule
/// (`QueueEditPlan`); the group's rooms are told `flush(from:)` for each cut. Its rooms are
/// whichever the house's registry places in it (`RoomRecord.group`), and they may change while
/// it plays: a room that joins starts a little after the playhead, in sync; one that leaves is
/// told to flush the stream.
///
/// Thread-safety: confined to the house's loop (`HouseCore`), as every method asserts where
/// it is entered from outside.
final class GroupSession {
    /// The house this group is part of; weak, as the house owns its groups. A closure already
    /// on its way when the house went (an engine's answer to an edit, which holds the group; a
    /// scheduled step) runs its body through `whileAttached`, which does nothing then: a CI run
    /// crashed reading an `unowned` house there.
    private weak var house: HouseCore?

    var core: HouseCore {
        guard let house else { preconditionFailure("\(name) used after its house was gone: an entry point is not wrapped in whileAttached") }
        return house
    }

    /// Runs `body` if the house is still there, holding it until `body` returns; returns nil,
    /// running nothing, if it is gone. A check alone is not enough: the last reference to a
    /// house may be dropped on another thread (a test's, or an owner's deinit) while the entry
    /// point runs on the loop, and a later read of `core` would then find it gone (CI crashed
    /// so, between `produced`'s check and its `checkPendingStart`).
    @discardableResult
    func whileAttached<T>(_ body: () throws -> T) rethrows -> T? {
        guard let house else { return nil }
        return try withExtendedLifetime(house) { try body() }
    }
    let id: GroupID
    var name: String
    /// The queue: paths, and the tags that name its entries for the engine (parallel: an edit
    /// moves an entry's tag with it, so the engine knows which decoded item is which).
    var queue: [String]
    var tags: [Int]
    var playModes: PlayModes
    /// How it evens out its items' loudness (`GroupSession+ReplayGain`).
    var replayGain: ReplayGainSettings
    /// How long consecutive items crossfade, in seconds (0: gapless; `GroupSession+Crossfade`).
    var crossfadeSeconds: Double
    /// With `random`: the queue's tags in the order they play.
    var randomOrder: [Int]
    var stream: ServerStream?
    /// The stream the group was playing when the house stopped, until `resumeStoredStream` takes it.
    var storedStream: HouseStore.StoredStream?
    /// Item starts of a resumed stream from before the frame it was produced again from: what
    /// is heard until the new production reaches the playhead.
    var restoredItems: [HouseStore.TimelineItem] = []
    /// A `play` waiting for the group's rooms to be ready.
    var pendingStart: PendingStart?
    /// The item `single` plays: the one the stream started with, or heard when it was turned on.
    var singleTag: Int?
    /// The look for items to consume, while `consume` is on, and the stream and frame it
    /// looked up to.
    var consumeWatch: RepeatedTask?
    var consumedUntil: (stream: UInt32, frame: Int64)?
    /// The live source the group plays in place of its queue (`GroupSession+Live`), and its
    /// stream, which outlives it while what it sent plays out; where the queue comes back to;
    /// and the task that brings it back once the end is heard.
    var live: LiveSession?
    var liveStream: ServerStream?
    var queueBeforeLive: QueueReturn?
    var liveRestore: Scheduled<Void>?

    init(core: HouseCore, stored: HouseStore.StoredGroup) {
        house = core
        id = stored.id
        name = stored.name
        queue = stored.queue
        tags = stored.tags.count == stored.queue.count ? stored.tags : stored.queue.indices.map { _ in core.makeTag() }
        playModes = stored.playModes
        replayGain = stored.replayGain
        crossfadeSeconds = stored.crossfadeSeconds
        randomOrder = stored.randomOrder
        storedStream = stored.stream
    }

    var configuration: House.Configuration { core.configuration }
    var loop: any EventLoop { core.loop }
    var now: Int64 { core.now }
    var store: HouseStore? { core.store }
    func log(_ line: String) { core.log(line) }
    func stored(_ problem: String?) { core.stored(problem) }
    var sampleRate: Int { configuration.sampleRate }
    func frames(_ nanoseconds: Int64) -> Int64 { WideMath.multiplyDivide(nanoseconds, Int64(sampleRate), 1_000_000_000) }
    func seconds(_ frame: Int64) -> Double { Double(frame) / Double(sampleRate) }

    var isDefault: Bool { id == core.defaultGroupID }

    /// Its connected rooms, by name.
    var rooms: [RoomLink] { core.rooms.connected(in: id) }

    /// Its connected rooms as controllers see them: a stereo pair once, by its left half (its
    /// right, while the left is away).
    var shownRooms: [RoomLink] {
        var seen = Set<RoomID>()
        return rooms.filter { link in seen.insert(core.rooms.records[link.roomID].map(core.rooms.shown)?.id ?? link.roomID).inserted }
    }

    /// The names controllers know its connected rooms by, sorted.
    var shownRoomNames: [String] {
        shownRooms.map { core.rooms.records[$0.roomID].map(core.rooms.shown)?.shownName ?? $0.name }.sorted()
    }

    /// What the store keeps of the group (its stream apart).
    var snapshot: HouseStore.StoredGroup {
        HouseStore.StoredGroup(id: id, name: name, queue: queue, tags: tags, playModes: playModes, randomOrder: randomOrder, replayGain: replayGain,
                               crossfadeSeconds: crossfadeSeconds)
    }

    func save() {
        reconcileRandomOrder()
        stored(store?.save(snapshot))
    }

    // MARK: Timeline

    /// The timeline frame heard now (frozen while paused), if a stream exists.
    func playhead(at time: Int64? = nil) -> Int64 {
        stream?.schedule.heardFrame(atServer: time ?? now) ?? 0
    }

    var isPlaying: Bool { stream?.schedule.anchors.last?.isPlaying ?? false }

    /// The longest a room of the group needs between an anchor reaching it and the anchored
    /// frame being heard: its output lead plus its latency (`RoomLink.commitmentNanoseconds`).
    var largestCommitment: Int64 { rooms.map(\.commitmentNanoseconds).max() ?? 0 }

    /// When a start, resume or pause anchored now is heard: every room can still honour it.
    var anchorTime: Int64 { now + configuration.startDelayNanoseconds + largestCommitment }

    /// Starts a new stream of the queue from `item` at `offset`, heard after the start delay;
    /// or, not `anchored`, with no anchor yet: rooms get the stream and its audio and play
    /// nothing until `apply` anchors its start (`PendingStart`).
    func startStream(item: Int, offset: MediaTime = .zero, anchored: Bool = true) throws(MediaError) {
        stopStream()
        let id = core.makeStreamID()
        let (stream, encoder) = try makeStream(id: id)
        stored(store?.beginStream(id: id, group: self.id, epoch: stream.epoch))
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
            let log = core.log
            stream.willCut = { epoch, frame in if let problem = store.recordCut(streamID: id, epoch: epoch, frame: frame) { log(problem) } }
            stream.didFinish = { frame in if let problem = store.recordEnd(streamID: id, frame: frame) { log(problem) } }
        }
        return (stream, encoder)
    }

    /// Makes `stream` the one the group plays and starts its production from `item` at
    /// `offset`, at the stream's produced end (0, or where a resumed stream produces again).
    private func startProducing(_ stream: ServerStream, encoder: ChunkEncoder, item: Int, offset: MediaTime) {
        let streamID = stream.id
        self.stream = stream
        singleTag = tags.indices.contains(item) ? tags[item] : nil
        publishListening()
        let loop = self.loop, group = LoopBoundWeak(self, loop: loop)
        let output = StreamTimelineOutput(stream: stream, encoder: encoder, chunkFrames: configuration.chunkFrames,
                                          depthFrames: frames(configuration.bufferDepthNanoseconds), clock: core.clock,
                                          notify: { loop.execute { group.object?.produced(streamID: streamID) } })
        var engineConfiguration = QueueProducer.Configuration(outputFormat: AudioFormat(sampleRate: sampleRate, channelCount: configuration.channelCount))
        engineConfiguration.startTag = tags.indices.contains(item) ? tags[item] : nil
        engineConfiguration.startTime = offset
        engineConfiguration.network = configuration.network
        engineConfiguration.passes = enginePasses
        engineConfiguration.crossfade = crossfade
        let engine = QueueProducer(entries: queueEntries, configuration: engineConfiguration, output: output)
        let log = core.log, store = self.store
        let reported = Mutex(Set<String>())
        engine.onItem = { outcome in
            if outcome.measuredLoudness != nil { loop.execute { group.object?.measuredAsPlayed(outcome) } }
            // On the producer thread, before any of the item's audio is encoded: a restarted
            // house must know what every frame its rooms hold is.
            if let info = outcome.info { output.noteSourceBits(info.wireBits, fromFrame: outcome.startFrame) }
            if let store, let info = outcome.info {
                let item = HouseStore.TimelineItem(startFrame: outcome.startFrame, tag: outcome.tag, itemStartTime: outcome.itemStartTime,
                                                   path: outcome.path, title: info.displayTitle, durationSeconds: info.duration?.seconds,
                                                   artist: info.artist, album: info.album)
                if let problem = store.recordItem(item, streamID: streamID) { log(problem) }
            }
            guard let error = outcome.error else { return }
            if reported.withLock({ $0.insert("\(outcome.tag)/\(outcome.startFrame)/\(error)").inserted }) { log("\(error)") }
        }
        stream.engine = engine
        if configuration.stepsProductionOnLoop {
            produceStep(streamID: streamID)
        } else {
            engine.start(threadName: "tutti-produce", raisedAfterCuts: true)
        }
        pumpAll()
    }

    /// Takes up the stream the group was playing when the house stopped (killed, or
    /// restarted), if it is still heard or paused: the same stream, anchors and timeline, so
    /// rooms that played on from their buffers keep playing without a gap. Production starts
    /// again at the first frame an edit could still change once the rooms have reconnected
    /// (`editLeadNanoseconds`, the group's largest latency and
    /// `House.reconnectAllowanceNanoseconds` from now), with a cut there that every room is told
    /// of when it reconnects; a room whose buffer ran out meanwhile joins at the playhead, in
    /// sync. Call once, on the loop, before rooms connect.
    func resumeStoredStream() {
        loop.preconditionInEventLoop()
        guard let previous = storedStream else { return }
        storedStream = nil
        var schedule = TimelineSchedule(sampleRate: sampleRate)
        for anchor in previous.anchors { schedule.apply(anchor, now: now) }
        let head = schedule.heardFrame(atServer: now)
        if let end = previous.endFrame, head >= end {
            stored(store?.endStream(group: id))
            return log("\(self): the stream playing when the house stopped (\(previous.id)) ended at timeline frame \(end) while it was down")
        }
        guard !schedule.anchors.isEmpty else {
            // It was waiting for its rooms: start it now.
            let first = previous.items.first.flatMap { item in tags.firstIndex(of: item.tag) } ?? 0
            log("\(self): play was waiting for its rooms when the house stopped; starting it now")
            do { try startStream(item: first) } catch { log("\(self): cannot start the queue again: \(error)") }
            return
        }
        let latency = core.rooms.members(of: id).compactMap(\.latencyKnown).max() ?? 0
        // The rooms hear of the cut only when they reconnect, up to their largest backoff
        // later: the cut must lie beyond where they will be by then. (At the edit lead alone, a
        // room that reconnected 0.3 s later on a loaded machine reached the cut before the
        // audio after it.) Rooms hold minutes ahead, so a later cut costs nothing.
        var resumeFrame = schedule.heardFrame(atServer: now + configuration.editLeadNanoseconds + latency + House.reconnectAllowanceNanoseconds)
        if let end = previous.endFrame { resumeFrame = min(resumeFrame, end) }
        guard let item = previous.items.last(where: { $0.startFrame <= resumeFrame }), let index = tags.firstIndex(of: item.tag) else {
            stored(store?.endStream(group: id))
            return log("\(self): the stream playing when the house stopped (\(previous.id)) cannot be resumed: no stored item plays at timeline frame \(resumeFrame)")
        }
        let offset = item.itemStartTime + MediaTime(frame: resumeFrame - item.startFrame, sampleRate: sampleRate)
        let stream: ServerStream, encoder: ChunkEncoder
        do { (stream, encoder) = try makeStream(id: previous.id) } catch { return log("\(self): cannot resume stream \(previous.id): \(error)") }
        stream.schedule = schedule
        stored(store?.saveAnchors(schedule.anchors, streamID: stream.id))
        stored(store?.recordCut(streamID: stream.id, epoch: previous.epoch + 1, frame: resumeFrame))
        stream.resumeProduction(at: resumeFrame, storedEpoch: previous.epoch)
        restoredItems = previous.items.filter { $0.startFrame < resumeFrame }
        let playing = schedule.anchor(atServer: now)?.isPlaying == true ? "heard" : "paused"
        log("\(self): resuming stream \(stream.id), \(playing) at timeline frame \(head) (queue item \(index + 1) at \(String(format: "%.3f", offset.seconds)) s from frame \(resumeFrame)); rooms that kept playing go on, the others join in sync")
        startProducing(stream, encoder: encoder, item: index, offset: offset)
    }

    /// One step of stepped production (`Configuration.stepsProductionOnLoop`): produces what the
    /// buffer depth allows and sends it, then steps again later while production goes on.
    private func produceStep(streamID: UInt32) {
        whileAttached {
            guard let stream, stream.id == streamID, let engine = stream.engine else { return }
            let going = engine.produceAvailable()
            pumpAll()
            checkPendingStart()
            if going {
                loop.assumeIsolated().scheduleTask(in: .nanoseconds(configuration.productionStepNanoseconds)) { [weak self] in
                    self?.produceStep(streamID: streamID)
                }
            }
        }
    }

    /// An edit or a moved playhead may let production go on: wakes the producer thread, or
    /// steps stepped production at once.
    func productionMayProceed() {
        guard let stream, let engine = stream.engine else { return }
        if configuration.stepsProductionOnLoop {
            let streamID = stream.id
            loop.assumeIsolated().execute { [weak self] in
                self?.whileAttached {
                    guard let self, self.stream?.id == streamID, let engine = self.stream?.engine else { return }
                    _ = engine.produceAvailable()
                    self.pumpAll()
                    self.checkPendingStart()
                }
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
        stored(store?.endStream(group: id))
        for room in rooms where room.sender.streamID == old.id { flush(room, streamID: old.id) }
    }

    /// Tells `room` to drop all of stream `streamID`, and forgets how far it was sent it.
    func flush(_ room: RoomLink, streamID: UInt32) {
        room.send(.flush(.init(streamID: streamID, fromFrame: .min)))
        room.sender.reset()
    }

    private func produced(streamID: UInt32) {
        whileAttached {
            guard let stream, stream.id == streamID else { return }
            pumpAll()
            checkPendingStart()
        }
    }

    func pumpAll() {
        for room in rooms { pump(room) }
    }

    // MARK: Anchors

    func wire(_ anchor: TimelineAnchor, _ stream: ServerStream) -> WireMessage.Anchor {
        .init(streamID: stream.id, timelineFrame: anchor.timelineFrame, serverTime: anchor.serverTime, isPlaying: anchor.isPlaying)
    }

    func apply(_ anchor: TimelineAnchor) {
        guard let stream else { return }
        stream.schedule.apply(anchor, now: now)
        // Stored before any room hears of it: a restarted house plays the timeline its rooms
        // play. A live stream is not stored: a house restarted under it cannot take it up.
        if stream !== liveStream { stored(store?.saveAnchors(stream.schedule.anchors, streamID: stream.id)) }
        publishListening()
        for room in rooms where room.sender.streamID == stream.id {
            room.send(.anchor(wire(anchor, stream)))
        }
    }
}

extension GroupSession: CustomStringConvertible {
    /// "group NAME", for log lines.
    var description: String { "group \(name)" }
}
