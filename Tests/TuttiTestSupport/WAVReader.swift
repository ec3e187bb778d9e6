import Foundation
import TuttiCore

/// An independent WAV parser for checking what devices wrote (PCM 16/24/32-bit, IEEE float).
public struct WAVFile: Sendable {
    public var sampleRate: Int
    public var channelCount: Int
    public var sampleFormat: SampleFormat
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
                payload = data[body..<min(data.count, body + size)]
            }
            offset = body + size + (size & 1)
        }
        guard let payload, channels > 0 else { throw ParseError(description: "\(path): no fmt or data chunk") }
        sampleRate = rate
        channelCount = channels
        let bytes = [UInt8](payload)
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

/// Comparisons of interleaved signals.
public enum SignalCheck {
    /// Largest absolute sample difference over the common length.
    public static func maxDifference(_ a: [Float], _ b: [Float]) -> Float {
        var worst: Float = 0
        for i in 0..<min(a.count, b.count) { worst = max(worst, abs(a[i] - b[i])) }
        return worst
    }

    /// Root-mean-square of `a - b` over frames `range` (interleaved with `channels`).
    public static func rmsDifference(_ a: [Float], _ b: [Float], channels: Int, frames range: Range<Int>) -> Double {
        var sum = 0.0
        var count = 0
        for frame in range { for c in 0..<channels {
            let i = frame * channels + c
            guard i < a.count, i < b.count else { continue }
            let d = Double(a[i] - b[i]); sum += d * d; count += 1
        } }
        return count == 0 ? 0 : (sum / Double(count)).squareRoot()
    }

    public static func rms(_ a: [Float], channels: Int, frames range: Range<Int>) -> Double {
        rmsDifference(a, [Float](repeating: 0, count: a.count), channels: channels, frames: range)
    }

    /// The lag (in frames, within ±`maxLag`) that best aligns `signal` to `reference` around
    /// `frame`, by least squared error over a window: 0 means the two are aligned there.
    public static func bestLag(_ signal: [Float], _ reference: [Float], channels: Int, around frame: Int, window: Int = 2048, maxLag: Int = 64) -> Int {
        var best = 0
        var bestError = Double.infinity
        for lag in -maxLag...maxLag {
            var error = 0.0
            for f in (frame - window / 2)..<(frame + window / 2) {
                let s = f + lag
                guard f >= 0, s >= 0, (s + 1) * channels <= signal.count, (f + 1) * channels <= reference.count else { continue }
                for c in 0..<channels { let d = Double(signal[s * channels + c] - reference[f * channels + c]); error += d * d }
            }
            if error < bestError { bestError = error; best = lag }
        }
        return best
    }
}
