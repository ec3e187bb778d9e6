import Foundation

/// Measures how a set of rooms played one timeline, from their virtual devices' captures:
/// when each room emitted each checkpoint of the reference signal (to a fraction of a sample,
/// by matching waveforms), how far apart the rooms were, and whether any room skipped,
/// repeated or dropped audio.
public struct SyncAnalysis: Sendable {
    public struct Room: Sendable {
        public var name: String
        public var capture: VirtualCapture
        /// Acoustic delay after the DAC the room compensates: heard = emitted + latency.
        public var latencyNanoseconds: Double
        /// For a room whose card played something else first (a room moved between groups): a
        /// time (CLOCK_MONOTONIC ns) after which its card fell silent and then began this
        /// reference; that first sound gives the first guess of its lag. From its capture's first sound, that guess came
        /// from the other music, seconds away, and the ±100 ms search found a false match where
        /// two tones recur (a residual of 7–20 %, and a gain 3–20 % low).
        public var playsFrom: Double?
        public init(name: String, capture: VirtualCapture, latencyNanoseconds: Double, playsFrom: Double? = nil) {
            self.name = name
            self.capture = capture
            self.latencyNanoseconds = latencyNanoseconds
            self.playsFrom = playsFrom
        }
    }

    public struct Result: Sendable {
        /// Per checkpoint: spread of the rooms' hearing times, ns.
        public var skews: [Double]
        /// Per room: hearing time of timeline frame 0 (CLOCK_MONOTONIC ns).
        public var startTimes: [String: Double]
        /// Per room: checkpoints where the room's lag jumped (a skip, repeat or gap).
        public var discontinuities: [String: Int]
        /// Where: room, timeline frame, and the jump in frames.
        public var jumps: [(room: String, frame: Int, frames: Double)] = []
        public var underruns: [String: Int]
        /// Checkpoints that could not be matched (silence where audio was due).
        public var unmatched: [String: Int]
        /// How many rooms were heard at each checkpoint.
        public var roomsPerCheckpoint: [Int] = []
        /// Per checkpoint: its timeline frame and each heard room's hearing time (ns).
        public var series: [(frame: Int, heard: [String: Double])] = []
        /// Per checkpoint: each heard room's gain against the reference (its volume).
        public var gains: [(frame: Int, gain: [String: Double])] = []

        public func percentile(_ p: Double) -> Double { nearestRankPercentile(skews.sorted(), p) }
        public var maximum: Double { skews.max() ?? .nan }
    }

    /// Frames matched at each checkpoint.
    static let window = 1024

    /// Where `room` emits timeline frame `frame` of `reference`: the device frame (fractional),
    /// searching lags around `guess`, and the room's gain there (its volume). Matching allows any
    /// gain, so volume changes do not hide a room. Returns nil if nothing there matches.
    ///
    /// `ignoringSilence` leaves out the frames the room emitted as digital silence: for a room's
    /// first match, whose window may hold the moment it started. Counted, that silence made the
    /// true lag match worse than one where the music repeats itself (two tones back in phase
    /// 437 frames later matched 9.1 ms off, and tracking then followed the false match). Tracking
    /// counts every frame, so a gap is never explained away.
    static func locate(_ frame: Int, in capture: VirtualCapture, reference: [Float], guess: Int, search: Int, window: Int = Self.window,
                       ignoringSilence: Bool = false) -> (lag: Double, residual: Double, gain: Double)? {
        let channels = capture.channelCount
        let samples = capture.samples
        guard frame >= 0, (frame + window) * channels <= reference.count else { return nil }
        var energy = 0.0
        for i in 0..<(window * channels) { let r = Double(reference[frame * channels + i]); energy += r * r }
        guard energy > 1e-6 else { return nil }
        /// The residual energy after the best gain, relative to the reference's energy in the
        /// frames compared, and that gain.
        func error(_ lag: Int) -> (residual: Double, gain: Double) {
            let start = frame + lag
            guard start >= 0, (start + window) * channels <= samples.count else { return (.infinity, 0) }
            var outEnergy = 0.0, cross = 0.0, compared = energy, skipped = 0
            let base = start * channels, refBase = frame * channels
            for f in 0..<window {
                let i = f * channels
                if ignoringSilence && (0..<channels).allSatisfy({ samples[base + i + $0] == 0 })
                    && (0..<channels).contains(where: { reference[refBase + i + $0] != 0 }) {
                    for c in 0..<channels { let r = Double(reference[refBase + i + c]); compared -= r * r }
                    skipped += 1
                    continue
                }
                for c in 0..<channels {
                    let o = Double(samples[base + i + c])
                    outEnergy += o * o
                    cross += o * Double(reference[refBase + i + c])
                }
            }
            // At least half the window heard, with energy to match.
            guard skipped * 2 <= window, compared > energy * 0.25 else { return (.infinity, 0) }
            let gain = cross / compared
            return (max(0, outEnergy - cross * gain) / compared, gain)
        }
        var bestLag = guess, best = Double.infinity, bestGain = 0.0
        for lag in (guess - search)...(guess + search) {
            let (e, g) = error(lag)
            if e < best { best = e; bestLag = lag; bestGain = g }
        }
        // A match explains most of the output's energy with a positive gain.
        let outputEnergy = bestGain * bestGain + best
        guard best.isFinite, bestGain > 0.001, best < outputEnergy * 0.5 else { return nil }
        // Sub-sample refinement: the error is close to a parabola around its minimum.
        let left = error(bestLag - 1).residual, right = error(bestLag + 1).residual
        var fraction = 0.0
        let curvature = left + right - 2 * best
        if curvature > 0, left.isFinite, right.isFinite { fraction = 0.5 * (left - right) / curvature }
        return (Double(bestLag) + max(-0.5, min(0.5, fraction)), best / outputEnergy, bestGain)
    }

