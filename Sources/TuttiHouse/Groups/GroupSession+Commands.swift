import Foundation
import NIOCore
import TuttiCore
import TuttiEngine
import TuttiProtocol

/// The commands that act on one group: what it plays (transport), its queue and play modes, its
/// volume and its status. Another group notices none of them.
///
/// Commands that change the playing queue (`seek`, `next`, `queue-add`, `queue-remove`,
/// `queue-move`) are answered once the engine has applied them, with where the stream was cut.
extension GroupSession {
    /// Performs `command`; returns the reply, or nil when `respond` will be called later.
    func perform(_ command: ControlCommand, _ respond: @escaping House.Respond) throws -> ControlReply? {
        loop.preconditionInEventLoop()
        if let reply = try takeBackFromLive(for: command) { return reply }
        switch command {
        case .pause, .resume, .seek, .next, .previous, .queueAdd, .queueRemove, .queueMove, .queueClear, .queueShuffle, .playModes, .playlistLoad:
            // A play still waiting for its rooms starts now: this command acts on what plays.
            resolvePendingStart()
        default: break
        }
        switch command {
        case .play(let files, _):
            try core.checkReadable(files)
            resolvePendingStart()
            queue = files
            tags = files.map { _ in core.makeTag() }
            save()
            guard configuration.startWaitNanoseconds > 0 else {
                try startPlaying(item: firstItemInPlayOrder)
                var report = PlayReport(items: files.count, rooms: shownRoomNames, startsInMs: startsInMilliseconds)
                report.startsAtServerTimeNs = stream?.schedule.anchors.last?.serverTime
                return .started(report)
            }
            try startPlaying(item: firstItemInPlayOrder, anchored: false)
            startWhenRoomsAreReady(items: files.count, respond: respond)
            return nil
        case .pause:
            guard let stream, isPlaying else { throw ControlRefusal("nothing is playing in \(self)", kind: .conflict) }
            let time = anchorTime
            let frame = stream.schedule.position(atServer: time)?.frame ?? playhead()
            apply(TimelineAnchor(timelineFrame: frame, serverTime: time, isPlaying: false))
            return .paused(PauseReport(pausedAtSeconds: seconds(frame)))
        case .resume:
            guard let stream, !isPlaying, let anchor = stream.schedule.anchors.last else { throw ControlRefusal("nothing is paused in \(self)", kind: .conflict) }
            let time = anchorTime
            apply(TimelineAnchor(timelineFrame: anchor.timelineFrame, serverTime: time, isPlaying: true))
            return .resumed(ResumeReport(resumedAtSeconds: seconds(anchor.timelineFrame), startsInMs: startsInMilliseconds))
        case .seek(let target):
            guard let item = currentItem, item.index >= 0 else { throw ControlRefusal("nothing is playing in \(self)", kind: .conflict) }
            let time = MediaTime(seconds: target)
            editPlayingQueue({ $0.seek(to: time, completion: $1) }, respond) { [self] action in
                guard let action else {
                    // Production had ended (the end is about to be heard): a new stream.
                    try startPlaying(item: item.index, offset: time)
                    return EditReport(item: item.index, queueLength: queue.count)
                }
                return EditReport(cut: cut(action), item: item.index, queueLength: queue.count)
            }
            return nil
        case .next:
            guard let item = currentItem, item.index >= 0 else { throw ControlRefusal("nothing is playing in \(self)", kind: .conflict) }
            if playModes.single {
                // The engine holds the single item alone: the next is a stream of its own, as
                // `previous` is.
                guard let next = itemAfter(item.index) else {
                    stopStream()
                    return .edited(EditReport(stopped: true, queueLength: queue.count))
                }
                try startPlaying(item: next)
                return .edited(EditReport(item: next, queueLength: queue.count))
            }
            editPlayingQueue({ $0.advanceToNextItem(completion: $1) }, respond) { [self] action in
                guard let action else {
                    guard let next = itemAfter(item.index) else {
                        stopStream()
                        return EditReport(stopped: true, queueLength: queue.count)
                    }
                    try startPlaying(item: next)
                    return EditReport(item: next, queueLength: queue.count)
                }
                var report = EditReport(cut: cut(action), queueLength: queue.count)
                if case .cut(_, let restart, _) = action {
                    if let restart { report.item = restart.index } else { report.stopped = true }
                }
                return report
            }
            return nil
        case .previous:
            guard let item = currentItem, item.index >= 0 else { throw ControlRefusal("nothing is playing in \(self)", kind: .conflict) }
            let position = item.start.itemStartTime.seconds + seconds(playhead() - item.start.startFrame)
            guard let before = itemBefore(item.index), position < Self.previousItemSeconds else { return try perform(.seek(seconds: 0), respond) }
            // A new stream from the item before: the engine's edits go forward only.
            try startPlaying(item: before)
            return .edited(EditReport(item: before, queueLength: queue.count))
        case .queuePlay(let index):
            guard queue.indices.contains(index) else {
                throw ControlRefusal("no queue item \(index) (the queue of \(self) has \(queue.count))", kind: .notFound)
            }
            // As `play`: the new stream waits for its rooms (MPD's `play`/`playid`, the web UI's
            // queue rows), so none joins a second into the track.
            resolvePendingStart()
            let length = queue.count
            guard configuration.startWaitNanoseconds > 0 else {
                try startPlaying(item: index)
                return .edited(EditReport(item: index, queueLength: length))
            }
            try startPlaying(item: index, anchored: false)
            startWhenRoomsAreReady(items: length, respond: respond) { _ in .edited(EditReport(item: index, queueLength: length)) }
            return nil
        case .queueClear, .stop:
            if case .queueClear = command { clearQueue() }
            guard let stream, isPlaying else {
                stopStream()
                return .edited(EditReport(stopped: true, queueLength: queue.count))
            }
            // Every room stops on the same sample (a pause anchor), and the stream ends once
            // they all have.
            let time = anchorTime
            apply(TimelineAnchor(timelineFrame: stream.schedule.position(atServer: time)?.frame ?? playhead(), serverTime: time, isPlaying: false))
            let streamID = stream.id
            loop.assumeIsolated().scheduleTask(in: .nanoseconds(time - now + 100_000_000)) { [weak self] in
                self?.whileAttached {
                    guard let self, self.stream?.id == streamID else { return }
                    self.stopStream()
                    self.core.noteChange()
                }
            }
            return .edited(EditReport(stopped: true, queueLength: queue.count))
        case .groupVolume(let percent):
            // A stereo pair is one room: its volume is set once, on both halves.
            let members = shownRooms
            guard !members.isEmpty else { throw ControlRefusal("no room of \(self) is connected", kind: .conflict) }
            let levels = members.map { core.rooms.records[$0.roomID]?.volume ?? 100 }
            let mean = Double(levels.reduce(0, +)) / Double(levels.count)
            for (room, level) in zip(members, levels) {
                // In proportion, so the rooms keep their balance; from silence, all alike.
                let scaled = mean > 0 ? Int((Double(level) * Double(percent) / mean).rounded()) : percent
                core.setVolume(of: room.roomID, to: min(100, max(0, scaled)))
            }
            return .group(GroupVolumeReport(percent: volume ?? percent, rooms: members.compactMap { core.roomChange($0.roomID) }))
        case .queue:
            return .queue(queueReport())
        case .queueAdd(let file, let position):
            try core.checkReadable([file])
            let at = position ?? queue.count
            guard (0...queue.count).contains(at) else { throw ControlRefusal("queue position \(at) is out of range 0…\(queue.count)") }
            queue.insert(file, at: at)
            tags.insert(core.makeTag(), at: at)
            save()
            queueEdited(respond)
            return nil
        case .queueRemove(let index):
            guard queue.indices.contains(index) else {
                throw ControlRefusal("no queue item \(index) (the queue of \(self) has \(queue.count))", kind: .notFound)
            }
            queue.remove(at: index)
            tags.remove(at: index)
            save()
            queueEdited(respond)
            return nil
        case .queueMove(let from, let to):
            guard queue.indices.contains(from) else {
                throw ControlRefusal("no queue item \(from) (the queue of \(self) has \(queue.count))", kind: .notFound)
            }
            guard queue.indices.contains(to) else {
                throw ControlRefusal("queue position \(to) is out of range 0…\(queue.count - 1)")
            }
            queue.insert(queue.remove(at: from), at: to)
            tags.insert(tags.remove(at: from), at: to)
            save()
            queueEdited(respond)
            return nil
        case .status:
            return .status(core.statusReport(of: self))
        case .queueShuffle:
            shuffleQueue()
            save()
            queueEdited(respond)
            return nil
        case .playModes(let `repeat`, let random, let single, let consume):
            setPlayModes(repeat: `repeat`, random: random, single: single, consume: consume)
            return .status(core.statusReport(of: self))
        case .replayGain(let mode, let preamp, let missing, let limit, let measureAsPlayed):
            setReplayGain(mode: mode, preampDB: preamp, missingPreampDB: missing, limit: limit, measureAsPlayed: measureAsPlayed)
            return .status(core.statusReport(of: self))
        case .crossfade(let seconds):
            setCrossfade(seconds: seconds)
            return .status(core.statusReport(of: self))
        case .playlistSave(let name):
            return .playlists(core.savePlaylist(named: name, files: queue))
        case .playlistLoad(let name):
            let files = try core.playlistFiles(named: name)
            queue += files
            tags += files.map { _ in core.makeTag() }
            save()
            queueEdited(respond)
            return nil
        default:
            preconditionFailure("\(command.name) does not act on a group: HouseCore dispatches it")
        }
    }

