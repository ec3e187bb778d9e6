import Crypto
import FoundationEssentials

/// The handshake that opens every connection to a house's wire port, before any `WireMessage`:
/// each side makes a fresh X25519 key, the house signs the exchange with its identity key, and
/// both derive the connection's keys from the shared secret and the whole exchange (HKDF-SHA256).
/// Everything after it travels in `SecureRecord`s (ChaCha20-Poly1305). docs/SECURITY.md has the
/// picture.
///
///     client → house   ClientHello:  "TTSC" · version 1 · role · client's X25519 key ·
///                                    SHA-256 of a random nonce (its commitment)           (70 B)
///     house → client   HouseHello:   house's X25519 key · house's Ed25519 key ·
///                                    its signature over the transcript                    (128 B)
///     client → house   (sealed) a speaker's Ed25519 key, its signature over the transcript,
///                      and the nonce; a controller's is empty, it proves the controller token
///                      later, over the same transcript (`binding`)
///
/// The transcript hash binds both hellos: a relay that passes one side's messages on cannot
/// make the other side's keys or signatures fit.
///
/// The admission code both sides show (`AdmissionCode`) is made from the transcript and the
/// nonce, which the speaker committed to before it saw the house's key and revealed after: a
/// house in the middle, a speaker to one side and a speaker to the real house on the other,
/// cannot choose its keys to make the two codes match (it learns the speaker's nonce only after
/// its own key is fixed, and the real house's key only after its commitment is), so the codes
/// a user compares match by chance alone, one in a million.
public enum SecureHandshake {
    public static let magic: [UInt8] = Array("TTSC".utf8)
    public static let version: UInt8 = 1
    public static let clientHelloSize = 70
    public static let houseHelloSize = 128
    /// A speaker's sealed identity: a key, a signature and the nonce.
    static let identityRecordSize = 128

    /// The connection's keys and what the handshake established, handed to the handlers above
    /// the secure channel as a user event once it is open.
    public struct Session: Sendable {
        public let role: WireMessage.Hello.Role
        /// The house's identity, proved by its signature.
        public let houseKey: PeerKey
        /// A speaker's identity, proved by its signature; nil for a controller.
        public let speakerKey: PeerKey?
        /// The transcript hash: what a controller's proof of the token is bound to.
        public let binding: [UInt8]
        /// The key and id of this connection's clock sync (`ClockSyncPacket`).
        public let clock: ClockSyncKey
        /// A speaker's admission code on this connection (`AdmissionCode`); empty for a controller.
        public let admissionCode: String
    }

    struct Keys {
        var clientToHouse: SymmetricKey
        var houseToClient: SymmetricKey
        var clock: ClockSyncKey
    }

    private static let transcriptLabel = Array("tutti secure channel v1".utf8)
    private static let houseSignatureLabel = Array("tutti house signature v1".utf8)
    private static let speakerSignatureLabel = Array("tutti speaker signature v1".utf8)
    private static let keysLabel = Array("tutti secure channel v1 keys".utf8)

    static func clientHello(role: WireMessage.Hello.Role, ephemeral: Curve25519.KeyAgreement.PrivateKey, nonce: [UInt8]) -> [UInt8] {
        magic + [version, role.rawValue] + Array(ephemeral.publicKey.rawRepresentation) + Array(SHA256.hash(data: nonce))
    }

    /// A fresh nonce to commit to.
    static func nonce() -> [UInt8] { SymmetricKey(size: .bits256).withUnsafeBytes { Array($0) } }

    /// A client's hello: its role and X25519 key, or why it is not one.
    static func parseClientHello(_ bytes: [UInt8]) throws(SecureChannelError) -> (role: WireMessage.Hello.Role, key: Curve25519.KeyAgreement.PublicKey) {
        guard bytes.count == clientHelloSize else { throw SecureChannelError("a client hello of \(bytes.count) bytes") }
        if bytes[0] == 0x54, bytes[1] == 0x54, bytes[2] != magic[2] {
            // "TT" and a version byte: an unencrypted client of wire protocol 6 or older.
            throw SecureChannelError("an unencrypted client of wire protocol \(bytes[2]) (this house speaks \(WireProtocol.version), encrypted: update it)")
        }
        guard Array(bytes[0..<4]) == magic else { throw SecureChannelError("not a Tutti client (no secure channel hello)") }
        guard bytes[4] == version else { throw SecureChannelError("secure channel version \(bytes[4]) not supported (this house speaks \(version))") }
        guard let role = WireMessage.Hello.Role(rawValue: bytes[5]) else { throw SecureChannelError("a client hello of unknown role \(bytes[5])") }
        guard let key = try? Curve25519.KeyAgreement.PublicKey(rawRepresentation: bytes[6..<38]) else { throw SecureChannelError("a client hello with an invalid key") }
        return (role, key)
    }

    static func transcript(clientHello: [UInt8], houseEphemeral: [UInt8], houseKey: PeerKey) -> [UInt8] {
        Array(SHA256.hash(data: transcriptLabel + clientHello + houseEphemeral + houseKey.bytes))
    }

