import Crypto
import Synchronization
import TuttiProtocol

/// The receiver's side of pairing on one RTSP connection, HomeKit's pair-setup and pair-verify
/// as AirPlay 2 senders run them (docs/AIRPLAY.md):
///
/// - **Transient** pair-setup (M1–M4, flag 0x10), what senders run with a receiver that
///   announces `SupportsCoreUtilsPairingAndEncryption`: SRP-6a with the fixed PIN 3939 proves
///   nothing about the sender; it gives a session key neither side sent, from which the
///   connection's and the audio's keys are derived.
/// - **Pair-setup with a PIN** (M1–M6): `POST /pair-pin-start` makes the receiver show a new PIN
///   (one try, two minutes); SRP-6a with it proves the sender was told it; M5 and M6 exchange the
///   two sides' Ed25519 identities, signed over keys derived from the session, and the sender's
///   is kept (`AirPlayPairings`). The connection stays unencrypted (the sender closes it).
/// - **Pair-verify** (M1–M4), on each later connection of a paired sender: X25519 gives a fresh
///   shared secret, each side signs both public values with its identity, and the receiver
///   checks the sender's against the key it paired with; the shared secret keys the connection.
///
/// Not thread-safe: one connection's, on its loop.
struct HAPPairing {
    enum Outcome {
        /// Send this TLV8 body and carry on.
        case reply([UInt8])
        /// Send this body unencrypted; from the next request on the connection is encrypted with
        /// keys derived from `sessionKey`. `how` is for the log.
        case established(reply: [UInt8], sessionKey: [UInt8], how: String)
        /// Send this body (M6): the sender `controller` (its identifier, hex) is paired now.
        case paired(reply: [UInt8], controller: String)
        /// Send this body (an error TLV); `reason` is for the log.
        case refused(reply: [UInt8], reason: String)
    }

    /// The PIN of transient pairing (`srptools`' and Apple's: it is not secret).
    static let transientPIN = "3939"
    /// Flags bit of a transient pair-setup (`kPairingFlag_Transient`).
    static let transientFlag: UInt32 = 0x10
    /// How long a PIN shown is good for.
    static let pinLifetimeNanoseconds = AirPlayPairings.pinLifetimeNanoseconds
    /// Tells connections apart for the one outstanding PIN.
    private static let holders = Atomic<UInt64>(0)

    private let accessory: AirPlayAccessory?
    /// This connection, as the PIN's holder.
    private let holder = HAPPairing.holders.add(1, ordering: .relaxed).newValue
    private var exchange: (server: SRPServer, transient: Bool)?
    /// Until when a PIN pairing's M3 may come (the PIN's expiry), while one waits for it: the
    /// sender's user is reading the PIN, and the connection is not idle meanwhile.
    private(set) var awaitingPINUntil: Int64?
    /// After a PIN pairing's M4: its session key, for M5.
    private var setupKey: [UInt8]?
    /// After pair-verify's M1: both public values and the shared secret.
    private var verifying: (accessoryPublic: [UInt8], senderPublic: [UInt8], shared: [UInt8])?

    /// Whether transient pairing is offered (not where only paired senders may stream).
    private let allowsTransient: Bool

    /// `accessory`: the receiver's identity and pairings; without it only transient pairing is
    /// offered.
    init(accessory: AirPlayAccessory?, allowsTransient: Bool = true) {
        self.accessory = accessory
        self.allowsTransient = allowsTransient
    }

    /// `POST /pair-pin-start`: a new PIN, shown to the household. Nil when one is shown; else
    /// why not, for the log (PINs not offered, or waiting after wrong ones).
    mutating func startPIN(sender: String, now: Int64) -> String? {
        guard let accessory else { return "no PIN: pairing with a PIN is not offered here" }
        switch accessory.pairings.issuePIN(to: holder, now: now) {
        case .success(let pin):
            accessory.showPIN(pin, sender)
            return nil
        case .failure(let wait):
            return "no PIN for \((wait.nanoseconds + 999_999_999) / 1_000_000_000) s more, after wrong PINs in a row"
        }
    }

