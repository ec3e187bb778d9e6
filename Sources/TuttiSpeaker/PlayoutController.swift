import TuttiCore
import TuttiProtocol
/// Decides, block by block, what a speaker's device must emit so that every timeline frame is
/// heard at its anchored server time: silence, or audio read from the timeline at a fractional
/// position advancing by a step (timeline frames per device frame) close to 1.
///
/// Starting (from silence) aligns exactly, by jumping the read position to where the timeline
/// is at that device frame. Once playing it never jumps: it steers the step so the position
/// error decays with `correctionTimeConstant` frames, within `maximumCorrection` of the nominal
/// rate — ±500 ppm, a pitch change of at most 0.87 cent, far below audibility. Only an error past
/// `resyncThreshold` (a stall or an outage longer than the buffer) resynchronizes with a jump,
/// which is counted. Pure and deterministic: the speaker feeds it its clocks; tests feed it
/// simulated ones.
public struct PlayoutController: Sendable {
    public struct Configuration: Sendable {
        /// Frames over which a position error decays (e-folding), half a second.
        public var correctionTimeConstant: Double = 24_000
        /// Largest deviation of the step from nominal, as a fraction: ±500 ppm, 0.87 cent, a
        /// sixth of the smallest pitch change a trained ear hears on a sustained tone. Issue 33
        /// asked for ±200 ppm; that cannot absorb a rate the room does not know yet: its clock
        /// (±100 ppm) and its crystal (±100 ppm) together may be 200 ppm off the nominal the room
        /// computes from a young estimate, and the correction must cover that before it can
        /// close any error. At ±200 ppm, 64 rooms on this machine ended up 21–23 ms apart at the
        /// median (p99 36–39 ms, two runs); at ±500 ppm, 111 µs (p99 10 ms), docs/MULTIROOM.md.
        public var maximumCorrection: Double = 0.0005
        /// Errors beyond this many frames resynchronize with a jump.
        public var resyncThreshold: Double = 480
        public init() {}
    }

    /// One instruction for a run of device frames.
    public enum Instruction: Sendable, Equatable {
        case silence(frames: Int)
        /// Emit `frames` frames reading from `start` (when set, jump there first) at `step`.
        case audio(frames: Int, start: FramePosition?, step: Double)
    }

    public let configuration: Configuration
    /// Where the next audio frame will be read, while playing.
    public private(set) var position: FramePosition?
    /// Latest measured error: read position minus where the timeline is, in frames.
    public private(set) var lastError: Double = 0
    /// Jumps made while playing (not starts, resumes or seeks).
    public private(set) var resyncCount = 0
    /// The anchor being followed: a new one (resume, seek) realigns without counting a resync.
    private var followedAnchor: TimelineAnchor?

    public init(configuration: Configuration = Configuration()) {
        self.configuration = configuration
    }

    /// Stops reading audio (the next audio instruction starts with an aligning jump).
    public mutating func stopReading() {
        position = nil
        followedAnchor = nil
    }

    /// The plan for device frames `firstFrame ..< firstFrame + frameCount`, whose hearing times
    /// on the server clock are given by `heard`.
    public mutating func plan(firstFrame: Int64, frameCount: Int, heard: LinearTimeMap, schedule: TimelineSchedule) -> [Instruction] {
        var instructions: [Instruction] = []
        var cursor = firstFrame
        let end = firstFrame + Int64(frameCount)
        let nominalStep = heard.nanosecondsPerFrame * Double(schedule.sampleRate) / 1e9
        while cursor < end {
            let time = heard.time(ofFrame: cursor)
            var runEnd = end
            if let change = schedule.nextChange(after: time) {
                runEnd = min(end, max(cursor + 1, heard.firstFrame(atOrAfter: change)))
            }
            let count = Int(runEnd - cursor)
            if let target = schedule.position(atServer: time) {
                let anchor = schedule.anchor(atServer: time)
                if anchor != followedAnchor {
                    followedAnchor = anchor
                    position = nil
                }
                if let current = position {
                    let error = target.distance(to: current)
                    lastError = error
                    if abs(error) > configuration.resyncThreshold {
                        resyncCount += 1
                        instructions.append(.audio(frames: count, start: target, step: nominalStep))
                        position = target.advanced(by: Double(count) * nominalStep)
                    } else {
                        let limit = configuration.maximumCorrection * nominalStep
                        let correction = max(-limit, min(limit, -error / configuration.correctionTimeConstant))
                        let step = nominalStep + correction
                        instructions.append(.audio(frames: count, start: nil, step: step))
                        position = current.advanced(by: Double(count) * step)
                    }
                } else {
                    lastError = 0
                    instructions.append(.audio(frames: count, start: target, step: nominalStep))
                    position = target.advanced(by: Double(count) * nominalStep)
                }
            } else {
                position = nil
                followedAnchor = nil
                instructions.append(.silence(frames: count))
            }
            cursor = runEnd
        }
        return instructions
    }
}
