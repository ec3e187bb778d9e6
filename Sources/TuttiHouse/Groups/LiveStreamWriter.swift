import TuttiCore
import TuttiMedia
import TuttiProtocol
import TuttiStreamAudio

/// Writes a live source's frames onto a group's timeline: converted to the house's rate
/// (libsoxr, `Resampler`), then read at a rate that follows the source's clock
/// (`VariableRateResampler`), so that each source frame is heard at the house time the source
/// asked for however far its clock drifts from the house's.
///
/// A *section* is a run of the source's frames written from one timeline frame on: a stream's
/// first, and one after each flush. Its first frame is heard at the time the source's schedule
/// gives it (`startTime`, once a schedule is known); from there the drift stage keeps each
/// later frame within `deadbandNanoseconds` of its scheduled time, correcting at most
/// `maximumCorrection` (±200 ppm: a pitch change nobody hears). While within the deadband it
/// reads at exactly 1, so a source on the house's own clock passes through unaltered.
///
/// Thread-safety: confined to the house's loop, as its group is.
final class LiveStreamWriter {
    let output: StreamTimelineOutput
    let sourceRate: Int
    let rate: Int
    let channelCount: Int
    private var converter: Resampler?
    private let drift: VariableRateResampler
    /// Converted frames the drift stage has not taken yet, and its output's scratch.
    private var converted: [Float] = []
    private var rendered: [Float]
    private static let renderFrames = 4096

    /// The timeline frame the section's first source frame is written at.
    private(set) var sectionStart: Int64
    /// The section's first source frame, and the next one expected.
    private(set) var firstSourceFrame: Int64?
    private var nextSourceFrame: Int64 = 0
    /// The source's latest schedule point.
    private(set) var schedule: (sourceFrame: Int64, hostTime: Int64)?
    /// House time `sectionStart` is heard at, once anchored.
    var startTime: Int64?
    private(set) var step = 1.0
    private var correcting = false

    static let deadbandNanoseconds: Int64 = 1_000_000
    static let settledNanoseconds: Int64 = 250_000
    static let maximumCorrection = 200e-6
    /// The correction takes the error out over this long (then at most `maximumCorrection`).
    static let correctionSpanNanoseconds: Int64 = 2_000_000_000

    init(output: StreamTimelineOutput, sourceRate: Int, rate: Int, channelCount: Int) throws(MediaError) {
        self.output = output
        self.sourceRate = sourceRate
        self.rate = rate
        self.channelCount = channelCount
        drift = VariableRateResampler(channelCount: channelCount, inputCapacityFrames: 16384)
        rendered = [Float](repeating: 0, count: Self.renderFrames * channelCount)
        sectionStart = output.writtenFrames
        try startSection(at: sectionStart)
    }

    /// Where the next section starts: its first source frame is written at `frame`, and is
    /// heard when its schedule says.
    /// A jump the source did not announce keeps its schedule (`keepingSchedule`): its clock
    /// still maps its frames to house times. A flush does not (a sender's frames after a pause
    /// are scheduled anew).
    func startSection(at frame: Int64, keepingSchedule: Bool = false) throws(MediaError) {
        converter = sourceRate == rate ? nil : try Resampler(inputRate: sourceRate, outputRate: rate, channelCount: channelCount)
        drift.reset(firstInputFrame: 0, position: FramePosition(frame: 0))
        converted.removeAll(keepingCapacity: true)
        sectionStart = frame
        firstSourceFrame = nil
        if !keepingSchedule { schedule = nil }
        startTime = nil
        step = 1
        correcting = false
    }

    /// Timeline frames written so far.
    var writtenFrames: Int64 { output.writtenFrames }

    /// The house time the section's first frame is to be heard at, once the source said.
    var scheduledStartTime: Int64? {
        guard let schedule, let first = firstSourceFrame else { return nil }
        return schedule.hostTime + WideMath.multiplyDivide(first - schedule.sourceFrame, 1_000_000_000, Int64(sourceRate))
    }

    func noteSchedule(sourceFrame: Int64, hostTime: Int64) {
        schedule = (sourceFrame, hostTime)
    }

    enum Outcome { case written, restart }

