import TuttiCore

/// The real-time half of a `SampleBufferRenderer`: a preallocated ring of frames addressed by
/// device frame, which the device's render thread plays into the mix.
///
/// The feeder decides which media frame plays at which device frame (it knows the timeline);
/// the render thread only plays each run of frames at the device frame it was written for. So
/// the render thread needs no timeline logic, and everything it touches is preallocated:
///
/// - `frames`: the audio, in the order it will play.
/// - `runs`: where each contiguous run starts: (ring position, device frame). A run starts
///   after a gap or a change of timeline.
/// - `kills`: (ring position W, device frame X): frames written before W that were meant for
///   device frame X or later are dead. This is how a flush or a change of timeline withdraws
///   audio already committed, without the writer ever touching the consumer's side.
///
/// Thread-safety: the producer methods (`write…`, `kill…`, `producerRingPosition`) are called
/// by one thread at a time (the renderer's state lock serialises them); `mix` only on the
/// device's render thread, where it never allocates, locks, logs or waits.
final class RendererRing: @unchecked Sendable {
    let channelCount: Int
    let frames: AudioRing
    private let runs: SPSCRing<Int64>
    private let kills: SPSCRing<Int64>

    // Render-thread state (never touched by other threads after init).
    private let record: UnsafeMutablePointer<Int64>
    private var hasRun = false
    private var runRingPosition = 0
    private var runDeviceFrame: Int64 = 0
    private var hasNextRun = false
    private var nextRunRingPosition = 0
    private var nextRunDeviceFrame: Int64 = 0
    /// Active kill rules: (W, X) pairs, merged conservatively when more arrive than fit.
    private static let maximumKills = 8
    private let activeKills: UnsafeMutablePointer<Int64>
    private var activeKillCount = 0

    init(channelCount: Int, capacityFrames: Int) {
        self.channelCount = channelCount
        frames = AudioRing(channelCount: channelCount, capacityFrames: capacityFrames)
        runs = SPSCRing(channelCount: 2, capacityFrames: 4096, zero: 0)
        kills = SPSCRing(channelCount: 2, capacityFrames: 256, zero: 0)
        record = .allocate(capacity: 2)
        record.initialize(repeating: 0, count: 2)
        activeKills = .allocate(capacity: 2 * Self.maximumKills)
        activeKills.initialize(repeating: 0, count: 2 * Self.maximumKills)
    }

    deinit {
        record.deallocate()
        activeKills.deallocate()
    }

    // MARK: Producer

    /// Total frames written: the ring position of the next frame.
    var producerRingPosition: Int { frames.totalFramesWritten }

    /// Writes frames meant for device frames `deviceFrame...`; `continuesRun` says they follow
    /// the last frames written without a gap. Returns the frames written (fewer when full).
    func write(_ samples: UnsafePointer<Float>, frames count: Int, deviceFrame: Int64, continuesRun: Bool) -> Int {
        let room = min(count, frames.writableFrames)
        guard room > 0 else { return 0 }
        if !continuesRun {
            // The run record goes first: once the frames are visible, so is where they belong.
            var entry: (Int64, Int64) = (Int64(frames.totalFramesWritten), deviceFrame)
            let written = withUnsafePointer(to: &entry) { $0.withMemoryRebound(to: Int64.self, capacity: 2) { runs.write($0, frames: 1) } }
            guard written == 1 else { return 0 }
        }
        return frames.write(samples, frames: room)
    }

    /// Frames already written for device frames `from` or later will not play. Returns false
    /// when the kill queue is full (the render thread is not running); try again later.
    @discardableResult
    func kill(fromDeviceFrame from: Int64) -> Bool {
        var entry: (Int64, Int64) = (Int64(frames.totalFramesWritten), from)
        return withUnsafePointer(to: &entry) { $0.withMemoryRebound(to: Int64.self, capacity: 2) { kills.write($0, frames: 1) } } == 1
    }

    // MARK: Render thread

    /// Adds this renderer's frames for device frames `deviceFrame..<deviceFrame + count` into
    /// `output` (interleaved), using `scratch` (at least `scratchFrames` frames) to read.
    /// Frames with no audio add nothing (silence); frames written for earlier device frames are
    /// dropped (they came too late); dead frames are dropped.
    func mix(into output: UnsafeMutablePointer<Float>, frames count: Int, deviceFrame: Int64,
             scratch: UnsafeMutablePointer<Float>, scratchFrames: Int) {
        takeNewKills()
        var frame = deviceFrame
        let end = deviceFrame + Int64(count)
        while frame < end {
            let readPosition = frames.totalFramesRead
            let readable = frames.readableFrames
            if readable == 0 { return }
            adoptRuns(at: readPosition)
            guard hasRun else {
                // Frames without a run record cannot be placed: impossible by construction.
                frames.discard(frames: readable)
                return
            }
            let front = runDeviceFrame + Int64(readPosition - runRingPosition)
            var available = hasNextRun ? min(readable, nextRunRingPosition - readPosition) : readable
            // Kill rules covering the front.
            var killFrom = Int64.max
            var ruleEnd = Int.max
            var index = 0
            while index < activeKillCount {
                let w = Int(activeKills[2 * index])
                if w <= readPosition {
                    removeKill(at: index)
                    continue
                }
                killFrom = min(killFrom, activeKills[2 * index + 1])
                ruleEnd = min(ruleEnd, w - readPosition)
                index += 1
            }
            available = min(available, ruleEnd)
            if front >= killFrom {
                frames.discard(frames: available)
                continue
            }
            if killFrom != .max { available = min(available, Int(killFrom - front)) }
            if available <= 0 { return }  // cannot happen; never spin on the render thread
            if front < frame {
                frames.discard(frames: Int(min(Int64(available), frame - front)))
                continue
            }
            if front > frame {
                frame = min(end, front)
                continue
            }
            let take = min(available, Int(end - frame), scratchFrames)
            let got = frames.read(into: scratch, frames: take)
            let destination = output + Int(frame - deviceFrame) * channelCount
            for i in 0..<(got * channelCount) { destination[i] += scratch[i] }
            frame += Int64(got)
        }
    }

    private func adoptRuns(at readPosition: Int) {
        while true {
            if !hasNextRun {
                guard runs.read(into: record, frames: 1) == 1 else { return }
                hasNextRun = true
                nextRunRingPosition = Int(record[0])
                nextRunDeviceFrame = record[1]
            }
            guard nextRunRingPosition <= readPosition else { return }
            hasRun = true
            runRingPosition = nextRunRingPosition
            runDeviceFrame = nextRunDeviceFrame
            hasNextRun = false
        }
    }

    private func takeNewKills() {
        while kills.read(into: record, frames: 1) == 1 {
            if activeKillCount == Self.maximumKills {
                // Merge the two oldest: kills a little more than asked (a brief silence) but
                // never plays anything that was withdrawn.
                activeKills[1] = min(activeKills[1], activeKills[3])
                activeKills[0] = max(activeKills[0], activeKills[2])
                removeKill(at: 1)
            }
            activeKills[2 * activeKillCount] = record[0]
            activeKills[2 * activeKillCount + 1] = record[1]
            activeKillCount += 1
        }
    }

    private func removeKill(at index: Int) {
        var i = index
        while i + 1 < activeKillCount {
            activeKills[2 * i] = activeKills[2 * i + 2]
            activeKills[2 * i + 1] = activeKills[2 * i + 3]
            i += 1
        }
        activeKillCount -= 1
    }
}
