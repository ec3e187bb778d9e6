import Foundation

/// What the house remembers across restarts, in `<state-dir>/house.json`: the queue, the room
/// volumes and the group. Written whenever it changes; a damaged file is reported and ignored.
struct HouseState: Codable, Equatable {
    var queue: [String] = []
    var volumes: [String: Int] = [:]
    var group: [String]? = nil

    static func load(from directory: String?) -> (HouseState, String?) {
        guard let directory else { return (HouseState(), nil) }
        let path = directory + "/house.json"
        guard let data = FileManager.default.contents(atPath: path) else { return (HouseState(), nil) }
        do {
            return (try JSONDecoder().decode(HouseState.self, from: data), nil)
        } catch {
            return (HouseState(), "\(path): unreadable state (\(error.localizedDescription)); starting empty")
        }
    }

    func save(to directory: String?) -> String? {
        guard let directory else { return nil }
        do {
            try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
            let encoder = JSONEncoder()
            encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
            try encoder.encode(self).write(to: URL(fileURLWithPath: directory + "/house.json"), options: .atomic)
            return nil
        } catch {
            return "\(directory)/house.json: cannot save state (\(error.localizedDescription))"
        }
    }
}
