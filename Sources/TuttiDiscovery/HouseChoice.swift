/// Picks the house a speaker or `ctl` without `--server` connects to, from those found: the only
/// one, or the one `--house NAME` names. Otherwise a one-line reason that lists what was found
/// and says how to choose.
public enum HouseChoice {
    public static func choose(among houses: [DiscoveredHouse], named name: String?, protocolVersion: Int) throws(DiscoveryError) -> DiscoveredHouse {
        let candidates: [DiscoveredHouse]
        if let name {
            candidates = houses.filter { $0.name == name }
            guard !candidates.isEmpty else {
                if houses.isEmpty { throw DiscoveryError("no house named '\(name)' on this network (none announced through Avahi); start `tutti server`, or give its address with --server HOST:PORT") }
                throw DiscoveryError("no house named '\(name)' on this network; found \(list(houses)); choose one with --house NAME or --server HOST:PORT")
            }
        } else {
            candidates = houses
        }
        guard let house = candidates.first else {
            throw DiscoveryError("no house announced on this network (_tutti._tcp through Avahi); start `tutti server`, or give its address with --server HOST:PORT")
        }
        guard candidates.count == 1 else {
            throw DiscoveryError("\(candidates.count) houses on this network: \(list(candidates)); choose one with --house NAME or --server HOST:PORT")
        }
        guard house.protocolVersion == protocolVersion else {
            throw DiscoveryError("house \(house.summary) speaks protocol \(house.protocolVersion), this tutti \(protocolVersion): run the same version on both")
        }
        return house
    }

    private static func list(_ houses: [DiscoveredHouse]) -> String {
        houses.map(\.summary).joined(separator: ", ")
    }
}

/// Why discovery found no house to use, in one line for the user.
public struct DiscoveryError: Error, CustomStringConvertible, Equatable {
    public var description: String
    public init(_ description: String) { self.description = description }
}
