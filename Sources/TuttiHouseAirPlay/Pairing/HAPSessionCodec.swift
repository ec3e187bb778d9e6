import Crypto
import NIOCore

/// The encryption of a paired connection (HAP's, section 6.5.2, as AirPlay 2 uses it on RTSP
/// and its event channel): each direction a series of frames, a 2-byte little-endian length
/// (at most 1024) then that many bytes of ChaCha20-Poly1305 ciphertext and a 16-byte tag; the
/// length is the frame's associated data, and the nonce counts frames (4 zero bytes, then the
/// count as 8 bytes little-endian), from 0 in each direction.
///
/// Put in front of a handler once pairing gives a session key: what it reads afterwards is
/// decrypted, what it writes encrypted. A frame that does not open (a forged or corrupted one)
/// closes the connection: the stream has no resynchronisation point after it.
final class HAPSessionCodec: ChannelDuplexHandler {
    typealias InboundIn = ByteBuffer
    typealias InboundOut = ByteBuffer
    typealias OutboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer

    static let maximumFrame = 1024
    static let tagLength = 16

    /// The two directions' keys, derived from a pairing's session key with HKDF-SHA512 under
    /// `salt` and the two info strings (the sender's write key is the receiver's read key).
    struct Keys {
        var read: SymmetricKey
        var write: SymmetricKey

        static func derive(from sessionKey: [UInt8], salt: String, senderWrites: String, senderReads: String) -> Keys {
            Keys(read: HAPPairing.hkdf(sessionKey, salt: salt, info: senderWrites), write: HAPPairing.hkdf(sessionKey, salt: salt, info: senderReads))
        }

        /// The RTSP connection's (`Control-Salt`).
        static func control(_ sessionKey: [UInt8]) -> Keys {
            derive(from: sessionKey, salt: "Control-Salt", senderWrites: "Control-Write-Encryption-Key", senderReads: "Control-Read-Encryption-Key")
        }

        /// The event channel's (`Events-Salt`), whose info strings name the receiver's ways,
        /// not the sender's: the receiver writes events with the write key (pyatv sets its
        /// channel up with the two the other way round).
        static func events(_ sessionKey: [UInt8]) -> Keys {
            derive(from: sessionKey, salt: "Events-Salt", senderWrites: "Events-Read-Encryption-Key", senderReads: "Events-Write-Encryption-Key")
        }
    }

    private let keys: Keys
    private let onFailure: (String) -> Void
    private var readCount: UInt64 = 0
    private var writeCount: UInt64 = 0
    private var pending: ByteBuffer?
    private var failed = false

    /// `onFailure` is told once, with a line for the log, when a frame does not open.
    init(keys: Keys, onFailure: @escaping (String) -> Void) {
        self.keys = keys
        self.onFailure = onFailure
    }

    static func nonce(_ count: UInt64) -> ChaChaPoly.Nonce {
        var bytes = [UInt8](repeating: 0, count: 12)
        for index in 0..<8 { bytes[4 + index] = UInt8(truncatingIfNeeded: count >> (8 * UInt64(index))) }
        return try! ChaChaPoly.Nonce(data: bytes)  // 12 bytes: always a valid nonce
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        guard !failed else { return }
        var incoming = unwrapInboundIn(data)
        if pending == nil { pending = incoming } else { pending!.writeBuffer(&incoming) }
        var plaintext = context.channel.allocator.buffer(capacity: 0)
        while var buffer = pending, let length = buffer.getInteger(at: buffer.readerIndex, endianness: .little, as: UInt16.self) {
            guard Int(length) <= Self.maximumFrame else { return fail(context: context, "a frame of \(length) bytes, over HAP's 1024") }
            guard buffer.readableBytes >= 2 + Int(length) + Self.tagLength else { break }
            let header = buffer.readBytes(length: 2)!
            let ciphertext = buffer.readBytes(length: Int(length))!
            let tag = buffer.readBytes(length: Self.tagLength)!
            pending = buffer.readableBytes > 0 ? buffer : nil
            do {
                let box = try ChaChaPoly.SealedBox(nonce: Self.nonce(readCount), ciphertext: ciphertext, tag: tag)
                plaintext.writeBytes(try ChaChaPoly.open(box, using: keys.read, authenticating: header))
            } catch {
                return fail(context: context, "frame \(readCount) does not open with the session's key (forged, or not this session's)")
            }
            readCount += 1
        }
        if plaintext.readableBytes > 0 { context.fireChannelRead(wrapInboundOut(plaintext)) }
    }

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        var buffer = unwrapOutboundIn(data)
        var out = context.channel.allocator.buffer(capacity: buffer.readableBytes + (buffer.readableBytes / Self.maximumFrame + 1) * (2 + Self.tagLength))
        repeat {
            let chunk = buffer.readBytes(length: min(Self.maximumFrame, buffer.readableBytes)) ?? []
            let header: [UInt8] = [UInt8(chunk.count & 0xFF), UInt8(chunk.count >> 8)]
            // Sealing with a valid key and nonce cannot fail.
            let box = try! ChaChaPoly.seal(chunk, using: keys.write, nonce: Self.nonce(writeCount), authenticating: header)
            writeCount += 1
            out.writeBytes(header)
            out.writeBytes(box.ciphertext)
            out.writeBytes(box.tag)
        } while buffer.readableBytes > 0
        context.write(wrapOutboundOut(out), promise: promise)
    }

    private func fail(context: ChannelHandlerContext, _ reason: String) {
        failed = true
        pending = nil
        onFailure(reason)
        context.close(promise: nil)
    }
}
