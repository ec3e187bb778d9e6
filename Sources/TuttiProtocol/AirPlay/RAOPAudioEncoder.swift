/// Turns interleaved 16-bit samples into an audio packet's payload, as a sender sends them to
/// an AirPlay 1 receiver; `RAOPAudioDecoder` reads them back.
/// - `L16`: the samples themselves, big-endian.
/// - `AppleLossless`, uncompressed: one ALAC frame with the escape flag set and the samples
///   verbatim (what PipeWire's raop sink sends): every ALAC decoder reads it, and it costs no
///   encoder. The frame size is written only when the packet is short of `framesPerPacket`.
///   It is 2 bytes a frame more than PCM, and at 1.4 Mbit/s a LAN does not notice.
public struct RAOPAudioEncoder: Sendable {
    public let announcement: RAOPAnnouncement

    public init(announcement: RAOPAnnouncement) {
        self.announcement = announcement
    }

    /// The payload for `frames` frames (1 … `framesPerPacket`) of `samples` (interleaved,
    /// `channelCount` a frame).
    public func encode(_ samples: UnsafeBufferPointer<Int16>, frames: Int) -> [UInt8] {
        let channels = announcement.channelCount
        precondition(frames >= 1 && frames <= announcement.framesPerPacket && samples.count >= frames * channels,
                     "an RAOP packet holds at most \(announcement.framesPerPacket) frames")
        switch announcement.encoding {
        case .l16:
            var bytes = [UInt8]()
            bytes.reserveCapacity(frames * channels * 2)
            for index in 0..<(frames * channels) {
                let value = UInt16(bitPattern: samples[index])
                bytes.append(UInt8(value >> 8))
                bytes.append(UInt8(value & 0xFF))
            }
            return bytes
        case .appleLossless:
            var writer = BitWriter(capacityBits: 23 + 32 + frames * channels * 16 + 3)
            writer.write(channels == 2 ? 1 : 0, bits: 3)  // CPE for stereo, SCE for mono
            writer.write(0, bits: 4)  // element tag
            writer.write(0, bits: 12)  // unused
            let short = frames != announcement.framesPerPacket
            writer.write(short ? 1 : 0, bits: 1)  // has size
            writer.write(0, bits: 2)  // uncompressed bytes (none for 16-bit audio)
            writer.write(1, bits: 1)  // escape: the samples follow verbatim
            if short { writer.write(UInt32(frames), bits: 32) }
            for index in 0..<(frames * channels) {
                writer.write(UInt32(UInt16(bitPattern: samples[index])), bits: 16)
            }
            writer.write(7, bits: 3)  // END
            return writer.bytes
        }
    }
}

/// Writes bits, most significant first; the last byte is padded with zeros.
struct BitWriter {
    private(set) var bytes: [UInt8] = []
    private var used = 8

    init(capacityBits: Int) { bytes.reserveCapacity((capacityBits + 7) / 8) }

    mutating func write(_ value: UInt32, bits count: Int) {
        precondition(count <= 32)
        var remaining = count
        while remaining > 0 {
            if used == 8 { bytes.append(0); used = 0 }
            let take = min(8 - used, remaining)
            let chunk = UInt8(truncatingIfNeeded: (value >> UInt32(remaining - take)) & ((1 << UInt32(take)) - 1))
            bytes[bytes.count - 1] |= chunk << UInt8(8 - used - take)
            used += take
            remaining -= take
        }
    }
}
