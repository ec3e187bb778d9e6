import Foundation
import NIOCore
import TuttiProtocol

/// The rooms: their connections, their settings (volume, latency, name), which group each plays
/// in, and what the house reports of them.
extension HouseCore {
    // MARK: Connections

    /// Registers a connection that said hello and returns its id. A speaker is sent nothing
    /// yet: its handler calls `startSending(toConnection:)` once it holds the id, because a
    /// flush can drain the socket at once and report writability before this returns.
    func connect(channel: any Channel, hello: WireMessage.Hello, speakerKey: PeerKey? = nil) -> UInt32 {
        loop.preconditionInEventLoop()
        let connectionID = nextConnectionIDValue()
        guard hello.role == .speaker else { return connectionID }
        let (record, isNew) = rooms.record(forSpeaker: hello.name, newIn: defaultGroupID)
        if isNew { stored(store?.save(record)) }
        let latency = record.latencySet ?? hello.latencyNanoseconds
        // `serve(connection:)` built the pipeline: a connection without the writer is a bug.
        guard let chunkWriter = try? channel.pipeline.syncOperations.handler(type: FramedChunkWriter.self) else {
            preconditionFailure("a house connection's pipeline has no FramedChunkWriter: serve(connection:) builds it")
        }
        let link = RoomLink(connectionID: connectionID, roomID: record.id, name: record.name, speakerName: hello.name, latencyNanoseconds: latency,
                            outputLeadNanoseconds: hello.outputLeadNanoseconds, channel: channel, chunkWriter: chunkWriter, speakerKey: speakerKey)
        link.sender.resume = hello.resume
        if let previous = rooms.attach(link) {
            // A room that reconnects (or a duplicate of its speaker): the newest connection wins.
            log("room \(record.name) reconnected; closing its previous connection")
            previous.channel.close(promise: nil)
        }
        if record.latencyKnown != latency {
            rooms.update(record.id) { $0.latencyKnown = latency }
            stored(store?.save(rooms.records[record.id]!))
        }
        connectionCounts[record.id, default: 0] += 1
        log("room \(record.name) connected from \(channel.remoteAddress.map { "\($0)" } ?? "?")" + (record.name != hello.name ? " (its speaker says \(hello.name))" : "")
            + (record.group != defaultGroupID ? " into \(group(of: link))" : ""))
        noteChange()
        return connectionID
    }

    private func nextConnectionIDValue() -> UInt32 {
        defer { nextConnectionIDStorage &+= 1 }
        return nextConnectionIDStorage
    }

    /// Sends a newly connected room its settings and what it is missing of its group's stream.
    func startSending(toConnection connectionID: UInt32) {
        loop.preconditionInEventLoop()
        guard let link = rooms.connected.first(where: { $0.connectionID == connectionID }), let record = rooms.records[link.roomID] else { return }
        // Always, whatever changed while it was away: a speaker keeps its name, latency and gain
        // across reconnections, and a volume set back to 100 or a name set back to its own is a
        // change too.
        link.send(.roomSettings(settings(of: record, latencyNanoseconds: link.latencyNanoseconds)))
        link.send(.volume(.init(level: Self.gain(percent: record.volume), rampNanoseconds: 0)))
        let group = group(of: link)
        if let resume = link.sender.resume, resume.streamID != group.stream?.id {
            // It holds a stream that has ended or been replaced while it was away, or one its
            // group no longer plays.
            link.sender.resume = nil
            link.send(.flush(.init(streamID: resume.streamID, fromFrame: .min)))
        }
        group.admit(link)
    }

    func disconnect(connectionID: UInt32) {
        loop.preconditionInEventLoop()
        guard let link = rooms.detach(connectionID: connectionID) else { return }
        log("room \(link.name) disconnected")
        let group = group(of: link)
        group.publishListening()
        group.checkPendingStart()
        noteChange()
    }

    func received(status: WireMessage.SpeakerStatus, fromConnection connectionID: UInt32) {
        loop.preconditionInEventLoop()
        guard let link = rooms.connected.first(where: { $0.connectionID == connectionID }) else { return }
        if !status.problem.isEmpty, status.problem != link.status?.problem {
            log("room \(link.name): \(status.problem)")
        }
        link.status = status
        link.statusTime = now
        let group = group(of: link)
        // Level-triggered, beside the writability edges: a room behind on a writable
        // connection is sent more whatever edge was missed.
        if link.channel.isWritable { group.pump(link) }
        group.checkPendingStart()
        noteChange()
    }

    /// Its connection became writable again: more of its group's stream can go.
    func writable(connection connectionID: UInt32) {
        loop.preconditionInEventLoop()
        guard let link = rooms.connected.first(where: { $0.connectionID == connectionID }) else { return }
        group(of: link).pump(link)
    }

    // MARK: Settings

    func room(named reference: String) throws(ControlRefusal) -> RoomRecord {
        guard let record = rooms.find(reference) else {
            let names = rooms.shownRecords.map(\.shownName).sorted()
            throw ControlRefusal("no such room: \(reference) (rooms: \(names.isEmpty ? "none" : names.joined(separator: ", ")))", kind: .notFound)
        }
        return record
    }

