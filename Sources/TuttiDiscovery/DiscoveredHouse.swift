/// A house found on the network by `HouseBrowser`.
public struct DiscoveredHouse: Sendable, Equatable, Codable {
    /// Its announced name.
    public var name: String
    /// The address to connect to (numeric; IPv4 preferred when it has both).
    public var host: String
    public var port: Int
    public var httpPort: Int?
    /// Its wire protocol version, 0 if it did not say.
    public var protocolVersion: Int
    /// Announced by this machine.
    public var isLocal: Bool

    public init(name: String, host: String, port: Int, httpPort: Int?, protocolVersion: Int, isLocal: Bool) {
        self.name = name
        self.host = host
        self.port = port
        self.httpPort = httpPort
        self.protocolVersion = protocolVersion
        self.isLocal = isLocal
    }

    /// `HOST:PORT`, bracketed for IPv6.
    public var address: String { host.contains(":") ? "[\(host)]:\(port)" : "\(host):\(port)" }

    /// `'Living room' at 10.0.0.2:7700`.
    public var summary: String { "'\(name)' at \(address)" }
}