    /// Writes `frames` source frames numbered from `sourceFrame`. A gap under a second is
    /// written as silence, frames already written are skipped; a longer jump, or one back,
    /// asks the caller to start a new section (`restart`).
    func write(_ samples: [Float], frames: Int, sourceFrame: Int64) -> Outcome {
        if firstSourceFrame == nil {
            firstSourceFrame = sourceFrame
            nextSourceFrame = sourceFrame
        }
        var skip = 0
        if sourceFrame > nextSourceFrame {
            let gap = sourceFrame - nextSourceFrame
            guard gap <= Int64(sourceRate) else { return .restart }
            convert([Float](repeating: 0, count: Int(gap) * channelCount), frames: Int(gap))
        } else if sourceFrame < nextSourceFrame {
            let overlap = nextSourceFrame - sourceFrame
            guard overlap < Int64(frames) else { return overlap > Int64(sourceRate) ? .restart : .written }
            skip = Int(overlap)
        }
        samples.withUnsafeBufferPointer { buffer in
            let rest = Array(buffer[(skip * channelCount)..<(frames * channelCount)])
            convert(rest, frames: frames - skip)
        }
        nextSourceFrame = sourceFrame + Int64(frames)
        return .written
    }

    /// Ends the section: the converters' tails are written out.
    func finishSection() {
        if let converter { converter.flush(appendingTo: &converted) }
        // The drift stage renders a frame once the frames its kernel reaches are in.
        converted += [Float](repeating: 0, count: drift.lookaheadFrames * channelCount)
        drain()
    }

    /// Writes silence up to timeline frame `frame`.
    func pad(to frame: Int64) {
        let missing = Int(frame - writtenFrames)
        guard missing > 0 else { return }
        let silence = [Float](repeating: 0, count: missing * channelCount)
        _ = silence.withUnsafeBufferPointer { output.write($0.baseAddress!, frames: missing) }
    }

    private func convert(_ samples: [Float], frames: Int) {
        guard frames > 0 else { return }
        if let converter {
            samples.withUnsafeBufferPointer { converter.process($0.baseAddress!, frames: frames, appendingTo: &converted) }
        } else {
            converted += samples
        }
        drain()
    }

    /// Moves converted frames through the drift stage onto the timeline, updating its rate as
    /// it goes.
    private func drain() {
        while true {
            let available = converted.count / channelCount
            let taken = available == 0 ? 0 : converted.withUnsafeBufferPointer { drift.appendInput($0.baseAddress!, frames: available) }
            converted.removeFirst(taken * channelCount)
            updateStep()
            let count = rendered.withUnsafeMutableBufferPointer { drift.render(into: $0.baseAddress!, frames: Self.renderFrames, step: step) }
            if count > 0 {
                // A live stream is never `depthFrames` ahead of its playhead: it arrives in real time.
                _ = rendered.withUnsafeBufferPointer { output.write($0.baseAddress!, frames: count) }
            }
            if count == 0 && taken == 0 { return }
        }
    }

    /// How far, in timeline frames, the next frame's source position is ahead of where the
    /// schedule puts it (positive: it would be heard early); nil until anchored.
    var scheduleError: Double? {
        guard let startTime, let schedule, let first = firstSourceFrame else { return nil }
        let heard = Double(startTime) + Double(writtenFrames - sectionStart) * 1e9 / Double(rate)
        let source = Double(schedule.sourceFrame) + (heard - Double(schedule.hostTime)) * Double(sourceRate) / 1e9
        let wanted = (source - Double(first)) * Double(rate) / Double(sourceRate)
        let position = drift.position
        return Double(position.frame) + position.fraction - wanted
    }

    private func updateStep() {
        guard let error = scheduleError else { return }
        let nanoseconds = abs(error) * 1e9 / Double(rate)
        if correcting && nanoseconds < Double(Self.settledNanoseconds) {
            correcting = false
        } else if !correcting && nanoseconds > Double(Self.deadbandNanoseconds) {
            correcting = true
        }
        guard correcting else { step = 1; return }
        let span = Double(Self.correctionSpanNanoseconds) * Double(rate) / 1e9
        step = 1 - max(-Self.maximumCorrection, min(Self.maximumCorrection, error / span))
    }
}
