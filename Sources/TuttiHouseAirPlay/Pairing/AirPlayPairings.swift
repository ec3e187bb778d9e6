import Synchronization
import TuttiProtocol

/// The AirPlay senders paired with a PIN (pair-setup's M5): each one's pairing identifier and
/// Ed25519 public key, against which pair-verify checks it on every later connection. Kept in
/// a file of the state directory (`airplay-pairings.json`, 0600, replaced whole), so that a
/// sender stays paired across restarts; in memory only when no file is given (tests).
///
/// Thread-safety: any thread (a mutex).
public final class AirPlayPairings: Sendable {
    public struct Pairing: Codable, Sendable, Equatable {
        /// The sender's pairing identifier and public key, hex.
        public var identifier: String
        public var publicKey: String
    }

    /// A household pairs its senders, not thousands: the oldest is forgotten past this.
    public static let maximumPairings = 64

    private let path: String?
    private let pairings: Mutex<[Pairing]>
    /// The one PIN outstanding, house-wide: its digits, when it expires, and the connection it
    /// was shown for (only that one may use it, once). A new PIN cancels it.
    private struct Outstanding { var pin: String; var expires: Int64; var holder: UInt64 }
    private let outstanding = Mutex<Outstanding?>(nil)
    /// Wrong PINs in a row, house-wide, and when the last one was tried.
    private let wrongPINs = Mutex<(count: Int, last: Int64)>((0, 0))
    /// How long a PIN shown is good for.
    public static let pinLifetimeNanoseconds: Int64 = 120_000_000_000

    /// Wrong PINs in a row taken before each further PIN waits (`pinBackoff`).
    public static let freeWrongPINs = 3
    /// The longest wait for the next PIN.
    public static let maximumBackoffNanoseconds: Int64 = 3_600_000_000_000

    /// Reads the pairings at `path` (none yet when it does not exist).
    public init(path: String?) throws(StateFile.Failure) {
        self.path = path
        var known: [Pairing] = []
        if let path, StateFile.exists(path) {
            known = try StateFile.readJSON([Pairing].self, from: path, what: "the AirPlay pairings",
                                           remedy: "remove it to forget every paired sender")
        }
        pairings = Mutex(known)
    }

    public var all: [Pairing] { pairings.withLock { $0 } }

    /// The public key `identifier` paired with, if it did.
    public func publicKey(for identifier: [UInt8]) -> [UInt8]? {
        let id = Hex.encode(identifier)
        return pairings.withLock { $0.first { $0.identifier == id } }.flatMap { Hex.decode($0.publicKey) }
    }

    /// Remembers `identifier` with `publicKey` (again, if it paired before), and writes the file
    /// (under the lock: two receivers' pairings at once are written in the order they were kept).
    public func add(identifier: [UInt8], publicKey: [UInt8]) throws(StateFile.Failure) {
        let pairing = Pairing(identifier: Hex.encode(identifier), publicKey: Hex.encode(publicKey))
        let path = self.path
        try pairings.withLock { (known: inout [Pairing]) throws(StateFile.Failure) -> Void in
            var updated = known
            updated.removeAll { $0.identifier == pairing.identifier }
            updated.append(pairing)
            if updated.count > Self.maximumPairings { updated.removeFirst(updated.count - Self.maximumPairings) }
            if let path { try StateFile.replaceJSON(path, with: updated, what: "the AirPlay pairings") }
            known = updated
        }
    }

    /// A new PIN for connection `holder`, cancelling any other; or, while wrong PINs make the
    /// next wait (`pinBackoff`), how long (ns).
    public func issuePIN(to holder: UInt64, now: Int64) -> Result<String, PINWait> {
        if let wait = pinBackoff(now: now) { return .failure(PINWait(nanoseconds: wait)) }
        var generator = SystemRandomNumberGenerator()
        let number = Int.random(in: 0...9999, using: &generator)
        let pin = String(repeating: "0", count: 4 - String(number).count) + String(number)
        outstanding.withLock { $0 = Outstanding(pin: pin, expires: now + Self.pinLifetimeNanoseconds, holder: holder) }
        return .success(pin)
    }