    /// The house's answer to `clientHello`, and the connection's transcript and keys.
    static func houseHello(answering clientHello: [UInt8], clientKey: Curve25519.KeyAgreement.PublicKey, identity: IdentityKey)
        throws(SecureChannelError) -> (hello: [UInt8], transcript: [UInt8], keys: Keys) {
        let ephemeral = Curve25519.KeyAgreement.PrivateKey()
        let ephemeralBytes = Array(ephemeral.publicKey.rawRepresentation)
        let transcript = transcript(clientHello: clientHello, houseEphemeral: ephemeralBytes, houseKey: identity.publicKey)
        let signature = identity.signature(for: houseSignatureLabel + transcript)
        let keys = try derive(ephemeral, clientKey, transcript)
        return (ephemeralBytes + identity.publicKey.bytes + signature, transcript, keys)
    }

    /// Checks the house's hello against the client's own; its identity, the transcript and keys.
    static func readHouseHello(_ bytes: [UInt8], clientHello: [UInt8], ephemeral: Curve25519.KeyAgreement.PrivateKey)
        throws(SecureChannelError) -> (houseKey: PeerKey, transcript: [UInt8], keys: Keys) {
        guard bytes.count == houseHelloSize else { throw SecureChannelError("a house hello of \(bytes.count) bytes") }
        let houseEphemeral = Array(bytes[0..<32])
        guard let houseKey = PeerKey(bytes: Array(bytes[32..<64])) else { throw SecureChannelError("the house's identity key is not a valid Ed25519 key") }
        let transcript = transcript(clientHello: clientHello, houseEphemeral: houseEphemeral, houseKey: houseKey)
        guard houseKey.isValidSignature(Array(bytes[64..<128]), for: houseSignatureLabel + transcript) else {
            throw SecureChannelError("the house's signature does not verify: not the house it says it is")
        }
        guard let peer = try? Curve25519.KeyAgreement.PublicKey(rawRepresentation: houseEphemeral) else {
            throw SecureChannelError("the house's hello has an invalid key")
        }
        return (houseKey, transcript, try derive(ephemeral, peer, transcript))
    }

    /// A speaker's sealed identity: its key, its signature over the transcript, and the nonce
    /// its hello committed to.
    static func speakerIdentity(_ identity: IdentityKey, transcript: [UInt8], nonce: [UInt8]) -> [UInt8] {
        identity.publicKey.bytes + identity.signature(for: speakerSignatureLabel + transcript) + nonce
    }

    /// The speaker's identity and nonce, if its signature holds and the nonce is the one its
    /// hello committed to.
    static func readSpeakerIdentity(_ bytes: [UInt8], transcript: [UInt8], clientHello: [UInt8]) throws(SecureChannelError) -> (key: PeerKey, nonce: [UInt8]) {
        guard bytes.count == identityRecordSize, let key = PeerKey(bytes: Array(bytes[0..<32])) else {
            throw SecureChannelError("a speaker's identity of \(bytes.count) bytes")
        }
        guard key.isValidSignature(Array(bytes[32..<96]), for: speakerSignatureLabel + transcript) else {
            throw SecureChannelError("the speaker's signature does not verify")
        }
        let nonce = Array(bytes[96..<128])
        guard Array(SHA256.hash(data: nonce)) == Array(clientHello[38..<70]) else {
            throw SecureChannelError("the speaker's nonce is not the one its hello committed to")
        }
        return (key, nonce)
    }

    private static func derive(_ ephemeral: Curve25519.KeyAgreement.PrivateKey, _ peer: Curve25519.KeyAgreement.PublicKey,
                               _ transcript: [UInt8]) throws(SecureChannelError) -> Keys {
        // BoringSSL refuses a peer key of small order (an all-zero secret), which would make the
        // keys known to anyone.
        guard let shared = try? ephemeral.sharedSecretFromKeyAgreement(with: peer) else {
            throw SecureChannelError("a key agreement with a weak key")
        }
        let material = shared.hkdfDerivedSymmetricKey(using: SHA256.self, salt: transcript, sharedInfo: keysLabel, outputByteCount: 104)
            .withUnsafeBytes { Array($0) }
        let session = material[96..<104].reduce(UInt64(0)) { $0 << 8 | UInt64($1) }
        return Keys(clientToHouse: SymmetricKey(data: material[0..<32]), houseToClient: SymmetricKey(data: material[32..<64]),
                    clock: ClockSyncKey(sessionID: session, key: SymmetricKey(data: material[64..<96])))
    }
}

/// Why a secure channel failed: one line. The connection is closed, nothing else.
public struct SecureChannelError: Error, Sendable, Equatable, CustomStringConvertible {
    public let reason: String
    /// Set when the client refused the house it reached (a speaker admitted to another house):
    /// not a fault of the network, and worth saying once rather than at every retry.
    public let isRefusedHouse: Bool
    public init(_ reason: String, isRefusedHouse: Bool = false) {
        self.reason = reason
        self.isRefusedHouse = isRefusedHouse
    }
    public var description: String { reason }
}

/// One connection's clock-sync key: its id (which the house looks the key up by) and the key
/// that authenticates its requests and the house's replies (`ClockSyncPacket`).
public struct ClockSyncKey: Sendable {
    public let sessionID: UInt64
    public let key: SymmetricKey
    public init(sessionID: UInt64, key: SymmetricKey) {
        self.sessionID = sessionID
        self.key = key
    }
}
