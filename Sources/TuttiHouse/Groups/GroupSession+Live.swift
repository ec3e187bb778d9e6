import NIOCore
import TuttiCore
import TuttiMedia
import TuttiProtocol

/// A live source the group plays in place of its queue (`LiveInput`: an AirPlay sender).
final class LiveSession {
    let key: LiveStreamKey
    let info: LiveSourceInfo
    let stream: ServerStream
    let writer: LiveStreamWriter
    var title: String?
    var artist: String?
    var album: String?
    /// Where the source said it was (`LiveInput.progress`) and when it said it (house clock).
    var progress: (position: Double, duration: Double, at: Int64)?
    /// The cover it sent, and how many it has sent (the web UI asks for a new one by it).
    var artwork: (bytes: [UInt8], type: String)?
    var artworkRevision = 0
    /// The source ended, or a controller took the group back: what was sent plays out (or stops
    /// on a shared frame), its later calls are dropped, and the reports still name it until the
    /// group lets go of it.
    var ended = false
    /// When the current section's first audio arrived (house clock): a source that gives no
    /// schedule (a sender with no timing port) is played on arrival after `unscheduledWait`.
    var sectionArrival: Int64?

    init(key: LiveStreamKey, info: LiveSourceInfo, stream: ServerStream, writer: LiveStreamWriter) {
        self.key = key
        self.info = info
        self.stream = stream
        self.writer = writer
    }

    /// "airplay from ADDRESS (NAME)", for log lines and refusals.
    var source: String { "\(info.kind) from \(info.sender)\(info.senderName.map { " (\($0))" } ?? "")" }
}

/// Where the queue was when a live source took the group, to come back to, paused: the item by
/// its tag, so that queue edits made meanwhile move it with them.
struct QueueReturn {
    var tag: Int
    var offset: MediaTime
}

/// A live source in a group: its own stream on the group's timeline, written on the loop as
/// the source's frames arrive and anchored at the house times the source asks for. The queue
/// stops where it was and comes back, paused, when the source ends.
///
/// The live stream is not kept in the house's store, nor is the queue's place while it plays:
/// a house killed while a sender plays comes back with the group stopped (its queue kept), and
/// the sender's next stream plays again.
extension GroupSession {
    /// A live stream begins: the queue stops (its place kept), and the rooms are given the
    /// source's stream; they hear it once its schedule is known.
    func beginLive(_ info: LiveSourceInfo, key: LiveStreamKey) {
        loop.preconditionInEventLoop()
        // Everything the source needs is made before the queue is touched: a source that cannot
        // be played leaves the group as it was.
        let stream: ServerStream, writer: LiveStreamWriter
        do {
            guard (1...configuration.channelCount).contains(info.channelCount) else {
                throw MediaError(.unsupported, input: "\(info.kind) from \(info.sender)",
                                 reason: "\(info.channelCount) channels (the house streams \(configuration.channelCount))")
            }
            let encoder = try ChunkEncoder(codec: configuration.codec, sampleRate: sampleRate, channelCount: configuration.channelCount)
            stream = ServerStream(id: core.makeStreamID(), codec: configuration.codec, sampleRate: sampleRate, channelCount: configuration.channelCount,
                                  codecHeader: encoder.codecHeader)
            let output = StreamTimelineOutput(stream: stream, encoder: encoder, chunkFrames: configuration.chunkFrames,
                                              depthFrames: frames(configuration.bufferDepthNanoseconds), clock: core.clock, notify: {})
            writer = try LiveStreamWriter(output: output, sourceRate: info.sampleRate, rate: sampleRate, channelCount: configuration.channelCount)
        } catch {
            return log("\(self): \(info.kind) from \(info.sender) cannot be played: \(error); the group plays on as it was")
        }
        cancelPendingStart(because: "superseded: \(info.kind) from \(info.sender) took \(self) before the play started")
        if let previous = live, !previous.ended { log("\(self): \(previous.source) is replaced by \(info.kind) from \(info.sender)") }
        liveRestore?.cancel()
        liveRestore = nil
        if liveStream == nil {
            // A queue that was playing or paused comes back there; a stopped one, or one that
            // had played to its end, stays stopped. (A source that replaces another keeps the
            // first one's place.)
            queueBeforeLive = nil
            if self.stream != nil, state != "stopped", let item = currentItem, item.index >= 0 {
                let offset = item.start.itemStartTime + MediaTime(frame: playhead() - item.start.startFrame, sampleRate: sampleRate)
                queueBeforeLive = QueueReturn(tag: tags[item.index], offset: offset)
            } else if self.stream != nil, state != "stopped", !queue.isEmpty {
                queueBeforeLive = QueueReturn(tag: tags[firstItemInPlayOrder], offset: .zero)
            }
        }
        stopStream()
        let session = LiveSession(key: key, info: info, stream: stream, writer: writer)
        live = session
        liveStream = stream
        self.stream = stream
        publishListening()
        log("\(self): plays \(session.source)\(queueBeforeLive != nil ? "; its queue waits, paused, until it ends" : "")")
        pumpAll()
        core.noteChange()
    }