    /// Moves `room` into `group`: out of its own group's stream, into `group`'s, a little after
    /// its playhead and in sync with its rooms. The groups' other rooms notice nothing.
    /// A stereo pair moves as one: both halves.
    func move(_ reference: RoomRecord, to group: GroupSession, refusingNoChange: Bool) throws(ControlRefusal) {
        // As it is now: a list of records taken before an earlier move may be out of date.
        guard let room = rooms.records[reference.id] else { return }
        guard room.group != group.id else {
            if refusingNoChange { throw ControlRefusal("room \(room.shownName) is already in \(group)", kind: .conflict) }
            return
        }
        let from = groups[room.group] ?? defaultGroup
        let ids = [room.id] + (room.partner.map { [$0] } ?? [])
        for id in ids {
            rooms.update(id) { $0.group = group.id }
            stored(store?.save(rooms.records[id]!))
        }
        log("room \(room.shownName) moved from \(from) to \(group)")
        for id in ids {
            guard let link = rooms.link(id) else { continue }
            from.release(link)
            group.admit(link)
        }
    }

    /// The group a room leaving its group goes to: an empty one named after it, made if none is.
    func ownGroup(for room: RoomRecord) throws(ControlRefusal) -> GroupSession {
        if let existing = groups.values.first(where: { group in
            group.name == room.shownName && rooms.members(of: group.id).allSatisfy { $0.id == room.id || $0.id == room.partner } && !group.isDefault
        }) {
            return existing
        }
        // Within a group name's 64 bytes, with room for a suffix.
        var base = room.shownName
        while base.utf8.count > 56 { base.removeLast() }
        var name = base, suffix = 2
        while groups.values.contains(where: { $0.name == name }) {
            name = "\(base) \(suffix)"
            suffix += 1
        }
        return makeGroup(named: name)
    }

    /// A stereo pair's volume is both halves'.
    func setVolume(of id: RoomID, to percent: Int) {
        for id in [id] + (rooms.records[id]?.partner.map { [$0] } ?? []) {
            rooms.update(id) { $0.volume = percent }
            stored(store?.save(rooms.records[id]!))
            rooms.link(id)?.send(.volume(.init(level: Self.gain(percent: percent), rampNanoseconds: 100_000_000)))
        }
    }

    /// What a room's speaker is told of its settings: a stereo pair's halves go on by their
    /// own names.
    func settings(of record: RoomRecord, latencyNanoseconds: Int64) -> WireMessage.RoomSettings {
        .init(name: record.name, latencyNanoseconds: latencyNanoseconds, channelMode: record.channel)
    }

    /// A stereo pair's latency is both halves'.
    func setLatency(of room: RoomRecord, milliseconds: Double) -> RoomChange {
        let nanoseconds = Int64((milliseconds * 1e6).rounded())
        for id in [room.id] + (room.partner.map { [$0] } ?? []) {
            rooms.update(id) {
                $0.latencySet = nanoseconds
                $0.latencyKnown = nanoseconds
            }
            let record = rooms.records[id]!
            stored(store?.save(record))
            if let link = rooms.link(id) {
                link.latencyNanoseconds = nanoseconds
                // The room plays that much earlier from its next block; edits from now on are cut
                // far enough ahead for its new commitment.
                link.send(.roomSettings(settings(of: record, latencyNanoseconds: nanoseconds)))
                group(of: link).publishListening()
            }
        }
        log("room \(room.shownName): latency set to \(milliseconds) ms")
        return roomChange(room.id)!
    }

    func rename(_ room: RoomRecord, to newName: String) throws(ControlRefusal) -> RoomChange {
        let to = newName.trimmingCharacters(in: .whitespaces)
        guard to != room.shownName else { return roomChange(room.id)! }
        guard !rooms.isTaken(to) else { throw ControlRefusal("room-rename: a room named \(to) exists", kind: .conflict) }
        // A stereo pair's name is the pair's: its halves keep theirs, for when it is unbound,
        // and their speakers go on by them.
        rooms.update(room.id) { if $0.pairName != nil { $0.pairName = to } else { $0.name = to } }
        let record = rooms.records[room.id]!
        stored(store?.save(record))
        if record.pairName == nil, let link = rooms.link(room.id) {
            link.name = to
            link.send(.roomSettings(settings(of: record, latencyNanoseconds: link.latencyNanoseconds)))
        }
        log("room \(room.shownName) is now called \(to)")
        return roomChange(room.id)!
    }

    static func gain(percent: Int) -> Float {
        // 60 dB across the scale, so equal steps sound equal; 0 is silence.
        percent <= 0 ? 0 : Float(pow(10, Double(min(percent, 100) - 100) * 0.6 / 20))
    }

    // MARK: Reports

