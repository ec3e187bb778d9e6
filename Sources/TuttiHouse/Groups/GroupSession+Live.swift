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

    init(key: LiveStreamKey, info: LiveSourceInfo, stream: ServerStream, writer: LiveStreamWriter) {
        self.key = key
        self.info = info
        self.stream = stream
        self.writer = writer
    }

    /// "airplay from ADDRESS (NAME)", for log lines and refusals.
    var source: String { "\(info.kind) from \(info.sender)\(info.senderName.map { " (\($0))" } ?? "")" }
}

/// Where the queue was when a live source took the group, to come back to, paused.
struct QueueReturn {
    var item: Int
    var offset: MediaTime
}

/// A live source in a group: its own stream on the group's timeline, written on the loop as
/// the source's frames arrive and anchored at the house times the source asks for. The queue
/// stops where it was and comes back, paused, when the source ends.
///
/// The live stream is not kept in the house's store: a house restarted while a sender plays
/// comes back with the queue stopped, and the sender's next stream plays again.
extension GroupSession {
    /// A live stream begins: the queue stops (its place kept), and the rooms are given the
    /// source's stream; they hear it once its schedule is known.
    func beginLive(_ info: LiveSourceInfo, key: LiveStreamKey) {
        loop.preconditionInEventLoop()
        resolvePendingStart()
        if let previous = live { log("\(self): \(previous.source) is replaced by \(info.kind) from \(info.sender)") }
        liveRestore?.cancel()
        liveRestore = nil
        if liveStream == nil {
            // A queue that was playing or paused comes back there; a stopped one stays stopped.
            // (A source that replaces another keeps the first one's place.)
            queueBeforeLive = nil
            if stream != nil, let item = currentItem, item.index >= 0 {
                queueBeforeLive = QueueReturn(item: item.index, offset: item.start.itemStartTime + MediaTime(frame: playhead() - item.start.startFrame, sampleRate: sampleRate))
            } else if stream != nil, !queue.isEmpty {
                queueBeforeLive = QueueReturn(item: firstItemInPlayOrder, offset: .zero)
            }
        }
        stopStream()
        live = nil
        let stream: ServerStream, writer: LiveStreamWriter
        do {
            let encoder = try ChunkEncoder(codec: configuration.codec, sampleRate: sampleRate, channelCount: configuration.channelCount)
            stream = ServerStream(id: core.makeStreamID(), codec: configuration.codec, sampleRate: sampleRate, channelCount: configuration.channelCount,
                                  codecHeader: encoder.codecHeader)
            let output = StreamTimelineOutput(stream: stream, encoder: encoder, chunkFrames: configuration.chunkFrames,
                                              depthFrames: frames(configuration.bufferDepthNanoseconds), clock: core.clock, notify: {})
            guard info.channelCount == configuration.channelCount else {
                throw MediaError(.unsupported, input: "\(info.kind) from \(info.sender)",
                                 reason: "\(info.channelCount) channels (the house streams \(configuration.channelCount))")
            }
            writer = try LiveStreamWriter(output: output, sourceRate: info.sampleRate, rate: sampleRate, channelCount: info.channelCount)
        } catch {
            return log("\(self): \(info.kind) from \(info.sender) cannot be played: \(error); the group stays stopped")
        }
        let session = LiveSession(key: key, info: info, stream: stream, writer: writer)
        live = session
        liveStream = stream
        self.stream = stream
        publishListening()
        log("\(self): plays \(session.source)\(queueBeforeLive != nil ? "; its queue waits, paused, until it ends" : "")")
        pumpAll()
        core.noteChange()
    }

    func liveAudio(_ samples: [Float], frames: Int, sourceFrame: Int64) {
        guard let live else { return }
        if live.writer.write(samples, frames: frames, sourceFrame: sourceFrame) == .restart {
            // A jump the source did not announce with a flush: its timing starts again.
            log("\(self): \(live.source) jumped to frame \(sourceFrame); its timing starts again there")
            cutLive(live)
            _ = live.writer.write(samples, frames: frames, sourceFrame: sourceFrame)
        }
        anchorLiveIfReady(live)
        pumpAll()
    }

    func liveSchedule(sourceFrame: Int64, hostTime: Int64) {
        guard let live else { return }
        live.writer.noteSchedule(sourceFrame: sourceFrame, hostTime: hostTime)
        anchorLiveIfReady(live)
    }

    /// Anchors the section once its first frame and a schedule are known: at the time the
    /// source asked for, or, when that is too soon for the rooms, at the first frame they can
    /// still make (its start is then not heard; the rest keeps the source's timing).
    private func anchorLiveIfReady(_ live: LiveSession) {
        let writer = live.writer
        guard writer.startTime == nil, let start = writer.scheduledStartTime else { return }
        writer.startTime = start
        let earliest = anchorTime
        if start >= earliest {
            apply(TimelineAnchor(timelineFrame: writer.sectionStart, serverTime: start, isPlaying: true))
        } else {
            let late = earliest - start
            apply(TimelineAnchor(timelineFrame: writer.sectionStart + frames(late), serverTime: start + late, isPlaying: true))
            log("\(self): \(live.source) asked for its audio \(late / 1_000_000) ms sooner than the rooms can play it; that much of its start is not heard")
        }
        core.noteChange()
    }