    mutating func pairSetup(_ body: [UInt8], now: Int64) -> Outcome {
        let message: TLV8
        do { message = try TLV8(parsing: body) } catch {
            return refuse(state: 2, .unknown, "pair-setup: \(error)")
        }
        switch message.state {
        case 1:
            let flags = (message[.flags] ?? []).prefix(4).enumerated().reduce(UInt32(0)) { $0 | UInt32($1.element) << (8 * $1.offset) }
            setupKey = nil
            awaitingPINUntil = nil
            if flags & Self.transientFlag != 0 {
                guard allowsTransient else {
                    exchange = nil
                    return refuse(state: 2, .authentication, "transient pairing refused: this receiver plays only senders paired with a PIN (--airplay-access paired)")
                }
                exchange = (SRPServer(password: Self.transientPIN), true)
            } else {
                exchange = nil
                guard let accessory else {
                    return refuse(state: 2, .unavailable, "pair-setup with a PIN is not offered here: only transient pairing (docs/AIRPLAY.md)")
                }
                guard let shown = accessory.pairings.pin(for: holder, now: now) else {
                    return refuse(state: 2, .unavailable, "pair-setup with a PIN before one was shown for this connection (pair-pin-start), after it expired or was replaced, or while wrong PINs make the next wait")
                }
                exchange = (SRPServer(password: shown.pin), false)
                awaitingPINUntil = shown.expires
            }
            return .reply(TLV8([(.state, [2]), (.salt, exchange!.server.salt), (.publicKey, exchange!.server.publicKey)]).encoded)
        case 3:
            guard let (server, transient) = exchange else { return refuse(state: 4, .unknown, "pair-setup M3 without M1") }
            exchange = nil
            awaitingPINUntil = nil
            // A PIN is good for one try: guessing needs a new PIN shown each time, and a new PIN
            // waits after wrong ones. Its expiry holds for M3 too.
            if !transient {
                accessory?.pairings.spendPIN(of: holder)
                guard accessory?.pairings.pinBackoff(now: now) == nil else {
                    return refuse(state: 4, .backoff, "pair-setup with a PIN: wrong PINs make the next wait")
                }
            }
            guard let a = message[.publicKey], let proof = message[.proof] else {
                return refuse(state: 4, .unknown, "pair-setup M3 without a public key and a proof")
            }
            do {
                let (serverProof, key) = try server.verify(clientPublicKey: a, clientProof: proof)
                let reply = TLV8([(.state, [4]), (.proof, serverProof)]).encoded
                if transient { return .established(reply: reply, sessionKey: key, how: "paired (AirPlay 2, transient)") }
                accessory?.pairings.noteRightPIN()
                setupKey = key
                return .reply(reply)
            } catch {
                guard !transient else { return refuse(state: 4, .authentication, "pair-setup: \(error)") }
                accessory?.pairings.noteWrongPIN(now: now)
                return refuse(state: 4, .authentication, "pair-setup with a PIN: the wrong PIN (it is spent; ask for a new one)")
            }
        case 5:
            guard let key = setupKey, let accessory else { return refuse(state: 6, .unknown, "pair-setup M5 without a PIN pairing's M3") }
            setupKey = nil
            let encryptKey = Self.hkdf(key, salt: "Pair-Setup-Encrypt-Salt", info: "Pair-Setup-Encrypt-Info")
            guard let sealed = message[.encryptedData], let inner = Self.open(sealed, key: encryptKey, nonce: "PS-Msg05"),
                  let sub = try? TLV8(parsing: inner), let identifier = sub[.identifier], let senderKey = sub[.publicKey], let signature = sub[.signature],
                  !identifier.isEmpty, identifier.count <= 64, let publicKey = try? Curve25519.Signing.PublicKey(rawRepresentation: senderKey) else {
                return refuse(state: 6, .authentication, "pair-setup M5 does not open with the session's key or lacks the sender's identity")
            }
            let signed = Self.bytes(Self.hkdf(key, salt: "Pair-Setup-Controller-Sign-Salt", info: "Pair-Setup-Controller-Sign-Info")) + identifier + senderKey
            guard publicKey.isValidSignature(signature, for: signed) else {
                return refuse(state: 6, .authentication, "pair-setup M5: the sender's signature does not verify")
            }
            do { try accessory.pairings.add(identifier: identifier, publicKey: senderKey) } catch {
                return refuse(state: 6, .unknown, "pair-setup M5: the pairing cannot be kept (\(error))")
            }
            let ownKey = accessory.identity.publicKey.bytes
            let proof = Self.bytes(Self.hkdf(key, salt: "Pair-Setup-Accessory-Sign-Salt", info: "Pair-Setup-Accessory-Sign-Info")) + accessory.identifier + ownKey
            let own = TLV8([(.identifier, accessory.identifier), (.publicKey, ownKey), (.signature, accessory.identity.signature(for: proof))])
            return .paired(reply: TLV8([(.state, [6]), (.encryptedData, Self.seal(own.encoded, key: encryptKey, nonce: "PS-Msg06"))]).encoded,
                           controller: Self.describe(identifier))
        case let state:
            exchange = nil
            setupKey = nil
            return refuse(state: (state ?? 0) &+ 1, .unknown, "pair-setup message of state \(state.map(String.init) ?? "none"), not M1, M3 or M5")
        }
    }

