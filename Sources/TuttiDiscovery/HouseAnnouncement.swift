/// What a house announces on the network, and what a room or controller reads back: a DNS-SD
/// service of type `_tutti._tcp` on the house's TCP port (speakers and `ctl` connect there), with
/// its wire protocol version and HTTP port in TXT; and `_http._tcp` for its web UI.
///
/// Pure data: the TXT encoding lives here so that it is tested without a daemon.
public struct HouseAnnouncement: Sendable, Equatable {
    /// The DNS-SD service type of a house.
    public static let serviceType = "_tutti._tcp"
    /// The DNS-SD service type of its web UI (found by any browser of `_http._tcp`).
    public static let webServiceType = "_http._tcp"

    /// The house's name on the network ("Tutti on livingroom-pi"); Avahi may append " #2" on a
    /// collision.
    public var name: String
    /// The TCP (and UDP clock-sync) port speakers and controllers connect to.
    public var port: Int
    /// The HTTP API's port, if it serves one.
    public var httpPort: Int?
    /// The wire protocol it speaks (`WireProtocol.version`).
    public var protocolVersion: Int
    /// Its groups' AirPlay receivers, announced beside it (`_raop._tcp`).
    public var airPlay: [AirPlayAnnouncement] = []

    public init(name: String, port: Int, httpPort: Int?, protocolVersion: Int) {
        self.name = name
        self.port = port
        self.httpPort = httpPort
        self.protocolVersion = protocolVersion
    }

    /// TXT record entries, `key=value`: `txtvers=1`, `proto=N`, and `http=PORT` when it serves one.
    public var textRecord: [String] {
        var entries = ["txtvers=1", "proto=\(protocolVersion)"]
        if let httpPort { entries.append("http=\(httpPort)") }
        return entries
    }

    /// Reads the TXT entries of a found service; unknown keys are ignored, and a missing or
    /// malformed `proto` reads as 0 (a house too old or too new to name its protocol).
    public static func fields(ofTextRecord entries: [String]) -> (protocolVersion: Int, httpPort: Int?) {
        var protocolVersion = 0
        var httpPort: Int?
        for entry in entries {
            guard let equals = entry.firstIndex(of: "=") else { continue }
            let key = entry[..<equals], value = entry[entry.index(after: equals)...]
            switch key {
            case "proto": protocolVersion = Int(value) ?? 0
            case "http": httpPort = Int(value).flatMap { (1...65535).contains($0) ? $0 : nil }
            default: break
            }
        }
        return (protocolVersion, httpPort)
    }
}
