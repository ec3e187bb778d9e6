/// Turns an audio packet's payload into interleaved 16-bit samples, for the two encodings a
/// receiver takes (`RAOPAnnouncement.Encoding`):
/// - `L16`: the samples themselves, big-endian;
/// - `AppleLossless`, as senders without an ALAC encoder send it: each packet one ALAC frame
///   with the escape flag set (the samples verbatim, 16 bits each, after a 23-bit header),
///   then the END element. A compressed frame (iTunes') is refused here: it needs a real ALAC
///   decoder, which the receiver takes from FFmpeg when it has one.
public struct RAOPAudioDecoder: Sendable {
    public enum Failure: Error, Equatable, Sendable {
        /// The payload is not whole frames of the announced format.
        case length(Int)
        /// An ALAC frame that is compressed, or whose header is not one this decoder reads.
        case compressedALAC
        case malformedALAC(String)
    }

    public let announcement: RAOPAnnouncement

    public init(announcement: RAOPAnnouncement) {
        self.announcement = announcement
    }

    /// The packet's frames, appended to `samples` (interleaved); returns the frame count.
    @discardableResult
    public func decode(_ payload: [UInt8], into samples: inout [Int16]) throws(Failure) -> Int {
        let channels = announcement.channelCount
        switch announcement.encoding {
        case .l16:
            guard payload.count % (2 * channels) == 0 else { throw .length(payload.count) }
            samples.reserveCapacity(samples.count + payload.count / 2)
            var index = 0
            while index < payload.count {
                samples.append(Int16(bitPattern: UInt16(payload[index]) << 8 | UInt16(payload[index + 1])))
                index += 2
            }
            return payload.count / (2 * channels)
        case .appleLossless:
            var reader = BitReader(payload)
            // The element: SCE (0, mono) or CPE (1, stereo), its 4-bit tag, 12 unused bits.
            guard let element = reader.read(3), let _ = reader.read(4), let unused = reader.read(12) else { throw .malformedALAC("a frame shorter than its header") }
            guard element == (channels == 2 ? 1 : 0) else { throw .malformedALAC("element \(element) for \(channels) channels") }
            guard unused == 0 else { throw .malformedALAC("unused header bits set") }
            guard let hasSize = reader.read(1), let shift = reader.read(2), let escape = reader.read(1) else { throw .malformedALAC("a frame shorter than its header") }
            guard escape == 1 else { throw .compressedALAC }
            guard shift == 0 else { throw .malformedALAC("uncompressed bytes shift \(shift) for 16-bit audio") }
            var frames = announcement.framesPerPacket
            if hasSize == 1 {
                guard let count = reader.read(32), count > 0, count <= UInt32(announcement.framesPerPacket) else { throw .malformedALAC("a frame size out of range") }
                frames = Int(count)
            }
            guard reader.remainingBits >= frames * channels * 16 else { throw .length(payload.count) }
            samples.reserveCapacity(samples.count + frames * channels)
            for _ in 0..<(frames * channels) {
                samples.append(Int16(bitPattern: UInt16(reader.read(16)!)))
            }
            // END (7) follows; a sender that stops at the byte boundary before it is tolerated.
            if reader.remainingBits >= 3, let end = reader.read(3), end != 7 { throw .malformedALAC("element \(end) after the samples, not END") }
            return frames
        }
    }
}

/// Reads bits, most significant first.
struct BitReader {
    private let bytes: [UInt8]
    private var position = 0

    init(_ bytes: [UInt8]) { self.bytes = bytes }

    var remainingBits: Int { bytes.count * 8 - position }

    mutating func read(_ count: Int) -> UInt32? {
        guard count <= 32, remainingBits >= count else { return nil }
        var value: UInt32 = 0
        for _ in 0..<count {
            let bit = (bytes[position >> 3] >> (7 - UInt8(position & 7))) & 1
            value = value << 1 | UInt32(bit)
            position += 1
        }
        return value
    }
}