    /// Empties the queue (`queue-clear`), stored.
    func clearQueue() {
        queue = []
        tags = []
        save()
    }

    /// Within this much of an item's start, `previous` goes to the item before; later, to the
    /// item's start.
    static let previousItemSeconds = 3.0

    /// The mean volume of the group's connected rooms, rounded.
    var volume: Int? {
        let levels = shownRooms.map { core.rooms.records[$0.roomID]?.volume ?? 100 }
        return levels.isEmpty ? nil : Int((Double(levels.reduce(0, +)) / Double(levels.count)).rounded())
    }

    func startPlaying(item: Int, offset: MediaTime = .zero, anchored: Bool = true) throws {
        do { try startStream(item: item, offset: offset, anchored: anchored) } catch { throw ControlRefusal("\(error)", kind: .unplayable) }
    }

    var startsInMilliseconds: Int {
        guard let anchor = stream?.schedule.anchors.last else { return 0 }
        return Int((anchor.serverTime - now) / 1_000_000)
    }

    /// The item heard now: from the engine, or for a resumed stream before its new production
    /// reaches the playhead, from the store (`restoredItems`).
    var currentItem: HeardItem? {
        let head = playhead()
        if let outcome = stream?.engine?.outcome(atFrame: head), restoredItems.last.map({ outcome.startFrame >= $0.startFrame }) ?? true {
            let start = HouseStore.TimelineItem(startFrame: outcome.startFrame, tag: outcome.tag, itemStartTime: outcome.itemStartTime,
                                                path: outcome.path, title: outcome.info?.displayTitle, durationSeconds: outcome.info?.duration?.seconds,
                                                artist: outcome.info?.artist, album: outcome.info?.album)
            return HeardItem(index: tags.firstIndex(of: outcome.tag) ?? -1, start: start)
        }
        guard let start = restoredItems.last(where: { $0.startFrame <= head }) else { return nil }
        return HeardItem(index: tags.firstIndex(of: start.tag) ?? -1, start: start)
    }

