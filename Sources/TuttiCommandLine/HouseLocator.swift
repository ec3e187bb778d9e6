import ArgumentParser
import TuttiDiscovery
import TuttiProtocol

/// Where a speaker or `ctl` connects: `--server` if given, else the house found through Avahi
/// (the only one announced, or the one `--house` names).
public enum HouseLocator {
    /// For `tutti speaker`: keeps looking until a house appears (a room often starts before its
    /// house), saying so once. Several houses and no `--house`, or no Avahi daemon, end the
    /// command with the reason.
    public static func waitForHouse(named name: String?, program: String) async throws -> HostPort {
        var saidLooking = false
        while true {
            let houses: [DiscoveredHouse]
            do { houses = try HouseBrowser.browse() } catch {
                Terminal.standardError("\(program): \(error); or pass --server HOST:PORT\n")
                throw ExitCode(2)
            }
            let matching = name.map { name in houses.filter { $0.name == name } } ?? houses
            if !matching.isEmpty {
                return try choose(among: houses, named: name, program: program)
            }
            if !saidLooking {
                Terminal.standardError("\(program): looking for \(name.map { "the house '\($0)'" } ?? "a house") on the network (Avahi); start `tutti server`, or pass --server HOST:PORT\n")
                saidLooking = true
            }
            try await Task.sleep(for: .seconds(1))
        }
    }

    /// For `tutti ctl`: one look. With no house announced, the house on this machine's default
    /// port (one that listens on loopback only is not announced).
    public static func findHouse(named name: String?, program: String) throws -> HostPort {
        let houses: [DiscoveredHouse]
        do { houses = try HouseBrowser.browse() } catch {
            if name != nil {
                Terminal.standardError("\(program): \(error); or pass --server HOST:PORT\n")
                throw ExitCode(2)
            }
            return localDefault
        }
        if houses.isEmpty && name == nil { return localDefault }
        return try choose(among: houses, named: name, program: program)
    }

    public static let localDefault = HostPort(argument: "127.0.0.1:7700")!

    private static func choose(among houses: [DiscoveredHouse], named name: String?, program: String) throws -> HostPort {
        do {
            let house = try HouseChoice.choose(among: houses, named: name, protocolVersion: Int(WireProtocol.version))
            return HostPort(argument: house.address)!
        } catch {
            Terminal.standardError("\(program): \(error)\n")
            throw ExitCode(2)
        }
    }
}
