import TuttiCore
import Testing
import TuttiProtocol
@testable import TuttiSpeaker

/// The controller against a simulated room: a device crystal 80 ppm fast, 5 ms of amplifier
/// latency, hearing times on the server clock given by a straight line.
@Suite struct PlayoutControllerTests {
    static let rate = 48000
    static let start: Int64 = 7_000_000_000
    static let latency: Int64 = 5_000_000
    static let nanosecondsPerFrame = 1e9 / (48000 * (1 + 80e-6))

    static func heard(shift: Int64 = 0) -> LinearTimeMap {
        LinearTimeMap(referenceFrame: 0, referenceTime: start + latency + shift, nanosecondsPerFrame: nanosecondsPerFrame)
    }

    /// Runs blocks and returns, for every audio frame, (device frame, timeline position read).
    struct Run {
        var controller = PlayoutController()
        var frames: [(device: Int64, position: FramePosition)] = []
        var silentFrames = 0
        var maximumStepDeviation = 0.0

        mutating func blocks(_ range: Range<Int64>, heard: LinearTimeMap, schedule: TimelineSchedule, block: Int = 480) {
            var device = range.lowerBound * Int64(block)
            for _ in range {
                var read = controller.position
                for instruction in controller.plan(firstFrame: device, frameCount: block, heard: heard, schedule: schedule) {
                    switch instruction {
                    case .silence(let count):
                        silentFrames += count
                        device += Int64(count)
                        read = nil
                    case .audio(let count, let start, let step):
                        if let start { read = start }
                        maximumStepDeviation = max(maximumStepDeviation, abs(step - heard.nanosecondsPerFrame * 48000 / 1e9))
                        for _ in 0..<count {
                            frames.append((device, read!))
                            read = read!.advanced(by: step)
                            device += 1
                        }
                    }
                }
            }
        }
    }

    /// Where the timeline really is when device frame `d` is heard.
    func truth(_ d: Int64, _ heard: LinearTimeMap, _ schedule: TimelineSchedule) -> FramePosition? {
        schedule.position(atServer: heard.time(ofFrame: d))
    }

    @Test func startsExactlyAtTheAnchorAndTracksForAMinute() {
        var schedule = TimelineSchedule(sampleRate: Self.rate)
        let anchorTime = Self.start + 1_000_170_000
        schedule.apply(TimelineAnchor(timelineFrame: 0, serverTime: anchorTime, isPlaying: true), now: Self.start)
        var run = Run()
        run.blocks(0..<6000, heard: Self.heard(), schedule: schedule)
        let first = run.frames.first!
        // The first audio frame is the first device frame heard at or after the anchor time…
        #expect(Self.heard().time(ofFrame: first.device) >= anchorTime)
        #expect(Self.heard().time(ofFrame: first.device - 1) < anchorTime)
        // …reading the timeline within a frame of its start, and every frame is where it should be.
        #expect(first.position.frame == 0)
        var worst = 0.0
        for (device, position) in run.frames { worst = max(worst, abs(position.distance(to: truth(device, Self.heard(), schedule)!))) }
        #expect(worst < 1e-3)  // 20 ns
        #expect(run.controller.resyncCount == 0)
    }

    /// A clock-estimate correction (100 µs ≈ 4.8 frames) is absorbed by a slight, bounded rate
    /// change — never by a jump — and the error decays.
    @Test func correctionsAreSmoothAndBounded() {
        var schedule = TimelineSchedule(sampleRate: Self.rate)
        schedule.apply(TimelineAnchor(timelineFrame: 1000, serverTime: Self.start + 100_000_000, isPlaying: true), now: Self.start)
        var run = Run()
        run.blocks(0..<1000, heard: Self.heard(), schedule: schedule)
        let shifted = Self.heard(shift: 100_000)
        run.blocks(1000..<1100, heard: shifted, schedule: schedule)
        #expect(run.controller.resyncCount == 0)
        #expect(run.maximumStepDeviation <= 0.0005 * 1.0001)
        let early = abs(run.frames.last!.position.distance(to: truth(run.frames.last!.device, shifted, schedule)!))
        #expect(early > 0.3)  // 1 s after the change, e^-2 of the error remains: no jump
        run.blocks(1100..<3000, heard: shifted, schedule: schedule)
        let settled = abs(run.frames.last!.position.distance(to: truth(run.frames.last!.device, shifted, schedule)!))
        #expect(settled < 0.05, "error after 19 s: \(settled) frames")
        // Continuity: consecutive frames never move by more than a step (no jump).
        for (a, b) in zip(run.frames, run.frames.dropFirst()) {
            #expect(abs(a.position.distance(to: b.position) - 1) < 0.001)
        }
    }

