import FoundationEssentials

/// What a controller sends: a command, and the group it acts on. On the wire the group is the
/// command object's `group` key (`{"command":"pause","group":"Kitchen"}`), by name or id; a
/// command that acts on a group (`ControlCommand.actsOnAGroup`) and names none acts on the
/// default group. Others ignore it.
public struct ControlRequest: Sendable, Equatable {
    public var command: ControlCommand
    /// The group, by name or id; nil for the default group.
    public var group: String?

    public init(_ command: ControlCommand, group: String? = nil) {
        self.command = command
        self.group = group
    }
}

extension ControlRequest: Codable {
    private enum Key: String, CodingKey { case group }

    public init(from decoder: any Decoder) throws {
        command = try ControlCommand(from: decoder)
        group = try decoder.container(keyedBy: Key.self).decodeIfPresent(String.self, forKey: .group)
    }

    public func encode(to encoder: any Encoder) throws {
        try command.encode(to: encoder)
        var c = encoder.container(keyedBy: Key.self)
        try c.encodeIfPresent(group, forKey: .group)
    }
}
