import TuttiProtocol

/// Every room the house knows (`RoomRecord`), by id, and the connection of each that is
/// connected (`RoomLink`). A room is found by the name its speaker says (when it connects), by
/// its name or by its id (when a controller names it).
///
/// Thread-safety: confined to the house's loop, like everything `HouseCore` holds.
final class RoomRegistry {
    private(set) var records: [RoomID: RoomRecord] = [:]
    private var bySpeaker: [String: RoomID] = [:]
    /// The connected rooms' connections.
    private(set) var links: [RoomID: RoomLink] = [:]
    private var nextID: RoomID = 1

    init(records: [RoomRecord]) {
        for record in records {
            self.records[record.id] = record
            bySpeaker[record.speakerName] = record.id
            nextID = max(nextID, record.id + 1)
        }
    }

    /// The record of the room whose speaker says `speakerName`, made (in `group`) if it is new.
    func record(forSpeaker speakerName: String, newIn group: GroupID) -> (record: RoomRecord, isNew: Bool) {
        if let id = bySpeaker[speakerName], let record = records[id] { return (record, false) }
        // A renamed room keeps its name; a new speaker whose name another room has taken gets
        // a distinct one, so a name is always one room. A name of digits alone would read as an
        // id: such a speaker's room is "room N".
        let base = speakerName.allSatisfy(\.isNumber) ? "room \(speakerName)" : speakerName
        var name = base, suffix = 2
        while records.values.contains(where: { $0.name == name }) {
            name = "\(base) \(suffix)"
            suffix += 1
        }
        let record = RoomRecord(id: nextID, speakerName: speakerName, name: name, group: group)
        nextID += 1
        records[record.id] = record
        bySpeaker[speakerName] = record.id
        return (record, true)
    }

    /// The room a controller names: by its id (all digits; no name is), else by its name. A
    /// stereo pair is one room: its name or either half's names it, and the left half stands
    /// for it.
    func find(_ reference: String) -> RoomRecord? {
        if let id = RoomID(reference), let record = records[id] { return shown(record) }
        if let pair = records.values.first(where: { $0.pairName == reference }) { return pair }
        return records.values.first { $0.name == reference }.map(shown)
    }

    /// The room a controller sees for `record`: its pair's left half, for a right half.
    func shown(_ record: RoomRecord) -> RoomRecord {
        guard record.isHiddenHalf, let partner = record.partner, let left = records[partner] else { return record }
        return left
    }

    /// The rooms a controller sees: a stereo pair once, by its left half.
    var shownRecords: [RoomRecord] { records.values.filter { !$0.isHiddenHalf } }

    func update(_ id: RoomID, _ change: (inout RoomRecord) -> Void) {
        guard var record = records[id] else { return }
        change(&record)
        records[id] = record
    }

    /// Whether `name` is some room's name, or some speaker's (which would take it on connecting).
    func isTaken(_ name: String) -> Bool {
        records.values.contains { $0.name == name || $0.speakerName == name || $0.pairName == name }
    }

    /// The rooms of `group`, by name.
    func members(of group: GroupID) -> [RoomRecord] {
        records.values.filter { $0.group == group }.sorted { $0.name < $1.name }
    }

    /// The connected rooms of `group`, by name.
    func connected(in group: GroupID) -> [RoomLink] {
        links.values.filter { records[$0.roomID]?.group == group }.sorted { $0.name < $1.name }
    }

    /// The connected rooms, by name.
    var connected: [RoomLink] { links.values.sorted { $0.name < $1.name } }

    func link(_ id: RoomID) -> RoomLink? { links[id] }

    /// Records `link` as its room's connection; returns the one it replaces.
    func attach(_ link: RoomLink) -> RoomLink? {
        defer { links[link.roomID] = link }
        return links[link.roomID]
    }

    /// Forgets the connection `connectionID`, if it is still its room's; returns it.
    func detach(connectionID: UInt32) -> RoomLink? {
        guard let link = links.values.first(where: { $0.connectionID == connectionID }) else { return nil }
        links[link.roomID] = nil
        return link
    }
}