    @Test func pauseAndResumeLandOnTheAnchoredFrames() {
        var schedule = TimelineSchedule(sampleRate: Self.rate)
        schedule.apply(TimelineAnchor(timelineFrame: 0, serverTime: Self.start + 50_000_000, isPlaying: true), now: Self.start)
        let pauseTime = Self.start + 2_000_000_000
        let pauseFrame = schedule.position(atServer: pauseTime)!.frame
        schedule.apply(TimelineAnchor(timelineFrame: pauseFrame, serverTime: pauseTime, isPlaying: false), now: Self.start)
        let resumeTime = Self.start + 3_500_000_000
        schedule.apply(TimelineAnchor(timelineFrame: pauseFrame, serverTime: resumeTime, isPlaying: true), now: Self.start)
        var run = Run()
        run.blocks(0..<1000, heard: Self.heard(), schedule: schedule)
        // Audio stops at the last frame heard before the pause time and resumes at the first at
        // or after the resume time, continuing from the pause frame.
        let gap = zip(run.frames, run.frames.dropFirst()).first { $1.device != $0.device + 1 }!
        #expect(Self.heard().time(ofFrame: gap.0.device) < pauseTime && Self.heard().time(ofFrame: gap.0.device + 1) >= pauseTime)
        #expect(gap.0.position.frame == pauseFrame - 1 || gap.0.position.frame == pauseFrame)
        #expect(Self.heard().time(ofFrame: gap.1.device) >= resumeTime && Self.heard().time(ofFrame: gap.1.device - 1) < resumeTime)
        #expect(gap.1.position.frame == pauseFrame)
        #expect(run.controller.resyncCount == 0)
    }

    @Test func seekRealignsWithoutCountingAResync() {
        var schedule = TimelineSchedule(sampleRate: Self.rate)
        schedule.apply(TimelineAnchor(timelineFrame: 0, serverTime: Self.start, isPlaying: true), now: Self.start)
        schedule.apply(TimelineAnchor(timelineFrame: 5_000_000, serverTime: Self.start + 1_000_000_000, isPlaying: true), now: Self.start)
        var run = Run()
        run.blocks(0..<200, heard: Self.heard(), schedule: schedule)
        #expect(run.controller.resyncCount == 0)
        let jump = zip(run.frames, run.frames.dropFirst()).first { $0.position.distance(to: $1.position) > 2 }!
        #expect(jump.1.position.frame == 5_000_000)
    }

    /// When the read position is far off (the engine stalled), the controller jumps and counts it.
    @Test func largeErrorsResynchronize() {
        var schedule = TimelineSchedule(sampleRate: Self.rate)
        schedule.apply(TimelineAnchor(timelineFrame: 0, serverTime: Self.start, isPlaying: true), now: Self.start)
        var controller = PlayoutController()
        _ = controller.plan(firstFrame: 0, frameCount: 480, heard: Self.heard(), schedule: schedule)
        // Skip 100 ms of device frames without reading: a stall.
        let instructions = controller.plan(firstFrame: 480 + 4800, frameCount: 480, heard: Self.heard(), schedule: schedule)
        #expect(controller.resyncCount == 1)
        guard case .audio(_, let start?, _) = instructions.first else { Issue.record("expected a jump"); return }
        #expect(abs(start.distance(to: truth(5280, Self.heard(), schedule)!)) < 1e-6)
    }

    @Test func timelinePositionsAreExact() {
        var schedule = TimelineSchedule(sampleRate: 48000)
        schedule.apply(TimelineAnchor(timelineFrame: 10, serverTime: 1_000, isPlaying: true), now: 0)
        #expect(schedule.position(atServer: 999) == nil)
        #expect(schedule.position(atServer: 1_000) == FramePosition(frame: 10))
        #expect(schedule.position(atServer: 1_000 + 1_000_000_000) == FramePosition(frame: 48010))
        let half = schedule.position(atServer: 1_000 + 10_417)!
        #expect(half.frame == 10 && abs(half.fraction - 0.500016) < 1e-9)
        let map = LinearTimeMap(referenceFrame: 100, referenceTime: 5_000, nanosecondsPerFrame: 20_833.3)
        for t: Int64 in [5_000, 5_001, 26_000, -1_000_000, 9_999_999_999] {
            let f = map.firstFrame(atOrAfter: t)
            #expect(map.time(ofFrame: f) >= t && map.time(ofFrame: f - 1) < t)
        }
    }
}
