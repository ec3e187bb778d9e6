import Crypto
import FoundationEssentials

/// The public half of a house's or a speaker's identity key (Ed25519): what the other side
/// remembers once a speaker is admitted, and what a handshake proves possession of.
///
/// Thread-safety: a value.
public struct PeerKey: Sendable, Hashable, CustomStringConvertible {
    /// The 32 bytes of the Ed25519 public key.
    public let bytes: [UInt8]

    public init?(bytes: [UInt8]) {
        guard bytes.count == 32, (try? Curve25519.Signing.PublicKey(rawRepresentation: bytes)) != nil else { return nil }
        self.bytes = bytes
    }

    /// Reads the text form (unpadded base64url, white space around it ignored).
    public init?(text: String) {
        guard let bytes = Base64URL.decode(trimming: text) else { return nil }
        self.init(bytes: bytes)
    }

    /// Unpadded base64url: 43 characters.
    public var text: String { Base64URL.encode(bytes) }

    /// A short name for logs and lists: the first 8 characters of its text.
    public var fingerprint: String { String(text.prefix(8)) }

    public var description: String { "key \(fingerprint)" }

    /// Whether `signature` signs `message` with this key's private half.
    func isValidSignature(_ signature: [UInt8], for message: [UInt8]) -> Bool {
        guard let key = try? Curve25519.Signing.PublicKey(rawRepresentation: bytes) else { return false }
        return key.isValidSignature(signature, for: message)
    }
}

/// The six digits a waiting speaker and its house both show for one connection, so that whoever
/// admits it can see that the speaker they admit is the one in front of them (and its log), not a
/// stranger's of the same name, nor a speaker that reached a fake house relaying it. Made from the
/// connection's transcript and the speaker's committed nonce (`SecureHandshake`): neither a
/// stranger nor a house in the middle can choose keys that show a given code; each try is a
/// connection, and a code is new at every connection.
public enum AdmissionCode {
    public static func code(transcript: [UInt8], nonce: [UInt8]) -> String {
        let digest = Array(SHA256.hash(data: Array("tutti admission code v2".utf8) + transcript + nonce))
        let number = digest.prefix(8).reduce(UInt64(0)) { $0 << 8 | UInt64($1) } % 1_000_000
        let digits = String(number)
        let padded = String(repeating: "0", count: 6 - digits.count) + digits
        return padded.prefix(3) + " " + padded.suffix(3)
    }

    /// Whether `typed` is `code` as a person types it: with or without its space (or a dash).
    public static func matches(_ typed: String, _ code: String) -> Bool {
        let given = digits(typed)
        return given.count == 6 && given == digits(code)
    }

    /// Whether `text` reads as a code rather than a name: six digits, spaced or not.
    public static func looksLikeCode(_ text: String) -> Bool {
        let given = digits(text)
        return given.count == 6 && given.allSatisfy(\.isASCII) && given.allSatisfy(\.isNumber)
    }

    private static func digits(_ text: String) -> String { text.filter { !$0.isWhitespace && $0 != "-" } }
}
