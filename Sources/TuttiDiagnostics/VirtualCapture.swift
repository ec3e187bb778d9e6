import Foundation

/// What a virtual sound card emitted: its WAV capture and its timing file, read back so that
/// any emitted frame can be placed on the true CLOCK_MONOTONIC time line.
public struct VirtualCapture: Sendable {
    public let sampleRate: Int
    public let channelCount: Int
    /// Interleaved samples as emitted.
    public let samples: [Float]
    /// Period start frames and their exact emission times.
    public let periodFrames: [Int64]
    public let periodTimes: [Int64]
    /// Underruns the device logged: (first silent frame, frames).
    public let underruns: [(frame: Int64, frames: Int64)]

    public struct ReadError: Error, CustomStringConvertible { public let description: String }

    public var frameCount: Int { samples.count / channelCount }

    public init(path: String) throws {
        let data = try Data(contentsOf: URL(fileURLWithPath: path))
        func u32(_ at: Int) -> Int { Int(data[at]) | Int(data[at + 1]) << 8 | Int(data[at + 2]) << 16 | Int(data[at + 3]) << 24 }
        func u16(_ at: Int) -> Int { Int(data[at]) | Int(data[at + 1]) << 8 }
        guard data.count >= 12, data.prefix(4) == Data("RIFF".utf8) else { throw ReadError(description: "\(path): not a WAV file") }
        var offset = 12, tag = 0, channels = 0, rate = 0, bits = 0
        var payload = Data()
        while offset + 8 <= data.count {
            let id = String(decoding: data[offset..<offset + 4], as: UTF8.self)
            let size = u32(offset + 4)
            if id == "fmt " { tag = u16(offset + 8); channels = u16(offset + 10); rate = u32(offset + 12); bits = u16(offset + 22) }
            if id == "data" { payload = data[(offset + 8)..<min(data.count, offset + 8 + size)] }
            offset += 8 + size + (size & 1)
        }
        guard channels > 0 else { throw ReadError(description: "\(path): no fmt chunk") }
        sampleRate = rate
        channelCount = channels
        switch (tag, bits) {
        case (3, 32): samples = payload.withUnsafeBytes { Array($0.bindMemory(to: Float.self)) }
        case (1, 16): samples = payload.withUnsafeBytes { $0.bindMemory(to: Int16.self).map { Float($0) / 32768 } }
        default: throw ReadError(description: "\(path): unsupported WAV encoding (tag \(tag), \(bits) bits)")
        }
        var frames: [Int64] = [], times: [Int64] = [], underruns: [(Int64, Int64)] = []
        let text = try String(contentsOfFile: path + ".timing.jsonl", encoding: .utf8)
        for line in text.split(separator: "\n") {
            guard let object = try? JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any],
                  let frame = (object["frame"] as? NSNumber)?.int64Value, let time = (object["mono_ns"] as? NSNumber)?.int64Value else {
                throw ReadError(description: "\(path).timing.jsonl: malformed line \(line.prefix(80))")
            }
            if object["underrun"] as? Bool == true {
                underruns.append((frame, (object["frames"] as? NSNumber)?.int64Value ?? 0))
            } else {
                frames.append(frame)
                times.append(time)
            }
        }
        guard frames.count >= 2 else { throw ReadError(description: "\(path).timing.jsonl: fewer than two periods") }
        periodFrames = frames
        periodTimes = times
        self.underruns = underruns
    }

    /// Emission time (CLOCK_MONOTONIC ns, fractional) of a possibly fractional device frame.
    public func emissionTime(ofFrame frame: Double) -> Double {
        // Periods are equally spaced in frames; find the one holding `frame`.
        let period = Double(periodFrames[1] - periodFrames[0])
        var index = Int(frame / period)
        index = max(0, min(index, periodFrames.count - 2))
        let f0 = Double(periodFrames[index]), f1 = Double(periodFrames[index + 1])
        let t0 = Double(periodTimes[index]), t1 = Double(periodTimes[index + 1])
        return t0 + (frame - f0) * (t1 - t0) / (f1 - f0)
    }

    /// The (fractional) device frame emitted at time `time`: the inverse of `emissionTime`.
    public func frame(atEmissionTime time: Double) -> Double {
        var low = 0, high = periodTimes.count - 1
        while high - low > 1 {
            let mid = (low + high) / 2
            if Double(periodTimes[mid]) <= time { low = mid } else { high = mid }
        }
        let f0 = Double(periodFrames[low]), f1 = Double(periodFrames[high])
        let t0 = Double(periodTimes[low]), t1 = Double(periodTimes[high])
        return f0 + (time - t0) * (f1 - f0) / (t1 - t0)
    }

    /// The first frame whose magnitude exceeds `threshold` (the start of audio), if any.
    public func firstSoundFrame(threshold: Float = 1e-4) -> Int? {
        for i in 0..<samples.count where abs(samples[i]) > threshold { return i / channelCount }
        return nil
    }
}