    /// How long a section's audio waits for a schedule before it is played on arrival (with
    /// the source's latency unknown, at the earliest the rooms can make).
    static let unscheduledWaitNanoseconds: Int64 = 2_000_000_000

    /// The live session that still takes the source's calls.
    private var takingLive: LiveSession? { live.flatMap { $0.ended ? nil : $0 } }

    func liveAudio(_ samples: [Float], frames: Int, sourceFrame: Int64) {
        guard let live = takingLive else { return }
        // A mono source is heard in every channel.
        let samples = live.info.channelCount == configuration.channelCount ? samples
            : samples.flatMap { sample in repeatElement(sample, count: configuration.channelCount) }
        if live.writer.write(samples, frames: frames, sourceFrame: sourceFrame) == .restart {
            // A jump the source did not announce with a flush (a stall its resends could not
            // cover): the rooms stop at the edit horizon, and the audio after the jump is heard
            // when the source's schedule, which still holds, says.
            log("\(self): \(live.source) jumped to frame \(sourceFrame); the rooms go on from there at its time")
            cutLive(live, keepingSchedule: true)
            _ = live.writer.write(samples, frames: frames, sourceFrame: sourceFrame)
        }
        if live.sectionArrival == nil { live.sectionArrival = now }
        anchorLiveIfReady(live)
        pumpAll()
    }

    func liveSchedule(sourceFrame: Int64, hostTime: Int64) {
        guard let live = takingLive else { return }
        live.writer.noteSchedule(sourceFrame: sourceFrame, hostTime: hostTime)
        anchorLiveIfReady(live)
    }

    /// Anchors the section once its first frame and a schedule are known: at the time the
    /// source asked for, or, when that is too soon for the rooms, at the first frame they can
    /// still make (its start is then not heard; the rest keeps the source's timing).
    private func anchorLiveIfReady(_ live: LiveSession) {
        let writer = live.writer
        guard writer.startTime == nil, writer.firstSourceFrame != nil else { return }
        let earliest = anchorTime
        guard let start = writer.scheduledStartTime else {
            // No schedule yet. A sender with no timing port never gives one: after a while its
            // audio plays on arrival, untimed, rather than never.
            guard let arrival = live.sectionArrival, now - arrival >= Self.unscheduledWaitNanoseconds else { return }
            writer.startTime = earliest
            apply(TimelineAnchor(timelineFrame: writer.sectionStart, serverTime: earliest, isPlaying: true))
            log("\(self): \(live.source) gave no schedule in \(Self.unscheduledWaitNanoseconds / 1_000_000_000) s; its audio plays as it arrives, not at the time it meant")
            return core.noteChange()
        }
        writer.startTime = start
        if start >= earliest {
            apply(TimelineAnchor(timelineFrame: writer.sectionStart, serverTime: start, isPlaying: true))
        } else {
            let late = earliest - start
            apply(TimelineAnchor(timelineFrame: writer.sectionStart + frames(late), serverTime: start + late, isPlaying: true))
            log("\(self): \(live.source) asked for its audio \(late / 1_000_000) ms sooner than the rooms can play it; that much of its start is not heard")
        }
        core.noteChange()
    }

