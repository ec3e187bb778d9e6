import FoundationEssentials
#if canImport(Glibc)
import Glibc
#endif
import Synchronization
import TuttiProtocol

/// The house a speaker belongs to: the identity key of the house that admitted it, remembered
/// in `<state-dir>/house.json`. Once it has one, the speaker talks to no other house: a house
/// whose handshake proves another key (another house at the address, a fake `_tutti._tcp`
/// announcement) is refused before anything is sent to it or played from it.
///
/// A speaker that belongs to no house yet talks to the first it reaches, and waits there to be
/// admitted; the code in its log is the one the house shows beside it.
///
/// Thread-safety: all members may be called from any thread.
public final class HouseMembership: Sendable {
    private struct File: Codable {
        var name: String
        var key: String
        var admitted: String
    }

    public static let fileName = "house.json"

    /// Where it is kept; nil keeps it in memory (a simulated room, a test's).
    public let path: String?
    private let house = Mutex<(key: PeerKey, name: String)?>(nil)

    /// A membership kept in `path` (read now), or in memory only.
    public init(path: String?) throws(StateFile.Failure) {
        self.path = path
        guard let path, StateFile.exists(path) else { return }
        let remedy = "remove it, and admit the speaker to its house again"
        let file = try StateFile.readJSON(File.self, from: path, what: "this speaker's house", remedy: remedy)
        guard let key = PeerKey(text: file.key) else {
            throw StateFile.Failure(description: "\(path): \(file.key.debugDescription) is not a house's key; \(remedy)")
        }
        house.withLock { $0 = (key, file.name) }
    }

    /// A membership in memory: belonging to `house` from the start, or to none yet.
    public init(house key: PeerKey? = nil) {
        path = nil
        if let key { house.withLock { $0 = (key, "") } }
    }

    /// The house's key, once admitted.
    public var houseKey: PeerKey? { house.withLock { $0?.key } }

    /// Nil when the house that proved `key` is one to talk to; else why not, in one line.
    public func refusal(for key: PeerKey, at address: String) -> String? {
        guard let own = house.withLock({ $0 }), own.key != key else { return nil }
        let named = own.name.isEmpty ? "" : " '\(own.name)'"
        return "this speaker belongs to the house\(named) of key \(own.key.fingerprint), and the house at \(address) is another (key \(key.fingerprint)): staying silent"
            + (path.map { "; to move it to that house, delete \($0) and admit it there" } ?? "")
    }

    /// The house that proved `key` admitted this speaker: remember it. Returns true when it
    /// is a house it did not belong to (worth a line), false when it already did.
    @discardableResult
    public func admitted(by key: PeerKey, name: String) throws(StateFile.Failure) -> Bool {
        let (isNew, changed) = house.withLock { current -> (Bool, Bool) in
            defer { current = (key, name) }
            return (current?.key != key, current?.key != key || current?.name != name)
        }
        guard changed, let path else { return isNew }
        try StateFile.replaceJSON(path, with: File(name: name, key: key.text, admitted: Date.now.formatted(.iso8601)), what: "this speaker's house")
        return isNew
    }
}
