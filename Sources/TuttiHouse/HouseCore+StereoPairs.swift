import TuttiProtocol

/// Stereo pairs and channel modes: two rooms bound as one, the left half playing the stream's
/// left channel and the right half its right (`pair`, `unpair`), and a single room's channel
/// (`room-channel`). The channel is picked in each room from the stereo stream it already
/// receives, so a pair costs the house nothing more than its two rooms; each half keeps its own
/// clock and its own stream connection, and plays in sync with the other as any two rooms of a
/// group do.
///
/// To every controller a pair is one room: the left half's id, the pair's name, one volume and
/// one latency (set on both halves), one group (both move together). Its halves keep their own
/// names, and get them back when it is unbound.
extension HouseCore {
    func pair(left leftReference: String, right rightReference: String, as name: String) throws(ControlRefusal) -> RoomChange {
        let left = try room(named: leftReference), right = try room(named: rightReference)
        guard left.id != right.id else { throw ControlRefusal("pair: \(left.shownName) cannot be paired with itself", kind: .conflict) }
        for record in [left, right] where record.partner != nil {
            throw ControlRefusal("pair: \(record.shownName) is a stereo pair already; unpair it first", kind: .conflict)
        }
        let trimmed = name.trimmingCharacters(in: .whitespaces)
        // The pair may take either half's name; any other room's, not.
        guard trimmed == left.name || trimmed == right.name || !rooms.isTaken(trimmed) else {
            throw ControlRefusal("pair: a room named \(trimmed) exists", kind: .conflict)
        }
        // One group, the left half's; one volume, the left half's.
        try move(right, to: groups[left.group] ?? defaultGroup, refusingNoChange: false)
        rooms.update(left.id) {
            $0.partner = right.id
            $0.pairName = trimmed
            $0.channel = .left
        }
        rooms.update(right.id) {
            $0.partner = left.id
            $0.pairName = nil
            $0.channel = .right
        }
        for id in [left.id, right.id] { sendChannel(of: id) }
        setVolume(of: left.id, to: left.volume)
        log("rooms \(left.name) (left) and \(right.name) (right) are now the stereo pair \(trimmed)")
        noteChange()
        return roomChange(left.id)!
    }

    func unpair(_ reference: String) throws(ControlRefusal) -> RoomsReport {
        let left = try room(named: reference)
        guard left.pairName != nil, let partner = left.partner, let right = rooms.records[partner] else {
            throw ControlRefusal("unpair: \(left.shownName) is not a stereo pair", kind: .conflict)
        }
        for id in [left.id, right.id] {
            rooms.update(id) {
                $0.partner = nil
                $0.pairName = nil
                $0.channel = .stereo
            }
            sendChannel(of: id)
        }
        log("the stereo pair \(left.shownName) is unbound: rooms \(left.name) and \(right.name), each in stereo")
        noteChange()
        return RoomsReport(rooms: roomReports(), waiting: waitingReports())
    }

    func setChannel(of reference: String, to mode: ChannelMode) throws(ControlRefusal) -> RoomChange {
        let room = try room(named: reference)
        guard room.partner == nil else {
            throw ControlRefusal("room-channel: \(room.shownName) is a stereo pair (its halves play left and right); unpair it first", kind: .conflict)
        }
        rooms.update(room.id) { $0.channel = mode }
        sendChannel(of: room.id)
        log("room \(room.name) now plays \(mode)")
        return roomChange(room.id)!
    }

    /// Stores a room's channel and pairing, and tells its speaker, if connected.
    private func sendChannel(of id: RoomID) {
        guard let record = rooms.records[id] else { return }
        stored(store?.save(record))
        if let link = rooms.link(id) { link.send(.roomSettings(settings(of: record, latencyNanoseconds: link.latencyNanoseconds))) }
    }
}
