import TuttiProtocol

/// The receiver's side of pairing on one RTSP connection (`POST /pair-setup`): HomeKit's
/// pair-setup in its transient form, as AirPlay 2 senders run it with receivers that announce
/// `SupportsCoreUtilsPairingAndEncryption` (pyatv; Apple's devices with a receiver that needs
/// no PIN). SRP-6a with the fixed PIN 3939 proves nothing about the sender; what it gives is a
/// session key neither side sent, from which the connection's and the audio's encryption keys
/// are derived (docs/AIRPLAY.md).
///
/// Pair-setup with a PIN the receiver shows (M5 and M6: the two sides' Ed25519 identities) and
/// pair-verify (X25519 on a stored pairing) are refused as unavailable: not built yet.
///
/// Not thread-safe: one connection's, on its loop.
struct HAPPairing {
    enum Outcome {
        /// Send this TLV8 body and carry on.
        case reply([UInt8])
        /// Send this body unencrypted; from the next request on the connection is encrypted with
        /// keys derived from `sessionKey`.
        case established(reply: [UInt8], sessionKey: [UInt8])
        /// Send this body (an error TLV); `reason` is for the log.
        case refused(reply: [UInt8], reason: String)
    }

    /// The PIN of transient pairing (`srptools`' and Apple's: it is not secret).
    static let transientPIN = "3939"
    /// Flags bit of a transient pair-setup (`kPairingFlag_Transient`).
    static let transientFlag: UInt32 = 0x10

    private var exchange: SRPServer?

    mutating func pairSetup(_ body: [UInt8]) -> Outcome {
        let message: TLV8
        do { message = try TLV8(parsing: body) } catch {
            return refuse(state: 2, .unknown, "pair-setup: \(error)")
        }
        switch message.state {
        case 1:
            let flags = (message[.flags] ?? []).prefix(4).enumerated().reduce(UInt32(0)) { $0 | UInt32($1.element) << (8 * $1.offset) }
            guard flags & Self.transientFlag != 0 else {
                exchange = nil
                return refuse(state: 2, .unavailable, "pair-setup with a PIN is not offered: only transient pairing (docs/AIRPLAY.md)")
            }
            let server = SRPServer(password: Self.transientPIN)
            exchange = server
            return .reply(TLV8([(.state, [2]), (.salt, server.salt), (.publicKey, server.publicKey)]).encoded)
        case 3:
            guard let server = exchange else { return refuse(state: 4, .unknown, "pair-setup M3 without M1") }
            exchange = nil
            guard let a = message[.publicKey], let proof = message[.proof] else {
                return refuse(state: 4, .unknown, "pair-setup M3 without a public key and a proof")
            }
            do {
                let (serverProof, key) = try server.verify(clientPublicKey: a, clientProof: proof)
                return .established(reply: TLV8([(.state, [4]), (.proof, serverProof)]).encoded, sessionKey: key)
            } catch {
                return refuse(state: 4, .authentication, "pair-setup: \(error)")
            }
        case let state:
            exchange = nil
            return refuse(state: (state ?? 0) &+ 1, .unknown, "pair-setup message of state \(state.map(String.init) ?? "none"), not M1 or M3")
        }
    }

    mutating func pairVerify(_ body: [UInt8]) -> Outcome {
        let state = (try? TLV8(parsing: body))?.state ?? 1
        return refuse(state: state &+ 1, .unavailable, "pair-verify is not offered: no sender is paired with a PIN (transient pairing needs none)")
    }

    private func refuse(state: UInt8, _ code: TLV8.ErrorCode, _ reason: String) -> Outcome {
        .refused(reply: TLV8([(.state, [state]), (.error, [code.rawValue])]).encoded, reason: reason)
    }
}