    /// The source's volume is the group's (stored, as any group volume: the rooms keep it).
    func liveVolume(_ percent: Int) {
        guard takingLive != nil else { return }
        // A group with no room connected has no volume to set: nothing is lost.
        do { _ = try perform(.groupVolume(percent: percent), { _ in }) } catch {}
    }

    func liveMetadata(title: String?, artist: String?, album: String?) {
        guard let live = takingLive else { return }
        if let title { live.title = title }
        if let artist { live.artist = artist }
        if let album { live.album = album }
        core.noteChange()
    }

    func liveProgress(position: Double, duration: Double) {
        guard let live = takingLive else { return }
        live.progress = (position, duration, core.now)
        core.noteChange()
    }

    func liveArtwork(_ bytes: [UInt8], type: String) {
        guard let live = takingLive else { return }
        live.artwork = bytes.isEmpty ? nil : (bytes, type)
        live.artworkRevision += 1
        core.noteChange()
    }

    /// Where the live source is in what it plays now, in seconds, and its length: what it last
    /// said, moved on by the time since while the group plays.
    var liveProgressReport: (position: Double, duration: Double)? {
        guard let live, liveStream != nil, let progress = live.progress else { return nil }
        let elapsed = state == "playing" ? Double(max(0, core.now - progress.at)) / 1e9 : 0
        return (min(progress.duration, progress.position + elapsed), progress.duration)
    }

    /// The source dropped what it sent (a pause or seek on the sender): the rooms stop at the
    /// edit horizon, and what follows is heard when its schedule says.
    func liveFlushed() {
        guard let live = takingLive else { return }
        cutLive(live)
        pumpAll()
        core.noteChange()
    }

    /// Stops the rooms at the first frame every room can still stop on, drops what was written
    /// after it, and starts a new section there.
    private func cutLive(_ live: LiveSession, keepingSchedule: Bool = false) {
        let writer = live.writer
        let time = now + configuration.editLeadNanoseconds + largestCommitment
        let anchored = !live.stream.schedule.anchors.isEmpty
        let frame = anchored ? max(writer.sectionStart, live.stream.schedule.heardFrame(atServer: time)) : writer.sectionStart
        if anchored { apply(TimelineAnchor(timelineFrame: frame, serverTime: time, isPlaying: false)) }
        if writer.writtenFrames > frame {
            _ = writer.output.truncate(from: frame)
        } else {
            writer.pad(to: frame)
        }
        live.sectionArrival = nil
        do { try writer.startSection(at: frame, keepingSchedule: keepingSchedule) } catch {
            // The converter was made for this source's rate once already.
            preconditionFailure("\(self): the live stream's converter cannot be made again: \(error)")
        }
    }

    /// The source ended: what it sent plays out, then the queue comes back, paused.
    func liveEnded(_ reason: String) {
        guard let live = takingLive else { return }
        live.ended = true
        live.writer.finishSection()
        live.writer.output.queueRanOut()
        pumpAll()
        let heardAt = heardTime(ofEnd: live)
        log("\(self): \(live.source) ended (\(reason)); \(heardAt > now ? "what it sent plays out, then " : "")the queue is back, paused")
        restoreAfterLive(at: heardAt, streamID: live.stream.id, restoringQueue: true)
        core.noteChange()
    }

    /// When the rooms stop hearing the live stream: its end, heard at the anchor in force, or
    /// the time of an anchor still ahead (a pause after a flush just before the end).
    private func heardTime(ofEnd live: LiveSession) -> Int64 {
        let end = live.stream.endFrame ?? live.writer.writtenFrames
        var heardAt = now
        for anchor in live.stream.schedule.anchors where anchor.serverTime > heardAt { heardAt = anchor.serverTime }
        if let anchor = live.stream.schedule.anchors.last, anchor.isPlaying, end > anchor.timelineFrame {
            heardAt = max(heardAt, anchor.serverTime + WideMath.multiplyDivide(end - anchor.timelineFrame, 1_000_000_000, Int64(sampleRate)))
        }
        return heardAt
    }