    mutating func pairVerify(_ body: [UInt8]) -> Outcome {
        let message: TLV8
        do { message = try TLV8(parsing: body) } catch {
            return refuse(state: 2, .unknown, "pair-verify: \(error)")
        }
        guard let accessory else {
            return refuse(state: (message.state ?? 0) &+ 1, .unavailable, "pair-verify is not offered here: no sender is paired with a PIN (transient pairing needs none)")
        }
        switch message.state {
        case 1:
            guard let senderPublic = message[.publicKey], let theirs = try? Curve25519.KeyAgreement.PublicKey(rawRepresentation: senderPublic) else {
                return refuse(state: 2, .unknown, "pair-verify M1 without an X25519 public key")
            }
            let ours = Curve25519.KeyAgreement.PrivateKey()
            guard let secret = try? ours.sharedSecretFromKeyAgreement(with: theirs) else {
                return refuse(state: 2, .authentication, "pair-verify M1: no agreement with that public key")
            }
            let shared = secret.withUnsafeBytes { Array($0) }
            let accessoryPublic = Array(ours.publicKey.rawRepresentation)
            verifying = (accessoryPublic, senderPublic, shared)
            let signature = accessory.identity.signature(for: accessoryPublic + accessory.identifier + senderPublic)
            let inner = TLV8([(.identifier, accessory.identifier), (.signature, signature)]).encoded
            let key = Self.hkdf(shared, salt: "Pair-Verify-Encrypt-Salt", info: "Pair-Verify-Encrypt-Info")
            return .reply(TLV8([(.state, [2]), (.publicKey, accessoryPublic), (.encryptedData, Self.seal(inner, key: key, nonce: "PV-Msg02"))]).encoded)
        case 3:
            guard let (accessoryPublic, senderPublic, shared) = verifying else { return refuse(state: 4, .unknown, "pair-verify M3 without M1") }
            verifying = nil
            let key = Self.hkdf(shared, salt: "Pair-Verify-Encrypt-Salt", info: "Pair-Verify-Encrypt-Info")
            guard let sealed = message[.encryptedData], let inner = Self.open(sealed, key: key, nonce: "PV-Msg03"),
                  let sub = try? TLV8(parsing: inner), let identifier = sub[.identifier], let signature = sub[.signature] else {
                return refuse(state: 4, .authentication, "pair-verify M3 does not open with the session's key")
            }
            guard let known = accessory.pairings.publicKey(for: identifier), let publicKey = try? Curve25519.Signing.PublicKey(rawRepresentation: known) else {
                return refuse(state: 4, .authentication, "pair-verify: sender \(Self.describe(identifier)) is not paired")
            }
            guard publicKey.isValidSignature(signature, for: senderPublic + identifier + accessoryPublic) else {
                return refuse(state: 4, .authentication, "pair-verify: the signature of sender \(Self.describe(identifier)) does not verify with the key it paired with")
            }
            return .established(reply: TLV8([(.state, [4])]).encoded, sessionKey: shared,
                                how: "verified as paired sender \(Self.describe(identifier))")
        case let state:
            verifying = nil
            return refuse(state: (state ?? 0) &+ 1, .unknown, "pair-verify message of state \(state.map(String.init) ?? "none"), not M1 or M3")
        }
    }

    /// A sender's pairing identifier for a log line: as text when it is printable ASCII (a
    /// UUID, as pyatv's and Apple's are), else hex; at most 64 bytes of it.
    static func describe(_ identifier: [UInt8]) -> String {
        let shown = Array(identifier.prefix(64))
        return shown.allSatisfy({ (0x21...0x7E).contains($0) }) ? String(decoding: shown, as: UTF8.self) : Hex.encode(shown)
    }

    private func refuse(state: UInt8, _ code: TLV8.ErrorCode, _ reason: String) -> Outcome {
        .refused(reply: TLV8([(.state, [state]), (.error, [code.rawValue])]).encoded, reason: reason)
    }

    static func hkdf(_ key: [UInt8], salt: String, info: String) -> SymmetricKey {
        HKDF<SHA512>.deriveKey(inputKeyMaterial: SymmetricKey(data: key), salt: Array(salt.utf8), info: Array(info.utf8), outputByteCount: 32)
    }

    static func bytes(_ key: SymmetricKey) -> [UInt8] { key.withUnsafeBytes { Array($0) } }

    /// A pairing message's ChaCha20-Poly1305 nonce: 4 zero bytes, then 8 ASCII bytes (`PS-Msg05`).
    private static func nonce(_ text: String) -> ChaChaPoly.Nonce {
        try! ChaChaPoly.Nonce(data: [0, 0, 0, 0] + Array(text.utf8))  // 12 bytes: always a valid nonce
    }

    /// Ciphertext then tag, as pairing's encrypted data.
    static func seal(_ plaintext: [UInt8], key: SymmetricKey, nonce text: String) -> [UInt8] {
        let box = try! ChaChaPoly.seal(plaintext, using: key, nonce: nonce(text))  // a valid key and nonce cannot fail
        return Array(box.ciphertext) + Array(box.tag)
    }

    static func open(_ sealed: [UInt8], key: SymmetricKey, nonce text: String) -> [UInt8]? {
        guard sealed.count >= 16, let box = try? ChaChaPoly.SealedBox(nonce: nonce(text), ciphertext: sealed.dropLast(16), tag: sealed.suffix(16)),
              let plaintext = try? ChaChaPoly.open(box, using: key) else { return nil }
        return Array(plaintext)
    }
}
