/// An MPEG-1/2/2.5 audio frame header (Layer I, II or III).
struct MPEGAudioHeader {
    /// 3: MPEG-1, 2: MPEG-2, 0: MPEG-2.5.
    var version: Int
    /// 1, 2 or 3.
    var layer: Int
    var sampleRate: Int
    var channelCount: Int
    var frameLength: Int
    var samplesPerFrame: Int
    /// Fields that stay the same from frame to frame (version, layer, sample rate).
    var matchKey: UInt32

    private static let bitrates: [[Int]] = [
        [0, 32, 64, 96, 128, 160, 192, 224, 256, 288, 320, 352, 384, 416, 448],  // V1 L1
        [0, 32, 48, 56, 64, 80, 96, 112, 128, 160, 192, 224, 256, 320, 384],     // V1 L2
        [0, 32, 40, 48, 56, 64, 80, 96, 112, 128, 160, 192, 224, 256, 320],      // V1 L3
        [0, 32, 48, 56, 64, 80, 96, 112, 128, 144, 160, 176, 192, 224, 256],     // V2 L1
        [0, 8, 16, 24, 32, 40, 48, 56, 64, 80, 96, 112, 128, 144, 160],          // V2 L2, L3
    ]

    init?(_ bytes: [UInt8], at offset: Int) {
        guard offset + 4 <= bytes.count else { return nil }
        self.init(bytes[offset], bytes[offset + 1], bytes[offset + 2], bytes[offset + 3])
    }

    init?(_ b0: UInt8, _ b1: UInt8, _ b2: UInt8, _ b3: UInt8) {
        guard b0 == 0xFF, b1 & 0xE0 == 0xE0 else { return nil }
        let version = Int(b1 >> 3) & 3
        let layerBits = Int(b1 >> 1) & 3
        let bitrateIndex = Int(b2 >> 4)
        let rateIndex = Int(b2 >> 2) & 3
        // Free-format bitrate (0) is legal but not supported: its frame length is unknown.
        guard version != 1, layerBits != 0, bitrateIndex != 0, bitrateIndex != 15, rateIndex != 3 else { return nil }
        let layer = 4 - layerBits
        let rate = [44100, 48000, 32000][rateIndex] / (version == 3 ? 1 : version == 2 ? 2 : 4)
        let table = version == 3 ? layer - 1 : (layer == 1 ? 3 : 4)
        let bitrate = Self.bitrates[table][bitrateIndex] * 1000
        let padding = Int(b2 >> 1) & 1
        switch layer {
        case 1:
            frameLength = (12 * bitrate / rate + padding) * 4
            samplesPerFrame = 384
        case 2:
            frameLength = 144 * bitrate / rate + padding
            samplesPerFrame = 1152
        default:
            frameLength = (version == 3 ? 144 : 72) * bitrate / rate + padding
            samplesPerFrame = version == 3 ? 1152 : 576
        }
        self.version = version
        self.layer = layer
        sampleRate = rate
        channelCount = b3 >> 6 == 3 ? 1 : 2
        matchKey = UInt32(b1 & 0xFE) << 8 | UInt32(b2 & 0x0C)
    }

    /// Bytes of Layer III side information after the 4-byte header.
    var sideInfoSize: Int { version == 3 ? (channelCount == 1 ? 17 : 32) : (channelCount == 1 ? 9 : 17) }
}

/// An AAC ADTS frame header.
struct ADTSHeader {
    var sampleRate: Int
    var channelConfiguration: Int
    var frameLength: Int
    var samplesPerFrame: Int
    /// Fields that stay the same from frame to frame (profile, rate, channels).
    var matchKey: UInt32

    static let sampleRates = [96000, 88200, 64000, 48000, 44100, 32000, 24000, 22050, 16000, 12000, 11025, 8000, 7350]

    init?(_ bytes: [UInt8], at offset: Int) {
        guard offset + 7 <= bytes.count else { return nil }
        let b = bytes[offset..<offset + 7].map { Int($0) }
        guard b[0] == 0xFF, b[1] & 0xF6 == 0xF0 else { return nil }  // sync, layer 0
        let rateIndex = (b[2] >> 2) & 0xF
        guard rateIndex < Self.sampleRates.count else { return nil }
        let length = (b[3] & 3) << 11 | b[4] << 3 | b[5] >> 5
        let headerSize = b[1] & 1 == 0 ? 9 : 7  // with CRC when protection_absent is 0
        guard length >= headerSize else { return nil }
        sampleRate = Self.sampleRates[rateIndex]
        channelConfiguration = (b[2] & 1) << 2 | b[3] >> 6
        frameLength = length
        samplesPerFrame = ((b[6] & 3) + 1) * 1024
        matchKey = UInt32(b[1] & 0xF8) << 16 | UInt32(b[2] & 0xFD) << 8 | UInt32(b[3] & 0xC0)
    }
}