    /// Hands `edit` to the playing stream's engine and answers, on the loop, with `answer` of
    /// what the engine did (nil: production had ended, or nothing plays).
    private func editPlayingQueue(_ edit: (QueueProducer, @escaping QueueProducer.EditCompletion) -> Void, _ respond: @escaping House.Respond,
                                  answer: @escaping (QueueEditPlan.Action?) throws -> EditReport) {
        let finish = NIOLoopBound((respond, answer), eventLoop: loop)
        let loop = self.loop, group = LoopBoundWeak(self, loop: loop)
        let streamID = stream?.id
        let completion: QueueProducer.EditCompletion = { action in
            loop.execute {
                let (respond, answer) = finish.value
                // The answer holds the group: the house may have gone while the engine worked.
                let done: Void? = group.object?.whileAttached {
                    guard group.object?.stream?.id == streamID else {
                        // A newer command replaced the stream before this edit reached it.
                        return respond(.failure(ControlRefusal("superseded: another command replaced the stream before this one took effect", kind: .conflict)))
                    }
                    do {
                        respond(.success(.edited(try answer(action))))
                    } catch let refusal as ControlRefusal {
                        respond(.failure(refusal))
                    } catch {
                        respond(.failure(ControlRefusal("\(error)")))
                    }
                }
                if done == nil { respond(.failure(ControlRefusal("the house stopped before this command took effect", kind: .conflict))) }
            }
        }
        guard let engine = stream?.engine else { return completion(nil) }
        edit(engine, completion)
        productionMayProceed()
    }

