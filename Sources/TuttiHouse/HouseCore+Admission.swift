import NIOCore
import TuttiProtocol

/// Speaker admission (`SpeakerAdmission`): a speaker the house does not know waits, listed with
/// its code, until a controller admits it; a forgotten one waits again.
extension HouseCore {
    /// A speaker the house does not know said hello on `channel`: it waits. `letIn` is called
    /// (on the loop) if it is admitted while its connection lasts. Returns its code.
    func knock(channel: any Channel, name: String, key: PeerKey, code: String, letIn: @escaping () -> Void) {
        loop.preconditionInEventLoop()
        let address = channel.remoteAddress?.ipAddress ?? "?"
        let waiting = SpeakerAdmission.Waiting(name: name, key: key, code: code, address: address, since: now, channel: channel, letIn: letIn)
        if knocksLogged.windowStart == .min || now - knocksLogged.windowStart >= 10_000_000_000 { knocksLogged = (now, 0) }
        knocksLogged.count += 1
        let logs = knocksLogged.count <= 5
        let (replaced, evicted) = admission.knock(waiting)
        // Its own earlier connection (a speaker that lost power, and came back before the house
        // noticed): one speaker, one entry.
        for earlier in replaced { earlier.channel.close(promise: nil) }
        if let evicted {
            if logs { log("speaker \(evicted.name) (\(evicted.address)) gave way: more than \(SpeakerAdmission.maximumWaiting) speakers wait to be admitted") }
            evicted.channel.close(promise: nil)
        }
        if logs {
            log("speaker \(name) from \(address) waits to be admitted (code \(code)): tutti ctl admit \(name.contains(" ") ? "'\(name)'" : name), or Admit in the web UI"
                + (knocksLogged.count == 5 ? " (more speakers knocking in the next 10 s are not each logged)" : ""))
        }
        noteChange()
    }

    /// A waiting speaker's connection ended.
    func leaveWaiting(channel: any Channel) {
        loop.preconditionInEventLoop()
        let before = admission.waiting.count
        admission.leave(channel: channel)
        if admission.waiting.count != before { noteChange() }
    }

    func isAdmitted(_ key: PeerKey) -> Bool { admission.isAdmitted(key) }

    /// `admit`: lets in the waiting speaker `reference` names (its name or its code), and with
    /// `code` only if it shows that code.
    func admit(_ reference: String, code: String? = nil) throws(ControlRefusal) -> RoomsReport {
        let matches = admission.waiting(named: reference, code: code)
        guard let speaker = matches.first else {
            let names = admission.waiting.map { "\($0.name) (\($0.code))" }
            throw ControlRefusal("no speaker named \(reference)\(code.map { " with code \($0)" } ?? "") waits to be admitted (waiting: \(names.isEmpty ? "none" : names.joined(separator: ", ")))",
                                 kind: .notFound)
        }
        // Two speakers of one name waiting: a stranger's beside the household's. The codes
        // tell them apart; the name alone must not pick one.
        guard matches.count == 1 else {
            throw ControlRefusal("\(matches.count) speakers named \(reference) wait, with codes \(matches.map(\.code).joined(separator: ", ")): admit the one whose code its own log shows, by its code",
                                 kind: .conflict)
        }
        do { try admission.admit(speaker) } catch {
            throw ControlRefusal("cannot keep the admission: \(error)")
        }
        log("speaker \(speaker.name) (code \(speaker.code), key \(speaker.key.fingerprint)) admitted")
        speaker.letIn()
        return RoomsReport(rooms: roomReports(), waiting: waitingReports())
    }

    /// `forget`: the speaker of room `reference` (or a speaker admitted under that name) is no
    /// longer admitted: its connection ends, and it waits again when it comes back.
    func forget(_ reference: String) throws(ControlRefusal) -> RoomsReport {
        let room = rooms.find(reference)
        let name = room?.name ?? reference
        let links = room.map { room in rooms.connected.filter { $0.roomID == room.id } } ?? []
        // Admitted under its speaker's own name, whatever the room is called now.
        let forgotten: [String]
        do { forgotten = try admission.forget(names: [reference, room?.speakerName].compactMap { $0 }, keys: links.compactMap(\.speakerKey)) } catch {
            throw ControlRefusal("cannot forget the speaker: \(error)")
        }
        guard !forgotten.isEmpty else {
            throw ControlRefusal("no admitted speaker named \(reference)", kind: .notFound)
        }
        // Every connection of a forgotten key, whatever its room is called now.
        for link in rooms.connected where link.speakerKey.map({ forgotten.contains($0.text) }) ?? false {
            link.send(.goodbye(reason: "this speaker is no longer admitted to the house"))
            link.channel.close(promise: nil)
        }
        log("speaker \(name) forgotten (\(forgotten.count) key\(forgotten.count == 1 ? "" : "s")): it waits to be admitted again if it returns")
        return RoomsReport(rooms: roomReports(), waiting: waitingReports())
    }

    /// The waiting speakers, in the order they knocked.
    func waitingReports() -> [WaitingSpeakerReport] {
        admission.waiting.map {
            WaitingSpeakerReport(name: $0.name, code: $0.code, address: $0.address, key: $0.key.fingerprint,
                                 waitingSeconds: Double(max(0, now - $0.since) / 1_000_000) / 1000)
        }
    }
}
