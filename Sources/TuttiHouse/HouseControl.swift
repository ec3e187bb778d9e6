import Foundation
import NIOCore
import TuttiCore
import TuttiProtocol
import TuttiEngine

/// The control commands (`ControlCommand`), dispatched and answered with typed replies. The
/// JSON on the wire is read and written only by `ControlJSON`.
///
/// Commands that change the playing queue (`seek`, `next`, `queue-add`, `queue-remove`,
/// `queue-move`) are answered once the engine has applied them, with where the stream was cut.
extension House {
    /// The answer to a command: called once, on the house's loop.
    public typealias Respond = (Result<ControlReply, ControlRefusal>) -> Void

    /// A request as it arrives on the wire; `reply` gets the JSON to send back (called once, on
    /// the loop).
    func control(json: String, reply: @escaping (_ ok: Bool, _ json: String) -> Void) {
        loop.preconditionInEventLoop()
        let command: ControlCommand
        do { command = try ControlJSON.decodeCommand(json) } catch {
            return reply(false, ControlJSON.encode(error))
        }
        control(command) { result in
            switch result {
            case .success(let answer): reply(true, ControlJSON.encode(answer))
            case .failure(let refusal): reply(false, ControlJSON.encode(refusal))
            }
        }
    }

    /// Performs `command`; `respond` is called once, on the loop, at once or when the engine
    /// has applied an edit.
    public func control(_ command: ControlCommand, respond answer: @escaping Respond) {
        loop.preconditionInEventLoop()
        let respond: Respond = { [self] result in
            answer(result)
            if case .success = result, !command.onlyReads { noteChange() }
        }
        do {
            if let problem = command.problem { throw ControlRefusal(problem) }
            if let reply = try performAtOnce(command, respond) { respond(.success(reply)) }
            // A room that joined or left may have been the one a waiting play waited for.
            checkPendingStart()
        } catch let refusal as ControlRefusal {
            respond(.failure(refusal))
        } catch {
            respond(.failure(ControlRefusal("\(error)")))
        }
    }

