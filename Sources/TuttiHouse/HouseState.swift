import Foundation
import TuttiProtocol

/// The queue, the room volumes and the group: what the house remembers across restarts, kept
/// in memory on the house's loop and stored by `HouseStore`.
struct HouseState: Codable, Equatable {
    var queue: [String] = []
    var volumes: [String: Int] = [:]
    var group: [String]? = nil
    /// Latencies a controller set (`room-latency`), by room name, in nanoseconds: they replace
    /// what the rooms' speakers say.
    var latencies: [String: Int64] = [:]
    /// Names a controller gave rooms (`room-rename`): the name a speaker says in its hello → the
    /// room's name.
    var roomNames: [String: String] = [:]
    /// How the queue plays on (`HousePlayModes.swift`).
    var playModes = PlayModes()
    /// With `random`: the queue's tags in the order they play.
    var randomOrder: [Int] = []

    /// `house.json` knew the first three.
    private enum CodingKeys: String, CodingKey { case queue, volumes, group }

    /// Reads the `house.json` older houses kept (imported once into the store).
    static func loadJSON(path: String) -> (HouseState, String?) {
        guard let data = FileManager.default.contents(atPath: path) else { return (HouseState(), nil) }
        do {
            return (try JSONDecoder().decode(HouseState.self, from: data), nil)
        } catch {
            return (HouseState(), "\(path): unreadable state (\(error.localizedDescription)); not imported")
        }
    }
}