    func roomChange(_ id: RoomID) -> RoomChange? {
        guard let found = rooms.records[id] else { return nil }
        let record = rooms.shown(found)
        let latency = rooms.link(record.id)?.latencyNanoseconds ?? record.latencySet ?? record.latencyKnown ?? 0
        let isPair = record.pairName != nil
        return RoomChange(id: record.id, room: record.shownName, group: groups[record.group]?.name ?? defaultGroup.name, volume: record.volume,
                          latencyMs: Double(latency) / 1e6, channel: isPair || record.channel == .stereo ? nil : record.channel,
                          pair: isPair ? pairReport(of: record) : nil)
    }

    /// The halves of the stereo pair whose left half is `left`.
    private func pairReport(of left: RoomRecord) -> StereoPairReport? {
        guard let partner = left.partner, let right = rooms.records[partner] else { return nil }
        func half(_ record: RoomRecord) -> StereoPairReport.Half {
            let link = rooms.link(record.id)
            return .init(id: record.id, name: record.name, connected: link != nil,
                         syncErrorMicroseconds: link?.status.map { Double($0.syncErrorNanoseconds) / 1000 })
        }
        return StereoPairReport(left: half(left), right: half(right))
    }

    /// The connected rooms, by name. A stereo pair is one room, reported from its left half
    /// (its right, while the left is away), with both halves' state.
    func roomReports() -> [RoomReport] {
        rooms.connected.compactMap { link in
            let own = rooms.records[link.roomID]!
            let record = rooms.shown(own)
            // The pair is reported once: from its left half, if that is connected.
            if own.isHiddenHalf && rooms.link(record.id) != nil { return nil }
            let group = self.group(of: link)
            let head = group.playhead()
            func seconds(_ frame: Int64) -> Double { group.seconds(frame) }
            var report = RoomReport(id: record.id, name: record.shownName, group: group.name, volume: record.volume,
                                    latencyMs: Double(link.latencyNanoseconds) / 1e6, state: "connecting",
                                    sentSeconds: seconds(link.sender.sentUntilFrame))
            report.reconnects = max(0, (connectionCounts[link.roomID] ?? 1) - 1)
            if let status = link.status {
                report.state = "\(status.state)"
                report.bufferSeconds = status.bufferedUntilFrame >= 0 ? max(0, seconds(status.bufferedUntilFrame - max(head, status.playheadFrame))) : 0
                report.syncErrorMicroseconds = Double(status.syncErrorNanoseconds) / 1000
                report.clockErrorMicroseconds = status.clockErrorNanoseconds >= 0 ? Double(status.clockErrorNanoseconds) / 1000 : nil
                report.underruns = Int(status.underruns)
                if status.fillRate > 0 { report.fillRate = Double(status.fillRate) }
                report.playheadSeconds = status.playheadFrame >= 0 ? seconds(status.playheadFrame) : nil
                report.problem = status.problem.isEmpty ? nil : status.problem
            }
            if record.pairName != nil, let pair = pairReport(of: record) {
                report.pair = pair
                // The pair is as far off as its worse half.
                if let other = (own.id == pair.left.id ? pair.right : pair.left).syncErrorMicroseconds,
                   abs(other) > abs(report.syncErrorMicroseconds ?? 0) {
                    report.syncErrorMicroseconds = other
                }
                let away = [pair.left, pair.right].filter { !$0.connected }.map(\.name)
                if !away.isEmpty, report.problem == nil {
                    report.problem = "half of the stereo pair is not connected: \(away.joined(separator: ", ")); the other plays its own channel"
                }
            } else if record.channel != .stereo {
                report.channel = record.channel
            }
            return report
        }
    }

    /// `status` of `group`: its state, queue, item and volume, and every room of the house.
    func statusReport(of group: GroupSession) -> StatusReport {
        let shownRooms = roomReports()
        var report = StatusReport(server: configuration.name, state: group.state, roomCount: shownRooms.count, queueLength: group.queue.count,
                                  serverTimeNs: now)
        report.group = group.name
        report.groupId = group.id
        // Rooms are listed whatever plays: a stopped house's page shows them too.
        report.rooms = shownRooms
        report.waiting = waitingReports()
        report.groupVolume = group.volume
        report.library = libraryStatus
        report.playModes = group.playModes
        report.replayGain = group.replayGain
        report.crossfadeSeconds = group.crossfadeSeconds
        report.storeProblem = storeProblem
        guard let stream = group.stream else { return report }
        let head = group.playhead()
        report.stream = stream.id
        report.positionSeconds = group.seconds(head)
        report.bufferedAheadSeconds = group.seconds(max(0, stream.producedEnd - head))
        if let source = group.liveReport {
            report.source = source
            report.title = source.title ?? source.description
            report.artist = source.artist
            report.album = source.album
            if let progress = group.liveProgressReport {
                report.itemPositionSeconds = progress.position
                report.itemDurationSeconds = progress.duration
            }
            return report
        }
        if let item = group.currentItem {
            report.item = item.index
            report.title = item.start.title ?? item.start.path
            report.path = item.start.path
            report.artist = item.start.artist
            report.album = item.start.album
            report.itemPositionSeconds = item.start.itemStartTime.seconds + group.seconds(head - item.start.startFrame)
            report.itemDurationSeconds = item.start.durationSeconds
            if item.index >= 0 { report.nextItem = group.nextItem(after: item.index) }
        }
        return report
    }
}
