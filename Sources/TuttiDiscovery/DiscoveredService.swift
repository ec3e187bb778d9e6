/// A DNS-SD service found by `ServiceBrowser`: its instance name, numeric address (IPv4
/// preferred when it has both), port and TXT record.
public struct DiscoveredService: Sendable, Equatable {
    public var name: String
    public var host: String
    public var port: Int
    public var textRecord: [String]
    /// Announced by this machine.
    public var isLocal: Bool

    public init(name: String, host: String, port: Int, textRecord: [String], isLocal: Bool) {
        (self.name, self.host, self.port, self.textRecord, self.isLocal) = (name, host, port, textRecord, isLocal)
    }
}