    /// Analyses rooms that played `reference` (interleaved, the stream's sample rate) from
    /// timeline frame 0, checking every `interval` frames.
    public static func analyse(rooms: [Room], reference: [Float], interval: Int = 12000, edgeFrames: Int = 24000) -> Result {
        var result = Result(skews: [], startTimes: [:], discontinuities: [:], underruns: [:], unmatched: [:])
        guard let first = rooms.first else { return result }
        let channels = first.capture.channelCount
        let referenceFrames = reference.count / channels
        var lags: [String: Double] = [:]
        for room in rooms {
            result.underruns[room.name] = room.capture.underruns.count
            result.discontinuities[room.name] = 0
            result.unmatched[room.name] = 0
            // Coarse: audio starts at the first loud frame; the reference's first loud frame gives the lag.
            let refStart = (0..<reference.count).first { abs(reference[$0]) > 1e-4 }.map { $0 / channels } ?? 0
            let start = room.playsFrom.map { room.capture.firstSoundFrame(afterSilenceFrom: Int(room.capture.frame(atEmissionTime: $0))) ?? 0 }
                ?? room.capture.firstSoundFrame() ?? 0
            lags[room.name] = Double(start - refStart)
        }
        var checkpoint = max(edgeFrames, 0)
        var previousLag: [String: Double] = [:]
        var previousCheckpoint: [String: Int] = [:]
        var matched: [Int] = []
        while checkpoint + 4096 < referenceFrames - edgeFrames {
            var heard: [Double] = []
            var heardByRoom: [String: Double] = [:]
            var gainByRoom: [String: Double] = [:]
            // Rooms already tracked first; their mean hearing time guides rooms that start late.
            let ordered = rooms.filter { previousLag[$0.name] != nil } + rooms.filter { previousLag[$0.name] == nil }
            for room in ordered {
                var guess = Int(lags[room.name]!.rounded())
                var search = 16
                if previousLag[room.name] == nil {
                    // The first sound only gives the lag if the room started at timeline frame 0;
                    // one that started late (a play the rooms could not meet) is up to 100 ms off.
                    search = 4800
                    if !heard.isEmpty {
                        search = 480
                        let pilot = heard.reduce(0, +) / Double(heard.count)
                        guess = Int((room.capture.frame(atEmissionTime: pilot - room.latencyNanoseconds) - Double(checkpoint)).rounded())
                    }
                }
                // A tracked room whose capture ends before this checkpoint's window would: its card
                // stopped (a process killed), so it is not heard here. The wider searches below
                // would only find a false match earlier in its capture: a room killed mid-track
                // "jumped" 27–84 ms at its last checkpoint in about one run in ten under load.
                if previousLag[room.name] != nil, checkpoint + guess + Self.window > room.capture.frameCount {
                    result.unmatched[room.name, default: 0] += 1
                    continue
                }
                var located = locate(checkpoint, in: room.capture, reference: reference, guess: guess, search: search,
                                     ignoringSilence: previousLag[room.name] == nil)
                if located == nil && previousLag[room.name] != nil {
                    // Lost after a jump (a resync, a latency set while playing): look again, up to
                    // 100 ms either way; the jump is counted below.
                    located = locate(checkpoint, in: room.capture, reference: reference, guess: guess, search: 4800)
                }
                if located == nil && previousLag[room.name] != nil && !heard.isEmpty {
                    // Back after a silent stretch of its card (a device that vanished and
                    // returned): its capture skips what it missed, so find it where the other
                    // rooms are heard; the skip is counted as a jump below.
                    let pilot = heard.reduce(0, +) / Double(heard.count)
                    let rejoin = Int((room.capture.frame(atEmissionTime: pilot - room.latencyNanoseconds) - Double(checkpoint)).rounded())
                    located = locate(checkpoint, in: room.capture, reference: reference, guess: rejoin, search: 480)
                }
                guard let found = located else {
                    result.unmatched[room.name, default: 0] += 1
                    continue
                }
                if let previous = previousLag[room.name] {
                    // Steering moves the lag by at most the ±500 ppm correction plus the clocks'
                    // and crystal's drifts (the allowance keeps room to spare); anything faster is a jump (a resync is ≥ 480 frames,
                    // a stall ≥ 240).
                    let allowed = Double(checkpoint - previousCheckpoint[room.name, default: checkpoint - interval]) * 0.0011 + 1.0
                    if abs(found.lag - previous) > allowed {
                        result.discontinuities[room.name, default: 0] += 1
                        result.jumps.append((room.name, checkpoint, found.lag - previous))
                    }
                }
                previousLag[room.name] = found.lag
                previousCheckpoint[room.name] = checkpoint
                lags[room.name] = found.lag
                let deviceFrame = Double(checkpoint) + found.lag
                heard.append(room.capture.emissionTime(ofFrame: deviceFrame) + room.latencyNanoseconds)
                heardByRoom[room.name] = heard.last!
                gainByRoom[room.name] = found.gain
                if result.startTimes[room.name] == nil {
                    // Timeline frame 0 was heard `checkpoint` frames (at the device's rate) earlier.
                    let zeroFrame = deviceFrame - Double(checkpoint)
                    result.startTimes[room.name] = room.capture.emissionTime(ofFrame: zeroFrame) + room.latencyNanoseconds
                }
            }
            // Rooms not playing this checkpoint (not yet joined, or left) do not count.
            if heard.count >= 2, let low = heard.min(), let high = heard.max() { result.skews.append(high - low) }
            matched.append(heard.count)
            result.series.append((checkpoint, heardByRoom))
            result.gains.append((checkpoint, gainByRoom))
            checkpoint += interval
        }
        result.roomsPerCheckpoint = matched
        return result
    }
}
