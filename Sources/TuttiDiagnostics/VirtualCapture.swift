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

    /// A capture held in memory: what a simulated card emitted and when.
    public init(sampleRate: Int, channelCount: Int, samples: [Float], periodFrames: [Int64], periodTimes: [Int64],
                underruns: [(frame: Int64, frames: Int64)] = []) {
        self.sampleRate = sampleRate
        self.channelCount = channelCount
        self.samples = samples
        self.periodFrames = periodFrames
        self.periodTimes = periodTimes
        self.underruns = underruns
    }

    public init(path: String) throws {
        let wav = try WAVFile(path: path)
        sampleRate = wav.sampleRate
        channelCount = wav.channelCount
        var samples = wav.samples
        var frames: [Int64] = [], times: [Int64] = [], underruns: [(Int64, Int64)] = []
        let text = try String(contentsOfFile: path + ".timing.jsonl", encoding: .utf8)
        let lines = text.split(separator: "\n")
        for (index, line) in lines.enumerated() {
            guard let object = try? JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any],
                  let frame = (object["frame"] as? NSNumber)?.int64Value, let time = (object["mono_ns"] as? NSNumber)?.int64Value else {
                // A device killed mid-write leaves half a last line; anything else is damage.
                if index == lines.count - 1 && !text.hasSuffix("\n") { break }
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
        // Each timing line heads a period, so the file places every frame up to one period after
        // its last line. A device killed (SIGKILL) loses what its two files still buffered, and
        // not alike: a room killed mid-track left 45 048 frames of audio past its timing file's
        // end, placed by extrapolation, and whatever broke the card's regular schedule among them
        // (an underrun, whose line went with the rest) showed as a 39–84 ms jump in sync checks
        // (`threeRoomsPlayInSyncJoinLeaveAndDie`, 2 runs in 20 under load, and CI). Frames that
        // cannot be placed are left out.
        let placeable = Int(frames[frames.count - 1] + max(0, frames[frames.count - 1] - frames[frames.count - 2]))
        if samples.count > placeable * channelCount { samples.removeLast(samples.count - placeable * channelCount) }
        self.samples = samples
        periodFrames = frames
        periodTimes = times
        self.underruns = underruns
    }

    /// Emission time (CLOCK_MONOTONIC ns, fractional) of a possibly fractional device frame.
    ///
    /// The timing points need not be evenly spaced: a card that stopped (a route change, a
    /// reopen at another period) marks the end of one run and the start of the next with two
    /// points at the same frame, and a frame belongs to the run it starts or continues.
    public func emissionTime(ofFrame frame: Double) -> Double {
        // The last point at or before `frame`, and the next one.
        var low = 0, high = periodFrames.count - 1
        while high - low > 1 {
            let mid = (low + high) / 2
            if Double(periodFrames[mid]) <= frame { low = mid } else { high = mid }
        }
        if Double(periodFrames[high]) <= frame { low = max(0, high - 1) }
        let f0 = Double(periodFrames[low]), f1 = Double(periodFrames[high])
        let t0 = Double(periodTimes[low]), t1 = Double(periodTimes[high])
        guard f1 > f0 else { return t0 }
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
        guard t1 > t0 else { return f0 }
        return f0 + (time - t0) * (f1 - f0) / (t1 - t0)
    }

    /// Whether the card emitted nothing at `time`: it had stopped (an underrun, a route change)
    /// between two timing points at the same frame, as a real card is silent then.
    public func isStopped(atEmissionTime time: Double) -> Bool {
        var low = 0, high = periodTimes.count - 1
        guard Double(periodTimes[low]) <= time, time < Double(periodTimes[high]) else { return false }
        while high - low > 1 {
            let mid = (low + high) / 2
            if Double(periodTimes[mid]) <= time { low = mid } else { high = mid }
        }
        return periodFrames[low] == periodFrames[high]
    }

    /// The first frame whose magnitude exceeds `threshold` (the start of audio), if any.
    public func firstSoundFrame(threshold: Float = 1e-4) -> Int? {
        for i in 0..<samples.count where abs(samples[i]) > threshold { return i / channelCount }
        return nil
    }

    /// The first frame whose magnitude exceeds `threshold` after a run of at least `silence`
    /// frames of digital silence at or after `frame`: where the card began to play again after
    /// it stopped (a room moved from one group's music to another's).
    public func firstSoundFrame(afterSilenceFrom frame: Int, silence: Int = 480, threshold: Float = 1e-4) -> Int? {
        var quiet = 0
        for f in max(0, frame)..<frameCount {
            let base = f * channelCount
            let loud = (0..<channelCount).contains { abs(samples[base + $0]) > threshold }
            if loud && quiet >= silence { return f }
            quiet = (0..<channelCount).allSatisfy { samples[base + $0] == 0 } ? quiet + 1 : 0
        }
        return nil
    }
}
