import NIOCore
import TuttiProtocol

/// A `play` waiting for the rooms it plays to: the stream is produced and sent at once, without
/// an anchor (rooms hold it, silent), and anchored to start only when every room of the group
/// is ready, or when `House.Configuration.startWaitNanoseconds` has passed. Then the reply
/// names the real start, how long it waited, and the rooms that were not ready and why (they
/// join in sync later, a little after the playhead, like any room that joins a playing stream).
/// It also says how each room takes the start (`RoomStart`): in sync, or slewing into sync
/// while its clock bound is over `House.Configuration.startBoundTargetNanoseconds`.
///
/// A room is ready when its clock estimate rests on enough history to play by (its status
/// reports a clock error, which a speaker does from `Playout.minimumClockSpanNanoseconds` on)
/// and the house has sent it the stream's first `readyAudioNanoseconds` on its connection.
/// Without the wait, rooms started just before `play` joined two seconds into the track.
struct PendingStart {
    let streamID: UInt32
    /// The timeline frame the stream starts at.
    let firstFrame: Int64
    let items: Int
    let requested: Int64
    let deadline: Int64
    let respond: House.Respond
    /// The reply the command gives once started: `play`'s report, or another command's reply
    /// made from it (`queue-play`'s edit report).
    let reply: (PlayReport) -> ControlReply
}

extension GroupSession {
    /// Holds the new stream at its first frame until its rooms are ready (see `PendingStart`);
    /// answers `respond` when it is anchored, which may be at once.
    func startWhenRoomsAreReady(items: Int, respond: @escaping House.Respond, reply: @escaping (PlayReport) -> ControlReply = { .started($0) }) {
        loop.preconditionInEventLoop()
        guard let stream else { return respond(.failure(ControlRefusal("nothing to play", kind: .conflict))) }
        let requested = now
        pendingStart = PendingStart(streamID: stream.id, firstFrame: stream.schedule.anchors.last?.timelineFrame ?? 0, items: items,
                                    requested: requested, deadline: requested + configuration.startWaitNanoseconds, respond: respond, reply: reply)
        let streamID = stream.id
        loop.assumeIsolated().scheduleTask(in: .nanoseconds(configuration.startWaitNanoseconds)) { [weak self] in
            self?.whileAttached {
                guard let self, self.pendingStart?.streamID == streamID else { return }
                self.resolvePendingStart()
            }
        }
        checkPendingStart()
    }

    /// Anchors a pending start once every room of the group is ready or its time is up.
    func checkPendingStart() {
        loop.preconditionInEventLoop()
        guard let pending = pendingStart else { return }
        guard let stream, stream.id == pending.streamID else {
            pendingStart = nil
            return pending.respond(.failure(ControlRefusal("superseded: another command replaced the stream before it started", kind: .conflict)))
        }
        let waiting = rooms.filter { !isReady($0, for: pending) }
        guard waiting.isEmpty || now >= pending.deadline else { return }
        anchorPendingStart(notReady: waiting)
    }

    /// Answers a pending play with a refusal saying why it will not start.
    func cancelPendingStart(because reason: String) {
        guard let pending = pendingStart else { return }
        pendingStart = nil
        pending.respond(.failure(ControlRefusal(reason, kind: .conflict)))
    }

    /// Starts a pending stream now, ready or not: another command is about to change what plays.
    func resolvePendingStart() {
        guard let pending = pendingStart else { return }
        anchorPendingStart(notReady: rooms.filter { !isReady($0, for: pending) })
    }

    private func anchorPendingStart(notReady waiting: [RoomLink]) {
        guard let pending = pendingStart, let stream, stream.id == pending.streamID else { return }
        let notReady = waiting.map { UnreadyRoom(room: $0.name, reason: readiness($0, for: pending)) }
        pendingStart = nil
        let anchored = now
        let start = anchorTime
        apply(TimelineAnchor(timelineFrame: pending.firstFrame, serverTime: start, isPlaying: true))
        let waited = Int((anchored - pending.requested) / 1_000_000)
        if !notReady.isEmpty {
            log("\(self): play started after \(waited) ms without \(notReady.map(\.room).joined(separator: ", ")) (not ready: \(notReady.map { "\($0.room): \($0.reason)" }.joined(separator: "; "))); they join in sync when ready")
        }
        var report = PlayReport(items: pending.items, rooms: shownRoomNames, startsInMs: Int((start - now) / 1_000_000))
        report.waitedMs = waited
        report.startsAtServerTimeNs = start
        report.notReady = notReady.isEmpty ? nil : notReady
        report.roomStarts = rooms.map { room in
            let bound = room.status.flatMap { $0.clockErrorNanoseconds >= 0 ? Int(($0.clockErrorNanoseconds + 999) / 1000) : nil }
            let mode: RoomStart.Mode = waiting.contains { $0 === room } ? .later
                : (room.status?.clockErrorNanoseconds ?? .max) <= configuration.startBoundTargetNanoseconds ? .inSync : .slewing
            return RoomStart(room: room.name, mode: mode, clockBoundMicroseconds: bound)
        }
        pending.respond(.success(pending.reply(report)))
        // The rest of the deep buffer follows the anchor and the reply (writing it can take a
        // loaded house a hundred milliseconds).
        pumpAll()
    }

    private func isReady(_ room: RoomLink, for pending: PendingStart) -> Bool {
        guard let status = room.status, status.clockErrorNanoseconds >= 0, room.sender.streamID == pending.streamID else { return false }
        return room.sender.sentEnd || room.sender.sentUntilFrame >= pending.firstFrame + frames(configuration.readyAudioNanoseconds)
    }

    /// Why a room is not ready, in a few words.
    private func readiness(_ room: RoomLink, for pending: PendingStart) -> String {
        guard let status = room.status else { return "it has sent no status yet" }
        if status.clockErrorNanoseconds < 0 { return "its clock is still settling" }
        if room.sender.streamID != pending.streamID { return "it has not taken the new stream yet" }
        return "it has been sent too little audio"
    }
}
