import Crypto
import FoundationEssentials

/// The secret that lets a controller (`tutti ctl`, a script, the web UI, a phone) drive a house.
///
/// One per house, made on its first start (`ControllerTokenFile`): 32 random bytes, written as
/// 43 characters of unpadded base64url. It never crosses the house's own port in the clear:
/// - on the wire port, the house sends a fresh challenge in its `welcome` and the controller
///   answers with `proof(for:)`, an HMAC of the challenge keyed by the token, so a listener on
///   the LAN learns nothing it can replay;
/// - over HTTP it is sent as `Authorization: Bearer TOKEN` (the HTTP client's choice, as in Home
///   Assistant), or exchanged once at the login page for a session cookie (`sessionCookie`).
///
/// Over HTTP the token itself is sent in the clear (a bearer token, a login), as HTTP is; the
/// wire port never sends it.
///
/// Thread-safety: a value.
public struct ControllerToken: Sendable, Equatable, CustomStringConvertible {
    /// The secret's bytes.
    public let bytes: [UInt8]

    /// A token is this many bytes: 256 bits, beyond guessing.
    public static let byteCount = 32

    /// A new random token, from the system's generator.
    public static func random() -> ControllerToken {
        ControllerToken(bytes: SymmetricKey(size: .bits256).withUnsafeBytes { Array($0) })
    }

    private init(bytes: [UInt8]) { self.bytes = bytes }

    /// Reads the text form (surrounding white space ignored); nil when it is not a token.
    public init?(text: String) {
        guard let bytes = Base64URL.decode(trimming: text), bytes.count == Self.byteCount else { return nil }
        self.bytes = bytes
    }

    /// The text form: unpadded base64url, safe in a header, a cookie, a file and a shell.
    public var text: String { Base64URL.encode(bytes) }

    /// Never the secret itself: a token may end up in a log line through string interpolation.
    public var description: String { "controller token" }

    // MARK: The wire port's challenge

    /// A challenge length: 32 random bytes, never repeated in practice.
    public static let challengeByteCount = 32

    /// A fresh challenge for one connection.
    public static func challenge() -> [UInt8] {
        SymmetricKey(size: .bits256).withUnsafeBytes { Array($0) }
    }

    /// The controller's answer to `challenge`: HMAC-SHA256 keyed by the token, over a label and
    /// the challenge (the label keeps the proof from being valid in any other use of the key).
    ///
    /// `binding` is the secure channel's transcript hash (`SecureHandshake.Session.binding`): a
    /// fake house that relays a controller's handshake to the real one has a transcript of its
    /// own on each side, so the proof it is given is worth nothing on the connection it relays.
    public func proof(for challenge: [UInt8], binding: [UInt8]) -> [UInt8] {
        Array(HMAC<SHA256>.authenticationCode(for: Self.wireLabel + challenge + binding, using: key))
    }

    /// Whether `proof` answers `challenge` on the channel `binding` for this token, compared in
    /// constant time.
    public func accepts(proof: [UInt8], for challenge: [UInt8], binding: [UInt8]) -> Bool {
        HMAC<SHA256>.isValidAuthenticationCode(proof, authenticating: Self.wireLabel + challenge + binding, using: key)
    }

    // MARK: HTTP

    /// Whether `candidate` (a bearer token or what a login page received) is this token, in
    /// constant time.
    public func matches(text candidate: String) -> Bool {
        guard let other = ControllerToken(text: candidate) else { return false }
        // Compare MACs of both under one key: equal length, no early exit on the first
        // differing byte.
        let probe = SymmetricKey(size: .bits256)
        return HMAC<SHA256>.isValidAuthenticationCode(HMAC<SHA256>.authenticationCode(for: bytes, using: probe),
                                                      authenticating: other.bytes, using: probe)
    }

    /// How long a session cookie is good for: a year, also its `Max-Age`.
    public static let sessionLifetimeSeconds: Int64 = 365 * 24 * 3600

