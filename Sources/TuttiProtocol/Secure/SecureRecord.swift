import Crypto
import FoundationEssentials
import NIOCore

/// One direction of a secure channel's records: each is its length (4 bytes, big-endian, the
/// sealed bytes' count) and the bytes sealed with ChaCha20-Poly1305 under the direction's key,
/// the nonce the record's number (never repeated: 2⁶⁴ records), the length its associated data.
/// A record cut, reordered, replayed, dropped or with one bit flipped fails to open.
struct SecureRecordSealer {
    private let key: SymmetricKey
    private var counter: UInt64 = 0

    init(key: SymmetricKey) { self.key = key }

    /// Appends `plaintext` sealed to `out`.
    mutating func seal(_ plaintext: ByteBuffer, into out: inout ByteBuffer) {
        let length = UInt32(plaintext.readableBytes + SecureRecord.tagSize)
        let header = withUnsafeBytes(of: length.bigEndian) { Array($0) }
        let nonce = SecureRecord.nonce(counter)
        counter += 1
        // Sealing fails only for a nonce of the wrong size, which `nonce` never makes.
        guard let box = try? ChaChaPoly.seal(Array(plaintext.readableBytesView), using: key, nonce: nonce, authenticating: header) else {
            preconditionFailure("ChaCha20-Poly1305 sealing failed")
        }
        out.reserveCapacity(minimumWritableBytes: 4 + Int(length))
        out.writeBytes(header)
        out.writeBytes(box.ciphertext)
        out.writeBytes(box.tag)
    }
}

struct SecureRecordOpener {
    private let key: SymmetricKey
    private var counter: UInt64 = 0
    /// Larger records are refused before they are buffered.
    var maximumPlaintext: Int

    init(key: SymmetricKey, maximumPlaintext: Int) {
        self.key = key
        self.maximumPlaintext = maximumPlaintext
    }

    /// Opens the record at the front of `buffer`: nil (consuming nothing) until it is whole.
    mutating func open(from buffer: inout ByteBuffer) throws(SecureChannelError) -> ByteBuffer? {
        guard let length = buffer.getInteger(at: buffer.readerIndex, as: UInt32.self) else { return nil }
        guard length >= SecureRecord.tagSize, Int(length) - SecureRecord.tagSize <= maximumPlaintext else {
            throw SecureChannelError("a record of \(length) bytes (at most \(maximumPlaintext + SecureRecord.tagSize))")
        }
        guard buffer.readableBytes >= 4 + Int(length) else { return nil }
        let header = buffer.readBytes(length: 4)!
        let sealed = buffer.readSlice(length: Int(length))!
        let tagStart = sealed.readerIndex + Int(length) - SecureRecord.tagSize
        let opened: Data
        do {
            let box = try ChaChaPoly.SealedBox(nonce: SecureRecord.nonce(counter),
                                               ciphertext: sealed.getBytes(at: sealed.readerIndex, length: Int(length) - SecureRecord.tagSize)!,
                                               tag: sealed.getBytes(at: tagStart, length: SecureRecord.tagSize)!)
            opened = try ChaChaPoly.open(box, using: key, authenticating: header)
        } catch {
            throw SecureChannelError("a record that fails authentication (altered or forged on the way)")
        }
        counter += 1
        var plaintext = ByteBufferAllocator().buffer(capacity: opened.count)
        plaintext.writeBytes(opened)
        return plaintext
    }
}

enum SecureRecord {
    static let tagSize = 16

    static func nonce(_ counter: UInt64) -> ChaChaPoly.Nonce {
        let bytes = [UInt8](repeating: 0, count: 4) + withUnsafeBytes(of: counter.bigEndian) { Array($0) }
        return try! ChaChaPoly.Nonce(data: bytes)
    }
}

/// What sealing and opening records costs on this machine, through the same code the channel
/// runs (`tutti-bench efficiency` prints it beside the rooms' CPU).
public enum SecureRecordCost {
    /// Bytes a second sealed, and opened, of `totalBytes` in records of `recordBytes` (a chunk).
    public static func measure(recordBytes: Int = 16 << 10, totalBytes: Int = 64 << 20) -> (seal: Double, open: Double) {
        let key = SymmetricKey(size: .bits256)
        var sealer = SecureRecordSealer(key: key)
        var opener = SecureRecordOpener(key: key, maximumPlaintext: recordBytes)
        let plaintext = ByteBuffer(repeating: 0x5A, count: recordBytes)
        let records = max(1, totalBytes / recordBytes)
        var sealed = ByteBufferAllocator().buffer(capacity: records * (recordBytes + 20))
        let clock = ContinuousClock()
        let sealing = clock.measure {
            for _ in 0..<records { sealer.seal(plaintext, into: &sealed) }
        }
        var opened = 0
        let opening = clock.measure {
            while let record = try? opener.open(from: &sealed) { opened += record.readableBytes }
        }
        precondition(opened == records * recordBytes, "the records sealed did not all open")
        func seconds(_ duration: Duration) -> Double { Double(duration.components.seconds) + Double(duration.components.attoseconds) / 1e18 }
        let total = Double(records * recordBytes)
        return (total / seconds(sealing), total / seconds(opening))
    }
}
