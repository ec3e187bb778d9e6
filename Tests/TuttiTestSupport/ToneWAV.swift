import Foundation

/// A 48 kHz stereo 16-bit WAV made in memory, with its exact Float32 samples: a sweep over a DC
/// offset, so no sample is ever zero and no stretch repeats — a lost, repeated or inserted frame
/// shows in a sample-by-sample comparison, and silence inserted by a stall is easy to find.
public struct ToneWAV: Sendable {
    public let sampleRate = 48000
    public let channelCount = 2
    /// The WAV file's bytes (44-byte header, then s16le frames).
    public let bytes: [UInt8]
    /// The frames as a decoder delivers them: interleaved Float32, exactly s16 / 32768.
    public let samples: [Float]
    public var frameCount: Int { samples.count / channelCount }
    /// Bytes of one second of audio.
    public var byteRate: Int { sampleRate * channelCount * 2 }
    public static let headerSize = 44

    public init(seconds: Double) {
        let frames = Int(seconds * 48000)
        var pcm = [Int16](repeating: 0, count: frames * 2)
        var phase = 0.0
        for n in 0..<frames {
            let frequency = 220 + 660 * Double(n) / Double(max(frames, 1))
            phase += 2 * Double.pi * frequency / 48000
            let left = 9000 + 6000 * sin(phase)
            let right = -9000 + 6000 * sin(phase * 1.5)
            pcm[2 * n] = Int16(left.rounded())
            pcm[2 * n + 1] = Int16(right.rounded())
        }
        samples = pcm.map { Float($0) / 32768 }
        var data = [UInt8]()
        func u32(_ v: Int) { withUnsafeBytes(of: UInt32(v).littleEndian) { data += $0 } }
        func u16(_ v: Int) { withUnsafeBytes(of: UInt16(v).littleEndian) { data += $0 } }
        data += Array("RIFF".utf8); u32(36 + pcm.count * 2); data += Array("WAVE".utf8)
        data += Array("fmt ".utf8); u32(16); u16(1); u16(2); u32(48000); u32(48000 * 4); u16(4); u16(16)
        data += Array("data".utf8); u32(pcm.count * 2)
        pcm.withUnsafeBytes { data += $0 }
        bytes = data
    }
}