    public struct PINWait: Error, Sendable { public var nanoseconds: Int64 }

    /// The PIN shown for `holder`, if it is still outstanding, unexpired and no wait is due; and
    /// when it expires.
    public func pin(for holder: UInt64, now: Int64) -> (pin: String, expires: Int64)? {
        guard pinBackoff(now: now) == nil else { return nil }
        return outstanding.withLock { current in
            guard let current, current.holder == holder, current.expires > now else { return nil }
            return (current.pin, current.expires)
        }
    }

    /// `holder`'s PIN was tried (right or wrong): it is gone.
    public func spendPIN(of holder: UInt64) {
        outstanding.withLock { if $0?.holder == holder { $0 = nil } }
    }

    /// A wrong PIN was given (at `now`, the receiver's clock).
    public func noteWrongPIN(now: Int64) {
        wrongPINs.withLock { $0 = ($0.count + 1, now) }
    }

    /// A right PIN was given: the count starts again.
    public func noteRightPIN() {
        wrongPINs.withLock { $0 = (0, 0) }
    }

    /// How long (ns) the next PIN must wait at `now`, if at all: after `freeWrongPINs` wrong ones
    /// in a row, 1 s, then twice as long after each further one, up to an hour. A PIN is one
    /// guess in 10 000, so a stranger guessing cannot get far.
    public func pinBackoff(now: Int64) -> Int64? {
        let (count, last) = wrongPINs.withLock { $0 }
        guard count >= Self.freeWrongPINs else { return nil }
        // 2^12 s is past the hour already; a larger shift would overflow (the bits shifted out
        // and the wait negative, that is none).
        let doublings = min(count - Self.freeWrongPINs, 12)
        let wait = min(Self.maximumBackoffNanoseconds, Int64(1_000_000_000) << doublings)
        let left = last + wait - now
        return left > 0 ? left : nil
    }
}

/// What a receiver needs to pair senders with a PIN: its own long-term Ed25519 identity and
/// pairing identifier (what a sender remembers it by), the pairings, and how to show a PIN to
/// the household (the house logs it).
public struct AirPlayAccessory: Sendable {
    public var identity: IdentityKey
    public var identifier: [UInt8]
    public var pairings: AirPlayPairings
    /// Called with a new PIN and the address of the sender that asked for it.
    public var showPIN: @Sendable (_ pin: String, _ sender: String) -> Void

    public init(identity: IdentityKey, identifier: [UInt8], pairings: AirPlayPairings, showPIN: @escaping @Sendable (String, String) -> Void) {
        self.identity = identity
        self.identifier = identifier
        self.pairings = pairings
        self.showPIN = showPIN
    }

    /// A group's receiver of the house with identity `house`: its own identity derived from the
    /// house's and the group's id (the same after a restart, so a paired sender is verified
    /// again), its identifier the device id the announcement gives, as a MAC address.
    public static func group(_ group: UInt32, of house: IdentityKey, pairings: AirPlayPairings, showPIN: @escaping @Sendable (String, String) -> Void) -> AirPlayAccessory {
        let identity = groupIdentity(group, of: house)
        let mac = deviceID(of: identity).map { Hex.encode([$0]).uppercased() }.joined(separator: ":")
        return AirPlayAccessory(identity: identity, identifier: Array(mac.utf8), pairings: pairings, showPIN: showPIN)
    }

    public static func groupIdentity(_ group: UInt32, of house: IdentityKey) -> IdentityKey {
        house.derived(for: "airplay group \(group)")
    }

    /// Six bytes from the identity's public key, as a locally administered unicast MAC address:
    /// what AirPlay's device id (the announcement's name and `deviceid`) is.
    public static func deviceID(of identity: IdentityKey) -> [UInt8] {
        var id = Array(identity.publicKey.bytes.prefix(6))
        id[0] = (id[0] & 0xFC) | 0x02
        return id
    }
}
