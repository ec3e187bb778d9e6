import Crypto
import FoundationEssentials

/// A house's or a speaker's own identity: an Ed25519 key pair, made on its first start and kept
/// in its state directory (`IdentityKeyFile`). Its public half (`PeerKey`) is how the other
/// side knows it; a handshake signs with the private half (`SecureHandshake`).
///
/// Thread-safety: a value.
public struct IdentityKey: Sendable, CustomStringConvertible {
    private let privateKey: Curve25519.Signing.PrivateKey

    /// A new key from the system's generator.
    public static func random() -> IdentityKey { IdentityKey(privateKey: Curve25519.Signing.PrivateKey()) }

    private init(privateKey: Curve25519.Signing.PrivateKey) { self.privateKey = privateKey }

    /// Reads the text form of the private key (32 bytes, unpadded base64url).
    public init?(text: String) {
        guard let bytes = Base64URL.decode(trimming: text), bytes.count == 32,
              let key = try? Curve25519.Signing.PrivateKey(rawRepresentation: bytes) else { return nil }
        privateKey = key
    }

    /// The private key's text: what the key file holds.
    public var text: String { Base64URL.encode(Array(privateKey.rawRepresentation)) }

    public var publicKey: PeerKey { PeerKey(bytes: Array(privateKey.publicKey.rawRepresentation))! }

    /// Never the secret: an identity may end up in a log line through interpolation.
    public var description: String { "identity \(publicKey.fingerprint)" }

    /// An identity of its own for `label`, derived from this one (HKDF-SHA256): the same from
    /// the same key and label, and known only to whoever holds this key. The house gives one to
    /// each snapclient's room, which has no state directory of its own.
    public func derived(for label: String) -> IdentityKey {
        let seed = HKDF<SHA256>.deriveKey(inputKeyMaterial: SymmetricKey(data: privateKey.rawRepresentation),
                                          info: Array("tutti derived identity v1 ".utf8) + Array(label.utf8), outputByteCount: 32)
        guard let key = try? Curve25519.Signing.PrivateKey(rawRepresentation: seed.withUnsafeBytes { Array($0) }) else {
            preconditionFailure("32 bytes are always an Ed25519 seed")
        }
        return IdentityKey(privateKey: key)
    }

    public func signature(for message: [UInt8]) -> [UInt8] {
        // Signing fails only for a key BoringSSL cannot use, which `init` has refused.
        guard let signature = try? privateKey.signature(for: message) else { preconditionFailure("Ed25519 signing failed with a valid key") }
        return Array(signature)
    }
}