    /// Performs `command`; returns the reply, or nil when `respond` will be called later.
    private func performAtOnce(_ command: ControlCommand, _ respond: @escaping Respond) throws -> ControlReply? {
        switch command {
        case .pause, .resume, .seek, .next, .previous, .queueAdd, .queueRemove, .queueMove, .queueClear, .queueShuffle, .playModes, .playlistLoad:
            // A play still waiting for its rooms starts now: this command acts on what plays.
            resolvePendingStart()
        default: break
        }
        switch command {
        case .play(let files, let names):
            try checkReadable(files)
            resolvePendingStart()
            if let names, !names.isEmpty {
                let unknown = names.filter { name in !rooms.values.contains { $0.name == name } }
                if !unknown.isEmpty { throw ControlRefusal("no such room: \(unknown.joined(separator: ", ")) (connected: \(roomNames))", kind: .notFound) }
                state.group = names
            } else {
                state.group = nil
            }
            state.queue = files
            queueTags = files.map { _ in makeTag() }
            saveState()
            guard configuration.startWaitNanoseconds > 0 else {
                try startPlaying(item: firstItemInPlayOrder)
                return .started(PlayReport(items: files.count, rooms: groupRooms.map(\.name), startsInMs: startsInMilliseconds))
            }
            try startPlaying(item: firstItemInPlayOrder, anchored: false)
            startWhenRoomsAreReady(items: files.count, respond: respond)
            return nil
        case .pause:
            guard let stream, isPlaying else { throw ControlRefusal("nothing is playing", kind: .conflict) }
            let time = anchorTime
            let frame = stream.schedule.position(atServer: time)?.frame ?? playhead()
            apply(TimelineAnchor(timelineFrame: frame, serverTime: time, isPlaying: false))
            return .paused(PauseReport(pausedAtSeconds: seconds(frame)))
        case .resume:
            guard let stream, !isPlaying, let anchor = stream.schedule.anchors.last else { throw ControlRefusal("nothing is paused", kind: .conflict) }
            let time = anchorTime
            apply(TimelineAnchor(timelineFrame: anchor.timelineFrame, serverTime: time, isPlaying: true))
            return .resumed(ResumeReport(resumedAtSeconds: seconds(anchor.timelineFrame), startsInMs: startsInMilliseconds))
        case .seek(let target):
            guard let item = currentItem, item.index >= 0 else { throw ControlRefusal("nothing is playing", kind: .conflict) }
            let time = MediaTime(seconds: target)
            editPlayingQueue({ $0.seek(to: time, completion: $1) }, respond) { [self] action in
                guard let action else {
                    // Production had ended (the end is about to be heard): a new stream.
                    try startPlaying(item: item.index, offset: time)
                    return EditReport(item: item.index, queueLength: state.queue.count)
                }
                return EditReport(cut: cut(action), item: item.index, queueLength: state.queue.count)
            }
            return nil
        case .next:
            guard let item = currentItem, item.index >= 0 else { throw ControlRefusal("nothing is playing", kind: .conflict) }
            if state.playModes.single {
                // The engine holds the single item alone: the next is a stream of its own, as
                // `previous` is.
                guard let next = itemAfter(item.index) else {
                    stopStream()
                    return .edited(EditReport(stopped: true, queueLength: state.queue.count))
                }
                try startPlaying(item: next)
                return .edited(EditReport(item: next, queueLength: state.queue.count))
            }
            editPlayingQueue({ $0.advanceToNextItem(completion: $1) }, respond) { [self] action in
                guard let action else {
                    guard let next = itemAfter(item.index) else {
                        stopStream()
                        return EditReport(stopped: true, queueLength: state.queue.count)
                    }
                    try startPlaying(item: next)
                    return EditReport(item: next, queueLength: state.queue.count)
                }
                var report = EditReport(cut: cut(action), queueLength: state.queue.count)
                if case .cut(_, let restart, _) = action {
                    if let restart { report.item = restart.index } else { report.stopped = true }
                }
                return report
            }
            return nil
        case .previous:
            guard let item = currentItem, item.index >= 0 else { throw ControlRefusal("nothing is playing", kind: .conflict) }
            let position = item.start.itemStartTime.seconds + seconds(playhead() - item.start.startFrame)
            guard let before = itemBefore(item.index), position < Self.previousItemSeconds else { return try performAtOnce(.seek(seconds: 0), respond) }
            // A new stream from the item before: the engine's edits go forward only.
            try startPlaying(item: before)
            return .edited(EditReport(item: before, queueLength: state.queue.count))
        case .queuePlay(let index):
            guard state.queue.indices.contains(index) else {
                throw ControlRefusal("no queue item \(index) (the queue has \(state.queue.count))", kind: .notFound)
            }
            try startPlaying(item: index)
            return .edited(EditReport(item: index, queueLength: state.queue.count))
        case .queueClear, .stop:
            if case .queueClear = command {
                state.queue = []
                queueTags = []
                saveState()
            }
            guard let stream, isPlaying else {
                stopStream()
                return .edited(EditReport(stopped: true, queueLength: state.queue.count))
            }
            // Every room stops on the same sample (a pause anchor), and the stream ends once
            // they all have.
            let time = anchorTime
            apply(TimelineAnchor(timelineFrame: stream.schedule.position(atServer: time)?.frame ?? playhead(), serverTime: time, isPlaying: false))
            let id = stream.id
            loop.scheduleTask(in: .nanoseconds(time - now + 100_000_000)) { [weak self] in
                guard let self, self.stream?.id == id else { return }
                self.stopStream()
                self.noteChange()
            }
            return .edited(EditReport(stopped: true, queueLength: state.queue.count))
        case .groupVolume(let percent):
            let members = groupRooms
            guard !members.isEmpty else { throw ControlRefusal("no room of the group is connected", kind: .conflict) }
            let levels = members.map { state.volumes[$0.name] ?? 100 }
            let mean = Double(levels.reduce(0, +)) / Double(levels.count)
            for (room, level) in zip(members, levels) {
                // In proportion, so the rooms keep their balance; from silence, all alike.
                let scaled = mean > 0 ? Int((Double(level) * Double(percent) / mean).rounded()) : percent
                state.volumes[room.name] = min(100, max(0, scaled))
                send(.volume(.init(level: Self.gain(percent: state.volumes[room.name]!), rampNanoseconds: 100_000_000)), to: room)
            }
            saveState()
            return .group(GroupVolumeReport(percent: groupVolume ?? percent, rooms: members.map(roomChange)))
        case .rooms:
            return .rooms(RoomsReport(rooms: roomReports()))
        case .join(let name):
            let room = try room(named: name)
            var group = state.group ?? rooms.values.map(\.name)
            if !group.contains(room.name) { group.append(room.name) }
            state.group = group
            saveState()
            pump(room)
            return .room(roomChange(room))
        case .leave(let name):
            let room = try room(named: name)
            state.group = (state.group ?? rooms.values.map(\.name)).filter { $0 != room.name }
            saveState()
            if let id = room.streamID {
                send(.flush(.init(streamID: id, fromFrame: .min)), to: room)
                room.streamID = nil
            }
            return .room(roomChange(room))
        case .volume(let name, let percent):
            let room = try room(named: name)
            state.volumes[room.name] = percent
            saveState()
            send(.volume(.init(level: Self.gain(percent: percent), rampNanoseconds: 100_000_000)), to: room)
            return .room(roomChange(room))
        case .roomLatency(let name, let milliseconds):
            let room = try room(named: name)
            let nanoseconds = Int64((milliseconds * 1e6).rounded())
            state.latencies[room.name] = nanoseconds
            room.latencyNanoseconds = nanoseconds
            knownLatencies[room.name] = nanoseconds
            stored(store?.saveLatency(room: room.name, nanoseconds: nanoseconds))
            saveState()
            // The room plays that much earlier from its next block; edits from now on are cut
            // far enough ahead for its new commitment.
            send(.roomSettings(.init(name: room.name, latencyNanoseconds: nanoseconds)), to: room)
            log("room \(room.name): latency set to \(milliseconds) ms")
            return .room(roomChange(room))
        case .roomRename(let name, let newName):
            let room = try room(named: name)
            let to = newName.trimmingCharacters(in: .whitespaces)
            guard to != room.name else { return .room(roomChange(room)) }
            let taken = rooms.values.contains { $0.name == to || $0.speakerName == to } || state.volumes[to] != nil
                || state.group?.contains(to) == true || state.latencies[to] != nil || state.roomNames.values.contains(to)
            guard !taken else { throw ControlRefusal("room-rename: a room named \(to) exists", kind: .conflict) }
            let old = room.name
            room.name = to
            func move<Value>(_ values: inout [String: Value]) { if let value = values.removeValue(forKey: old) { values[to] = value } }
            move(&state.volumes)
            move(&state.latencies)
            move(&knownLatencies)
            move(&connectionCounts)
            state.group = state.group?.map { $0 == old ? to : $0 }
            state.roomNames[room.speakerName] = to == room.speakerName ? nil : to
            saveState()
            send(.roomSettings(.init(name: to, latencyNanoseconds: room.latencyNanoseconds)), to: room)
            log("room \(old) is now called \(to)")
            return .room(roomChange(room))
        case .queue:
            return .queue(queueReport())
        case .queueAdd(let file, let position):
            try checkReadable([file])
            let at = position ?? state.queue.count
            guard (0...state.queue.count).contains(at) else { throw ControlRefusal("queue position \(at) is out of range 0…\(state.queue.count)") }
            state.queue.insert(file, at: at)
            queueTags.insert(makeTag(), at: at)
            saveState()
            queueEdited(respond)
            return nil
        case .queueRemove(let index):
            guard state.queue.indices.contains(index) else {
                throw ControlRefusal("no queue item \(index) (the queue has \(state.queue.count))", kind: .notFound)
            }
            state.queue.remove(at: index)
            queueTags.remove(at: index)
            saveState()
            queueEdited(respond)
            return nil
        case .queueMove(let from, let to):
            guard state.queue.indices.contains(from) else {
                throw ControlRefusal("no queue item \(from) (the queue has \(state.queue.count))", kind: .notFound)
            }
            guard state.queue.indices.contains(to) else {
                throw ControlRefusal("queue position \(to) is out of range 0…\(state.queue.count - 1)")
            }
            state.queue.insert(state.queue.remove(at: from), at: to)
            queueTags.insert(queueTags.remove(at: from), at: to)
            saveState()
            queueEdited(respond)
            return nil
        case .status:
            return .status(statusReport())
        case .queueShuffle:
            shuffleQueue()
            saveState()
            queueEdited(respond)
            return nil
        case .playModes(let `repeat`, let random, let single, let consume):
            setPlayModes(repeat: `repeat`, random: random, single: single, consume: consume)
            return .status(statusReport())
        case .playlists:
            return .playlists(playlistsReport)
        case .playlistSave(let name):
            return .playlists(savePlaylist(named: name))
        case .playlistRemove(let name):
            return .playlists(try removePlaylist(named: name))
        case .playlistLoad(let name):
            let files = try playlistFiles(named: name)
            state.queue += files
            queueTags += files.map { _ in makeTag() }
            saveState()
            queueEdited(respond)
            return nil
        case .librarySearch, .libraryBrowse, .libraryProblems:
            try queryLibrary(command, respond)
            return nil
        }
    }