    func liveVolume(_ percent: Int) {
        guard live != nil else { return }
        // A group with no room connected has no volume to set: nothing is lost.
        do { _ = try perform(.groupVolume(percent: percent), { _ in }) } catch {}
    }

    func liveMetadata(title: String?, artist: String?, album: String?) {
        guard let live else { return }
        if let title { live.title = title }
        if let artist { live.artist = artist }
        if let album { live.album = album }
        core.noteChange()
    }

    /// The source dropped what it sent (a pause or seek on the sender): the rooms stop at the
    /// edit horizon, and what follows is heard when its schedule says.
    func liveFlushed() {
        guard let live else { return }
        cutLive(live)
        pumpAll()
        core.noteChange()
    }

    /// Stops the rooms at the first frame every room can still stop on, drops what was written
    /// after it, and starts a new section there.
    private func cutLive(_ live: LiveSession) {
        let writer = live.writer
        let time = now + configuration.editLeadNanoseconds + largestCommitment
        let frame = live.stream.schedule.anchors.isEmpty ? writer.sectionStart : max(writer.sectionStart, live.stream.schedule.heardFrame(atServer: time))
        if !live.stream.schedule.anchors.isEmpty { apply(TimelineAnchor(timelineFrame: frame, serverTime: time, isPlaying: false)) }
        if writer.writtenFrames > frame {
            _ = writer.output.truncate(from: frame)
        } else {
            writer.pad(to: frame)
        }
        do { try writer.startSection(at: frame) } catch {
            // The converter was made for this source's rate once already.
            preconditionFailure("\(self): the live stream's converter cannot be made again: \(error)")
        }
    }

    /// The source ended: what it sent plays out, then the queue comes back, paused.
    func liveEnded(_ reason: String) {
        guard let live else { return }
        self.live = nil
        live.writer.finishSection()
        live.writer.output.queueRanOut()
        pumpAll()
        let end = live.stream.endFrame ?? live.writer.writtenFrames
        // When the rooms hear the end: from the anchor in force (paused: now).
        var heardAt = now
        if let anchor = live.stream.schedule.anchors.last, anchor.isPlaying, end > anchor.timelineFrame {
            heardAt = max(now, anchor.serverTime + WideMath.multiplyDivide(end - anchor.timelineFrame, 1_000_000_000, Int64(sampleRate)))
        }
        log("\(self): \(live.source) ended (\(reason)); \(heardAt > now ? "what it sent plays out, then " : "")the queue is back, paused")
        let streamID = live.stream.id
        liveRestore = loop.assumeIsolated().scheduleTask(in: .nanoseconds(heardAt - now + 100_000_000)) { [weak self] in
            self?.whileAttached {
                guard let self, self.liveStream?.id == streamID else { return }
                self.leaveLive()
            }
        }
        core.noteChange()
    }

    /// Lets go of the live source (it ended, or a controller took the group back): its stream
    /// stops, and the queue comes back paused where it was if `restoringQueue`.
    func leaveLive(restoringQueue: Bool = true) {
        if let live { log("\(self): lets go of \(live.source); its audio is not played until it starts again") }
        live = nil
        liveRestore?.cancel()
        liveRestore = nil
        if let liveStream, stream === liveStream { stopStream() }
        liveStream = nil
        let back = queueBeforeLive
        queueBeforeLive = nil
        defer { core.noteChange() }
        guard restoringQueue, let back, queue.indices.contains(back.item) else { return }
        do {
            try startStream(item: back.item, offset: back.offset, anchored: false)
            apply(TimelineAnchor(timelineFrame: 0, serverTime: anchorTime, isPlaying: false))
        } catch {
            log("\(self): cannot take up its queue again: \(error)")
        }
    }

    /// While a live source plays (or plays out): commands that act on the queue's playback
    /// take the group back from it first, or are refused. A `pause` is then done: the reply.
    func takeBackFromLive(for command: ControlCommand) throws(ControlRefusal) -> ControlReply? {
        guard liveStream != nil else { return nil }
        let source = live?.source ?? "a live source"
        switch command {
        case .play, .queuePlay, .stop, .queueClear:
            leaveLive(restoringQueue: false)
        case .pause:
            leaveLive(restoringQueue: true)
            return .paused(PauseReport(pausedAtSeconds: seconds(playhead())))
        case .resume, .seek, .next, .previous:
            throw ControlRefusal("\(self) plays \(source); pause or play to take it back first", kind: .conflict)
        default:
            break
        }
        return nil
    }

    /// What the status says of the live source: nil when none plays.
    var liveReport: LiveSourceReport? {
        guard let live, liveStream != nil else { return nil }
        var report = LiveSourceReport(kind: live.info.kind, sender: live.info.sender)
        report.senderName = live.info.senderName
        report.title = live.title
        report.artist = live.artist
        report.album = live.album
        return report
    }
}
