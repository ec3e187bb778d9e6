import TuttiProtocol

/// The groups themselves: made, renamed and removed. A group is a name, a queue and what it
/// plays; its rooms are whichever the registry places in it.
extension HouseCore {
    func groupsReport() -> GroupsReport {
        GroupsReport(groups: orderedGroups.map { $0.report() })
    }

    /// `group-create`: a new group, empty and silent.
    func createGroup(named name: String) throws(ControlRefusal) -> GroupsReport {
        let name = name.trimmingCharacters(in: .whitespaces)
        guard !groups.values.contains(where: { $0.name == name }) else { throw ControlRefusal("group-create: a group named \(name) exists", kind: .conflict) }
        let group = makeGroup(named: name)
        log("\(group) created")
        return groupsReport()
    }

    /// A new group named `name` (which no group has), stored.
    func makeGroup(named name: String) -> GroupSession {
        let group = GroupSession(core: self, stored: HouseStore.StoredGroup(id: allocateGroupID(), name: name))
        addGroup(group)
        stored(store?.save(group.snapshot))
        return group
    }

    func rename(_ group: GroupSession, to newName: String) throws(ControlRefusal) -> GroupsReport {
        let to = newName.trimmingCharacters(in: .whitespaces)
        guard to != group.name else { return groupsReport() }
        guard !groups.values.contains(where: { $0.name == to }) else { throw ControlRefusal("group-rename: a group named \(to) exists", kind: .conflict) }
        log("\(group) is now called \(to)")
        group.name = to
        group.save()
        return groupsReport()
    }

    /// `group-remove`: its rooms go to the default group (and play what it plays); its queue
    /// and stream are dropped.
    func remove(_ group: GroupSession) throws(ControlRefusal) -> GroupsReport {
        guard !group.isDefault else { throw ControlRefusal("group-remove: \(group) is the default group, which cannot be removed", kind: .conflict) }
        group.cancelPendingStart(because: "superseded: \(group) was removed before its play started")
        for record in rooms.members(of: group.id) { try move(record, to: defaultGroup, refusingNoChange: false) }
        group.stopStream()
        group.consumeWatch?.cancel()
        removeGroup(group.id)
        stored(store?.deleteGroup(group.id))
        log("\(group) removed")
        return groupsReport()
    }
}