    /// Refuses what the house will not play (`MediaAccess`), and files it cannot open at all
    /// (a damaged file is found while decoding).
    private func checkReadable(_ files: [String]) throws {
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

    private var roomNames: String {
        let names = rooms.values.map(\.name).sorted()
        return names.isEmpty ? "none" : names.joined(separator: ", ")
    }

    private func room(named name: String) throws -> RoomLink {
        guard let room = rooms.values.first(where: { $0.name == name }) else { throw ControlRefusal("no such room: \(name) (connected: \(roomNames))", kind: .notFound) }
        return room
    }

    /// Within this much of an item's start, `previous` goes to the item before; later, to the
    /// item's start.
    static let previousItemSeconds = 3.0

    /// The mean volume of the group's connected rooms, rounded.
    var groupVolume: Int? {
        let levels = groupRooms.map { state.volumes[$0.name] ?? 100 }
        return levels.isEmpty ? nil : Int((Double(levels.reduce(0, +)) / Double(levels.count)).rounded())
    }

    private func roomChange(_ room: RoomLink) -> RoomChange {
        RoomChange(room: room.name, inGroup: inGroup(room), volume: state.volumes[room.name] ?? 100, latencyMs: Double(room.latencyNanoseconds) / 1e6)
    }

    private func startPlaying(item: Int, offset: MediaTime = .zero, anchored: Bool = true) throws {
        do { try startStream(item: item, offset: offset, anchored: anchored) } catch { throw ControlRefusal("\(error)", kind: .unplayable) }
    }

    private var startsInMilliseconds: Int {
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
            return HeardItem(index: queueTags.firstIndex(of: outcome.tag) ?? -1, start: start)
        }
        guard let start = restoredItems.last(where: { $0.startFrame <= head }) else { return nil }
        return HeardItem(index: queueTags.firstIndex(of: start.tag) ?? -1, start: start)
    }

