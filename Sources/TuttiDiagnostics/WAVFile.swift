import Foundation

/// An independent WAV parser for checking what devices wrote (PCM 16/24-bit, IEEE float): it
/// shares no code with the writer it checks.
public struct WAVFile: Sendable {
    public enum Encoding: String, Sendable { case float32 = "f32", int16 = "s16", int24 = "s24" }

    public var sampleRate: Int
    public var channelCount: Int
    public var sampleFormat: Encoding
    /// Interleaved, scaled to [-1, 1).
    public var samples: [Float]
    public var frameCount: Int { samples.count / channelCount }

    public struct ParseError: Error, CustomStringConvertible { public let description: String }

    public init(path: String) throws {
        let data = try Data(contentsOf: URL(fileURLWithPath: path))
        func u32(_ at: Int) -> Int { Int(data[at]) | Int(data[at + 1]) << 8 | Int(data[at + 2]) << 16 | Int(data[at + 3]) << 24 }
        func u16(_ at: Int) -> Int { Int(data[at]) | Int(data[at + 1]) << 8 }
        guard data.count >= 12, data.prefix(4) == Data("RIFF".utf8), data[8..<12] == Data("WAVE".utf8) else {
            throw ParseError(description: "\(path): not a RIFF/WAVE file")
        }
        var offset = 12
        var tag = 0, channels = 0, rate = 0, bits = 0
        var payload: Data? = nil
        while offset + 8 <= data.count {
            let id = String(decoding: data[offset..<offset + 4], as: UTF8.self)
            let size = u32(offset + 4)
            let body = offset + 8
            if id == "fmt " {
                tag = u16(body); channels = u16(body + 2); rate = u32(body + 4); bits = u16(body + 14)
                if tag == 0xFFFE { tag = u16(body + 24) }
            } else if id == "data" {
                // A writer that never finished (killed, or streaming to a pipe) leaves the size at
                // 0 or too large: the audio is what the file holds, as FFmpeg reads it too.
                let end = size == 0 || body + size > data.count ? data.count : body + size
                payload = data[body..<end]
            }
            offset = body + size + (size & 1)
        }
        guard let payload, channels > 0 else { throw ParseError(description: "\(path): no fmt or data chunk") }
        sampleRate = rate
        channelCount = channels
        var bytes = [UInt8](payload)
        let frameBytes = max(1, channels * bits / 8)
        bytes.removeLast(bytes.count % frameBytes)
        switch (tag, bits) {
        case (3, 32):
            sampleFormat = .float32
            samples = bytes.withUnsafeBytes { Array($0.bindMemory(to: Float.self)) }
        case (1, 16):
            sampleFormat = .int16
            samples = stride(from: 0, to: bytes.count - 1, by: 2).map { Float(Int16(bitPattern: UInt16(bytes[$0]) | UInt16(bytes[$0 + 1]) << 8)) / 32768 }
        case (1, 24):
            sampleFormat = .int24
            samples = stride(from: 0, to: bytes.count - 2, by: 3).map {
                let raw = Int32(bytes[$0]) | Int32(bytes[$0 + 1]) << 8 | Int32(bytes[$0 + 2]) << 16
                return Float((raw << 8) >> 8) / 8_388_608
            }
        default:
            throw ParseError(description: "\(path): unsupported WAV encoding tag \(tag), \(bits) bits")
        }
    }
}