    /// After an edit of the queue: the engine takes the edited queue; audio already sent is
    /// flushed from the first frame the edit changes.
    private func queueEdited(_ respond: @escaping House.Respond) {
        editPlayingQueue({ [self] engine, completion in giveQueue(to: engine, completion: completion) }, respond) { [self] action in
            EditReport(cut: action.flatMap(cut), queueLength: queue.count)
        }
    }

    /// Where an edit cut the stream, and whether that is beyond the seamless margin; nil when
    /// nothing already decoded changed.
    private func cut(_ action: QueueEditPlan.Action) -> StreamCut? {
        guard case .cut(let frame, _, _) = action else { return nil }
        let ahead = frame - playhead()
        let margin = frames(configuration.flushMarginNanoseconds)
        var cut = StreamCut(fromSeconds: seconds(frame), aheadSeconds: seconds(ahead), seamless: ahead >= margin)
        if ahead < margin {
            cut.reason = "the change takes effect \(String(format: "%.2f", seconds(ahead))) s ahead of the playhead; a seamless flush needs \(String(format: "%.2f", seconds(margin))) s"
        }
        return cut
    }

    func queueReport() -> QueueReport {
        let items = stream?.engine?.outcomes ?? []
        let current = currentItem?.index
        let entries = queue.enumerated().map { index, path in
            let info = items.last(where: { $0.tag == tags[index] })?.info
            var entry = QueueEntryReport(index: index, path: path, current: index == current, title: info?.displayTitle,
                                         durationSeconds: info?.duration?.seconds)
            entry.id = tags[index]
            return entry
        }
        return QueueReport(items: entries, current: current.flatMap { $0 >= 0 ? $0 : nil })
    }

    /// "stopped", "starting", "playing" or "paused".
    var state: String {
        guard let stream else { return "stopped" }
        let ended = stream.endFrame.map { playhead() >= $0 } ?? false
        return ended ? "stopped" : isPlaying ? "playing" : pendingStart != nil ? "starting" : "paused"
    }

    func report() -> GroupReport {
        var report = GroupReport(id: id, name: name, isDefault: isDefault, rooms: shownRoomNames,
                                 knownRooms: core.rooms.members(of: id).filter { !$0.isHiddenHalf }.map(\.shownName), state: state, queueLength: queue.count)
        report.stream = stream?.id
        report.volume = volume
        report.airplay = core.airPlayAddresses[id]
        if stream != nil {
            report.positionSeconds = seconds(playhead())
            if let item = currentItem { report.title = item.start.title ?? item.start.path }
        }
        if let source = liveReport {
            report.source = source
            report.title = source.title ?? source.description
        }
        return report
    }
}

/// The queue item heard now, as the house reports it: where it started on the timeline, and
/// its position in the queue (-1 if it has been removed).
struct HeardItem {
    var index: Int
    var start: HouseStore.TimelineItem
}