    /// Lets go of the live stream 100 ms after `time` (when every room has stopped, on the same
    /// frame), bringing the queue back if `restoringQueue`.
    private func restoreAfterLive(at time: Int64, streamID: UInt32, restoringQueue: Bool) {
        liveRestore?.cancel()
        liveRestore = loop.assumeIsolated().scheduleTask(in: .nanoseconds(max(0, time - now) + 100_000_000)) { [weak self] in
            self?.whileAttached {
                guard let self, self.liveStream?.id == streamID else { return }
                self.leaveLive(restoringQueue: restoringQueue)
            }
        }
    }

    /// Lets go of the live source (it ended, or a controller took the group back): its stream
    /// stops, and the queue comes back paused where it was if `restoringQueue`.
    func leaveLive(restoringQueue: Bool = true) {
        if let live, !live.ended { log("\(self): lets go of \(live.source); its audio is not played until it starts again") }
        live = nil
        liveRestore?.cancel()
        liveRestore = nil
        if let liveStream, stream === liveStream { stopStream() }
        liveStream = nil
        let back = queueBeforeLive
        queueBeforeLive = nil
        defer { core.noteChange() }
        guard restoringQueue, let back else { return }
        guard let item = tags.firstIndex(of: back.tag) else {
            return log("\(self): the queue item that played before the live source was removed meanwhile; the group stays stopped")
        }
        do {
            try startStream(item: item, offset: back.offset, anchored: false)
            apply(TimelineAnchor(timelineFrame: 0, serverTime: anchorTime, isPlaying: false))
        } catch {
            log("\(self): cannot take up its queue again: \(error)")
        }
    }

    /// A controller takes the group back from a heard live stream: every room stops on one
    /// frame (a pause anchor), and then the stream is let go of.
    private func stopLiveTogether(restoringQueue: Bool) {
        guard let liveStream, stream === liveStream, isPlaying else { return leaveLive(restoringQueue: restoringQueue) }
        if let live = takingLive {
            log("\(self): lets go of \(live.source); its audio is not played until it starts again")
            live.ended = true
        }
        let time = anchorTime
        apply(TimelineAnchor(timelineFrame: liveStream.schedule.position(atServer: time)?.frame ?? playhead(), serverTime: time, isPlaying: false))
        restoreAfterLive(at: time, streamID: liveStream.id, restoringQueue: restoringQueue)
    }

    /// While a live source plays (or plays out): commands that act on the queue's playback
    /// take the group back from it first, or are refused. A `pause` or `stop` is then done:
    /// its reply.
    func takeBackFromLive(for command: ControlCommand) throws(ControlRefusal) -> ControlReply? {
        guard liveStream != nil else { return nil }
        switch command {
        case .play, .queuePlay:
            // A new stream replaces it at once, as it replaces a playing queue.
            leaveLive(restoringQueue: false)
        case .resume:
            // MPD's play and toggle on a paused sender: the queue as it was, resumed.
            leaveLive(restoringQueue: true)
        case .pause:
            let at = seconds(playhead())
            stopLiveTogether(restoringQueue: true)
            return .paused(PauseReport(pausedAtSeconds: at))
        case .stop, .queueClear:
            if case .queueClear = command { clearQueue() }
            stopLiveTogether(restoringQueue: false)
            return .edited(EditReport(stopped: true, queueLength: queue.count))
        case .seek, .next, .previous:
            throw ControlRefusal("\(self) plays \(live?.source ?? "a live source"); pause or play to take it back first", kind: .conflict)
        default:
            break
        }
        return nil
    }

    /// The house stops: the live stream with it (`stopStream`), and nothing brought back after.
    func stopLive() {
        live = nil
        liveRestore?.cancel()
        liveRestore = nil
        liveStream = nil
        queueBeforeLive = nil
    }

    /// What the status says of the live source: nil when none plays.
    var liveReport: LiveSourceReport? {
        guard let live, liveStream != nil else { return nil }
        var report = LiveSourceReport(kind: live.info.kind, sender: live.info.sender)
        report.senderName = live.info.senderName
        report.title = live.title
        report.artist = live.artist
        report.album = live.album
        if live.artwork != nil { report.artworkRevision = live.artworkRevision }
        return report
    }
}
