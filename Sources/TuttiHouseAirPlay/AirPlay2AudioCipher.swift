import Crypto
import TuttiProtocol

/// AirPlay 2's realtime audio encryption: each RTP payload is ChaCha20-Poly1305 ciphertext,
/// then its 16-byte tag, then the 8 bytes of its nonce (the sender's packet count, little-endian;
/// the 12-byte nonce is 4 zero bytes before them); the associated data is the RTP header's
/// timestamp and SSRC (its bytes 4–11). The key is the stream's `shk` from SETUP.
///
/// Every packet is authenticated: one that does not open (a stranger's, or corrupted) is
/// dropped, and its sequence number is left to the resend path.
struct AirPlay2AudioCipher {
    static let trailer = 16 + 8

    private let key: SymmetricKey

    init?(key: [UInt8]) {
        guard key.count == 32 else { return nil }
        self.key = SymmetricKey(data: key)
    }

    /// The packet with its payload decrypted, or nil if it does not open.
    func open(_ packet: RAOPAudioPacket) -> RAOPAudioPacket? {
        let payload = packet.payload
        guard payload.count >= Self.trailer else { return nil }
        let tagStart = payload.count - Self.trailer
        let nonce = [UInt8](repeating: 0, count: 4) + payload[(tagStart + 16)...]
        let aad = Self.associatedData(timestamp: packet.timestamp, ssrc: packet.ssrc)
        guard let box = try? ChaChaPoly.SealedBox(nonce: ChaChaPoly.Nonce(data: nonce), ciphertext: payload[..<tagStart],
                                                   tag: payload[tagStart..<(tagStart + 16)]),
              let plaintext = try? ChaChaPoly.open(box, using: key, authenticating: aad) else { return nil }
        var opened = packet
        opened.payload = Array(plaintext)
        return opened
    }

    /// The sender's side, for tests: `payload` sealed as packet `count`.
    static func seal(_ payload: [UInt8], key: [UInt8], count: UInt64, timestamp: UInt32, ssrc: UInt32) -> [UInt8] {
        let aad = associatedData(timestamp: timestamp, ssrc: ssrc)
        let counter = (0..<8).map { UInt8(truncatingIfNeeded: count >> (8 * UInt64($0))) }
        let box = try! ChaChaPoly.seal(payload, using: SymmetricKey(data: key), nonce: ChaChaPoly.Nonce(data: [0, 0, 0, 0] + counter), authenticating: aad)
        return Array(box.ciphertext) + Array(box.tag) + counter
    }

    /// The RTP header's bytes 4–11: the timestamp and the SSRC, big-endian.
    private static func associatedData(timestamp: UInt32, ssrc: UInt32) -> [UInt8] {
        [timestamp, ssrc].flatMap { value in (0..<4).map { UInt8(truncatingIfNeeded: value >> (24 - 8 * UInt32($0))) } }
    }
}