    private func seconds(_ frame: Int64) -> Double { Double(frame) / Double(sampleRate) }

    /// Hands `edit` to the playing stream's engine and answers, on the loop, with `answer` of
    /// what the engine did (nil: production had ended, or nothing plays).
    private func editPlayingQueue(_ edit: (QueueProducer, @escaping QueueProducer.EditCompletion) -> Void, _ respond: @escaping Respond,
                                  answer: @escaping (QueueEditPlan.Action?) throws -> EditReport) {
        let finish = NIOLoopBound((respond, answer), eventLoop: loop)
        let loop = self.loop
        let streamID = stream?.id
        let completion: QueueProducer.EditCompletion = { action in
            loop.execute { [weak self] in
                let (respond, answer) = finish.value
                guard let self, self.stream?.id == streamID else {
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
        }
        guard let engine = stream?.engine else { return completion(nil) }
        edit(engine, completion)
        productionMayProceed()
    }

    /// After an edit of `state.queue`: the engine takes the edited queue; audio already sent is
    /// flushed from the first frame the edit changes.
    private func queueEdited(_ respond: @escaping Respond) {
        editPlayingQueue({ [self] engine, completion in giveQueue(to: engine, completion: completion) }, respond) { [self] action in
            EditReport(cut: action.flatMap(cut), queueLength: state.queue.count)
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

    private func queueReport() -> QueueReport {
        let items = stream?.engine?.outcomes ?? []
        let current = currentItem?.index
        let entries = state.queue.enumerated().map { index, path in
            let info = items.last(where: { $0.tag == queueTags[index] })?.info
            var entry = QueueEntryReport(index: index, path: path, current: index == current, title: info?.displayTitle,
                                         durationSeconds: info?.duration?.seconds)
            entry.id = queueTags[index]
            return entry
        }
        return QueueReport(items: entries, current: current.flatMap { $0 >= 0 ? $0 : nil })
    }

    func roomReports() -> [RoomReport] {
        let head = playhead()
        return rooms.values.sorted { $0.name < $1.name }.map { room in
            var report = RoomReport(name: room.name, inGroup: inGroup(room), volume: state.volumes[room.name] ?? 100,
                                    latencyMs: Double(room.latencyNanoseconds) / 1e6, state: "connecting",
                                    sentSeconds: seconds(room.sentUntilFrame))
            report.reconnects = max(0, (connectionCounts[room.name] ?? 1) - 1)
            if let status = room.status {
                report.state = "\(status.state)"
                report.bufferSeconds = status.bufferedUntilFrame >= 0 ? max(0, seconds(status.bufferedUntilFrame - max(head, status.playheadFrame))) : 0
                report.syncErrorMicroseconds = Double(status.syncErrorNanoseconds) / 1000
                report.clockErrorMicroseconds = status.clockErrorNanoseconds >= 0 ? Double(status.clockErrorNanoseconds) / 1000 : nil
                report.underruns = Int(status.underruns)
                if status.fillRate > 0 { report.fillRate = Double(status.fillRate) }
                report.playheadSeconds = status.playheadFrame >= 0 ? seconds(status.playheadFrame) : nil
                report.problem = status.problem.isEmpty ? nil : status.problem
            }
            return report
        }
    }

    func statusReport() -> StatusReport {
        var report = StatusReport(server: configuration.name, state: "stopped", roomCount: rooms.count, queueLength: state.queue.count,
                                  serverTimeNs: now)
        // Rooms are listed whatever plays: a stopped house's page shows them too.
        report.rooms = roomReports()
        report.groupVolume = groupVolume
        report.library = libraryStatus
        report.playModes = state.playModes
        guard let stream else { return report }
        let head = playhead()
        let ended = stream.endFrame.map { head >= $0 } ?? false
        report.state = ended ? "stopped" : isPlaying ? "playing" : pendingStart != nil ? "starting" : "paused"
        report.stream = stream.id
        report.positionSeconds = seconds(head)
        report.bufferedAheadSeconds = seconds(max(0, stream.producedEnd - head))
        if let item = currentItem {
            report.item = item.index
            report.title = item.start.title ?? item.start.path
            report.path = item.start.path
            report.artist = item.start.artist
            report.album = item.start.album
            report.itemPositionSeconds = item.start.itemStartTime.seconds + seconds(head - item.start.startFrame)
            report.itemDurationSeconds = item.start.durationSeconds
            if item.index >= 0 { report.nextItem = nextItem(after: item.index) }
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
