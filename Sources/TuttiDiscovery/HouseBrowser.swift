/// Looks for houses on the network through the Avahi daemon (`ServiceBrowser`, `_tutti._tcp`).
public enum HouseBrowser {
    /// The houses announced now (`ServiceBrowser.browse`).
    public static func browse(timeoutSeconds: Double = 2) throws(DiscoveryError) -> [DiscoveredHouse] {
        try ServiceBrowser.browse(serviceType: HouseAnnouncement.serviceType, timeoutSeconds: timeoutSeconds).map { service in
            let fields = HouseAnnouncement.fields(ofTextRecord: service.textRecord)
            return DiscoveredHouse(name: service.name, host: service.host, port: service.port, httpPort: fields.httpPort,
                                   protocolVersion: fields.protocolVersion, isLocal: service.isLocal)
        }
    }
}
