import TuttiProtocol

/// The house's groups as MPD's partitions (MPD 0.22+): each group is a partition of the same
/// name, with its own queue, player and volume; the default group is MPD's "default"
/// partition. A connection acts on one partition (`partition NAME`), and `moveoutput` moves a
/// room into it. Refusals use MPD 0.23's codes and words (src/command/PartitionCommands.cxx).
extension MPDCommands {
    mutating func partitionCommand(_ request: MPDRequest, into out: inout MPDResponse) async throws(MPDError) {
        let a = request.arguments
        switch request.name {
        case "listpartitions":
            try Self.expect(a, 0...0, request.name)
            for group in try await groups() { out.add("partition", group.name) }
        case "partition":
            try Self.expect(a, 1...1, request.name)
            guard let group = try await groups().first(where: { $0.name == a[0] }) else {
                throw MPDError(.noExist, "partition does not exist")
            }
            partition = group.isDefault ? nil : group.id
            // MPD tells a client entering a partition that all it shows changed.
            raised.formUnion(["playlist", "player", "mixer", "output", "options"])
        case "newpartition":
            try Self.expect(a, 1...1, request.name)
            // MPD's names: letters, digits, '-' and '_' (a group made elsewhere may have others).
            guard !a[0].isEmpty, a[0].unicodeScalars.allSatisfy({ $0.isASCII && ($0.properties.isAlphabetic || ("0"..."9").contains($0) || $0 == "-" || $0 == "_") }) else {
                throw MPDError(.argument, "bad name")
            }
            guard !(try await groups().contains { $0.name == a[0] }) else { throw MPDError(.exist, "name already exists") }
            _ = try await perform(.groupCreate(name: a[0]), for: request.name)
        case "delpartition":
            try Self.expect(a, 1...1, request.name)
            guard let group = try await groups().first(where: { $0.name == a[0] }) else {
                throw MPDError(.noExist, "no such partition")
            }
            guard !group.isDefault else { throw MPDError(.unknown, "cannot delete the default partition") }
            guard partitionClients.count(in: group.id) == 0 else { throw MPDError(.unknown, "partition still has clients") }
            // MPD keeps outputs in the partition they were moved to; move them out first.
            guard group.knownRooms.isEmpty else { throw MPDError(.unknown, "partition still has outputs") }
            _ = try await perform(.groupRemove, in: group.id, for: request.name)
        case "moveoutput":
            try Self.expect(a, 1...1, request.name)
            let now = try await current()
            guard let room = now.status.rooms.first(where: { $0.name == a[0] }) else { throw MPDError(.noExist, "No such output") }
            // Already here: nothing to do, as MPD says.
            guard room.group != now.status.group else { break }
            _ = try await perform(.join(room: String(room.id)), for: request.name)
        default:
            preconditionFailure("\(request.name) is not a partition command")
        }
    }

    /// The house's groups, the default first.
    private func groups() async throws(MPDError) -> [GroupReport] {
        guard case .groups(let report) = try await perform(.groups, for: "listpartitions") else {
            throw MPDError(.system, "the house did not list its groups")
        }
        return report.groups
    }
}