    /// A new session cookie's value for a browser that signed in at `now` (wall-clock seconds
    /// since 1970): when it was issued and 8 random bytes, and their HMAC under a key derived
    /// from the token. The house keeps no list of sessions, so they survive its restarts; each
    /// ends a year after it was issued, and all of them when the token is replaced.
    public func sessionCookie(issuedAt now: Int64 = Self.wallClockSeconds()) -> String {
        let payload = withUnsafeBytes(of: UInt64(max(now, 0)).bigEndian) { Array($0) }
            + withUnsafeBytes(of: UInt64.random(in: 0...UInt64.max)) { Array($0) }
        return Base64URL.encode(payload) + "." + Base64URL.encode(Array(HMAC<SHA256>.authenticationCode(for: payload, using: sessionKey)))
    }

    /// Whether `value` is a session cookie this token made, less than a year before `now`.
    public func acceptsSessionCookie(_ value: String, now: Int64 = Self.wallClockSeconds()) -> Bool {
        let parts = value.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 2, parts[0].utf8.count == 22, parts[1].utf8.count == 43,
              let payload = Base64URL.decode(String(parts[0])), let mac = Base64URL.decode(String(parts[1])), payload.count == 16,
              HMAC<SHA256>.isValidAuthenticationCode(mac, authenticating: payload, using: sessionKey) else { return false }
        let issued = Int64(truncatingIfNeeded: payload[0..<8].reduce(UInt64(0)) { $0 << 8 | UInt64($1) })
        // Five minutes of grace for a clock set back a little since.
        return issued <= now + 300 && now - issued < Self.sessionLifetimeSeconds
    }

    /// Seconds since 1970 by the wall clock, which cookies' lifetimes are counted in.
    public static func wallClockSeconds() -> Int64 { Int64(Date().timeIntervalSince1970) }

    private static let wireLabel = Array("tutti controller proof v2".utf8)

    private var key: SymmetricKey { SymmetricKey(data: bytes) }

    /// Sessions' own key, so that a cookie is not a proof on the wire, nor the reverse.
    private var sessionKey: SymmetricKey {
        HKDF<SHA256>.deriveKey(inputKeyMaterial: key, info: Array("tutti web session v1".utf8), outputByteCount: 32)
    }
}

/// Unpadded base64url (RFC 4648 §5), the token's and the cookie's text.
enum Base64URL {
    static func encode(_ bytes: [UInt8]) -> String {
        var text = Data(bytes).base64EncodedString()
        text = String(text.map { $0 == "+" ? "-" : $0 == "/" ? "_" : $0 })
        while text.hasSuffix("=") { text.removeLast() }
        return text
    }

    /// The bytes of canonical text only: the unused low bits of the last character must be
    /// zero, so that one value has one spelling (a cookie or token cannot be varied and still
    /// accepted).
    static func decode(_ text: String) -> [UInt8]? {
        guard text.utf8.allSatisfy({ $0.isBase64URL }) else { return nil }
        var standard = String(text.map { $0 == "-" ? "+" : $0 == "_" ? "/" : $0 })
        while standard.utf8.count % 4 != 0 { standard.append("=") }
        guard let bytes = Data(base64Encoded: standard).map(Array.init), encode(bytes) == text else { return nil }
        return bytes
    }

    /// The bytes of a key or token as a file or a person gives it: white space around the
    /// text ignored.
    static func decode(trimming text: String) -> [UInt8]? {
        decode(String(text.drop(while: \.isWhitespace).reversed().drop(while: \.isWhitespace).reversed()))
    }
}

private extension UInt8 {
    var isBase64URL: Bool {
        (UInt8(ascii: "A")...UInt8(ascii: "Z")).contains(self) || (UInt8(ascii: "a")...UInt8(ascii: "z")).contains(self)
            || (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(self) || self == UInt8(ascii: "-") || self == UInt8(ascii: "_")
    }
}
