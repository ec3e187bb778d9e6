import Synchronization
import TuttiCore
#if canImport(Glibc)
import Glibc
#endif

/// A simulated sound card, paced by a clock with an optional crystal error.
///
/// Like hardware it has a fixed period and a buffer of a few periods: it pulls period `k` from
/// its source as soon as there is room for it (when period `k - bufferPeriods` has left the
/// DAC) and must have it by its deadline, the emission time of its first frame. Whatever is
/// missing then is played as silence and counted as an underrun.
///
/// With a capture path it writes the exact frames it emitted to a WAV file and, beside it,
/// `<path>.timing.jsonl` with one line per period: `{"frame": F, "mono_ns": T}`, T being the
/// ideal DAC time of frame F on the pacing clock (CLOCK_MONOTONIC in production). Underruns
/// get lines of their own. A writer thread does the file I/O; the render thread only moves
/// frames into a preallocated lock-free ring, so it never allocates, locks or blocks on disk.
/// Without a capture path it is the `null` device: paced the same, writing nothing.
public final class VirtualDevice: OutputDevice, @unchecked Sendable {
    public let name: String
    public let format: AudioFormat
    public let periodFrames: Int
    public let bufferPeriods: Int
    public var bufferFrames: Int { periodFrames * bufferPeriods }
    public let driftPPM: Double
    public let capturePath: String?
    @_spi(Testing) public var renderLoopObserver: RenderLoopObserver?

    private let pacingClock: any SleepingClock
    private let reportingClock: SkewedClock?
    /// The clock positions are reported in: the reporting clock if set, else the pacing clock.
    public var clock: any HostClock {
        if let reportingClock { return reportingClock }
        return pacingClock
    }
    private let realtime: Bool
    private let schedule: Atomic<Int64>           // start time; valid once `started`
    private let started = Atomic<Bool>(false)
    private let stopRequested = Atomic<Bool>(false)
    private let finished = Atomic<Bool>(false)
    private let framesRendered = Atomic<Int64>(0)
    private let underruns = Atomic<Int>(0)
    private let captureStalls = Atomic<Int>(0)
    private let renderDone = Atomic<Bool>(false)
    private let worstLateness = Atomic<Int64>(0)

    private let period: UnsafeMutablePointer<Float>
    /// Preallocated, so reporting an underrun touches no new memory or type on the render thread.
    private let underrunRecord: UnsafeMutablePointer<Int64>
    private let capture: AudioRing?
    /// Underrun records for the writer: (first silent frame, silent frame count).
    private let underrunEvents: SPSCRing<Int64>?
    private var renderThread: DeviceThread?
    private var writerThread: DeviceThread?
    private var writerError: DeviceError?

    /// - Parameters:
    ///   - clock: the pacing clock; `MonotonicClock` in production, `FreeRunningClock` (in
    ///     TuttiSimulation) to run simulated time as fast as possible.
    ///   - capturePath: WAV file for the emitted frames (plus `.timing.jsonl`); nil for `null`.
    ///   - reportingClock: the clock `position()` reports in, derived from the pacing clock;
    ///     nil reports pacing-clock time.
    public init(clock: any SleepingClock, name: String? = nil, capturePath: String?, format: AudioFormat, periodFrames: Int = 480,
                bufferPeriods: Int = 4, driftPPM: Double = 0, reportingClock: SkewedClock? = nil, realtime: Bool? = nil) {
        precondition(periodFrames > 0 && bufferPeriods >= 2, "a device needs a period and at least two periods of buffer")
        self.name = name ?? (capturePath.map { "virtual:\($0)" } ?? "null")
        self.format = format
        self.periodFrames = periodFrames
        self.bufferPeriods = bufferPeriods
        self.driftPPM = driftPPM
        self.capturePath = capturePath
        self.pacingClock = clock
        self.reportingClock = reportingClock
        self.realtime = realtime ?? clock.isRealTime
        schedule = Atomic(0)
        period = .allocate(capacity: periodFrames * format.channelCount)
        period.initialize(repeating: 0, count: periodFrames * format.channelCount)
        underrunRecord = .allocate(capacity: 2)
        underrunRecord.initialize(repeating: 0, count: 2)
        if capturePath != nil {
            // Ten seconds of slack for the writer thread.
            capture = AudioRing(channelCount: format.channelCount, capacityFrames: max(format.sampleRate * 10, periodFrames * 4))
            underrunEvents = SPSCRing(channelCount: 2, capacityFrames: 4096, zero: 0)
        } else {
            capture = nil
            underrunEvents = nil
        }
    }

    deinit {
        period.deallocate()
        underrunRecord.deallocate()
    }

    public var underrunCount: Int { underruns.load(ordering: .relaxed) }
    public var isPaced: Bool { true }
    public var isFinished: Bool { finished.load(ordering: .acquiring) }
    /// Times the render thread had to wait for the capture writer (disk slower than real time).
    public var captureStallCount: Int { captureStalls.load(ordering: .relaxed) }

    /// The longest the render thread woke after a period's room time, in pacing-clock
    /// nanoseconds: how close the simulated card came to a real xrun.
    public var maxWakeLatenessNanoseconds: Int64 { worstLateness.load(ordering: .relaxed) }

    /// The emission model, once started.
    public var emissionSchedule: EmissionSchedule? {
        started.load(ordering: .acquiring) ? EmissionSchedule(sampleRate: format.sampleRate, driftPPM: driftPPM, start: schedule.load(ordering: .acquiring)) : nil
    }

    public func start(source: any RenderSource) throws(DeviceError) {
        precondition(!started.load(ordering: .relaxed), "a device starts once")
        var writer: TimingCaptureWriter? = nil
        if let capturePath, let capture, let underrunEvents {
            writer = try TimingCaptureWriter(path: capturePath, format: format, periodFrames: periodFrames, ring: capture, underruns: underrunEvents)
        }
        let startTime = pacingClock.now()
        schedule.store(startTime, ordering: .releasing)
        started.store(true, ordering: .releasing)
        let plan = EmissionSchedule(sampleRate: format.sampleRate, driftPPM: driftPPM, start: startTime)
        if let writer {
            writerThread = DeviceThread(name: "tutti-capture", realtime: false) { [self] in
                do throws(DeviceError) { try writer.run(schedule: plan, renderDone: { self.renderDone.load(ordering: .acquiring) }) } catch { self.writerError = error }
            }
        }
        renderThread = DeviceThread(name: "tutti-virtual", realtime: realtime) { [self] in
            renderLoop(source: source, plan: plan)
        }
    }

    public func stop() { stopRequested.store(true, ordering: .releasing) }

    public func waitUntilFinished() throws(DeviceError) {
        renderThread?.join()
        writerThread?.join()
        if let writerError { throw writerError }
    }

    public func position() -> DevicePosition {
        guard started.load(ordering: .acquiring) else { return DevicePosition(framesEmitted: 0, hostTime: clock.now()) }
        let plan = EmissionSchedule(sampleRate: format.sampleRate, driftPPM: driftPPM, start: schedule.load(ordering: .acquiring))
        let emitted = min(plan.framesEmitted(by: pacingClock.now()), framesRendered.load(ordering: .acquiring))
        let time = plan.time(ofFrame: emitted)
        return DevicePosition(framesEmitted: emitted, hostTime: reportingClock?.reading(atBase: time) ?? time)
    }

    private func renderLoop(source: any RenderSource, plan: EmissionSchedule) {
        renderLoopObserver?.didEnter()
        let channels = format.channelCount
        let periodSize = Int64(periodFrames)
        var index: Int64 = 0
        var rendered: Int64 = 0
        var ended = false
        let pollInterval: Int64 = 1_000_000
        while !ended && !stopRequested.load(ordering: .relaxed) {
            let first = index * periodSize
            if index >= Int64(bufferPeriods) {
                // Room for this period once period (index - bufferPeriods) has left the DAC.
                let roomTime = plan.time(ofFrame: first - Int64(bufferPeriods - 1) * periodSize)
                pacingClock.sleep(until: roomTime)
                let lateness = pacingClock.now() - roomTime
                if lateness > worstLateness.load(ordering: .relaxed) { worstLateness.store(lateness, ordering: .relaxed) }
            }
            let deadline = plan.time(ofFrame: first)
            var filled = 0
            while true {
                let result = source.render(into: period + filled * channels, frameCount: periodFrames - filled, deviceFrame: first + Int64(filled))
                filled += result.frames
                if result.endOfStream { ended = true; break }
                if filled == periodFrames { break }
                let now = pacingClock.now()
                if now >= deadline || stopRequested.load(ordering: .relaxed) { break }
                pacingClock.sleep(until: min(deadline, now + pollInterval))
            }
            var emitted = filled
            if !ended && filled < periodFrames {
                (period + filled * channels).update(repeating: 0, count: (periodFrames - filled) * channels)
                underruns.add(1, ordering: .relaxed)
                if let underrunEvents {
                    underrunRecord[0] = first + Int64(filled)
                    underrunRecord[1] = Int64(periodFrames - filled)
                    _ = underrunEvents.write(underrunRecord, frames: 1)
                }
                emitted = periodFrames
            }
            if let capture { push(period, frames: emitted, into: capture) }
            rendered += Int64(emitted)
            framesRendered.store(rendered, ordering: .releasing)
            index += 1
        }
        renderDone.store(true, ordering: .releasing)
        if !stopRequested.load(ordering: .relaxed) {
            // Play out what the buffer holds.
            pacingClock.sleep(until: plan.time(ofFrame: rendered))
        }
        renderLoopObserver?.willExit()
        finished.store(true, ordering: .releasing)
    }

    /// Hands emitted frames to the writer. A full ring means the disk fell ten seconds behind
    /// (or simulated time outran it); waiting is the only way to keep the capture exact.
    private func push(_ frames: UnsafeMutablePointer<Float>, frames count: Int, into ring: AudioRing) {
        var done = 0
        while done < count {
            done += ring.write(frames + done * format.channelCount, frames: count - done)
            if done < count {
                captureStalls.add(1, ordering: .relaxed)
                var pause = timespec(tv_sec: 0, tv_nsec: 200_000)
                nanosleep(&pause, nil)
            }
        }
    }
}

/// Drains a virtual device's capture ring into the WAV file and the timing file.
final class TimingCaptureWriter: @unchecked Sendable {  // created, then owned by the writer thread
    private let wav: WAVFileWriter
    private let timing: UnsafeMutablePointer<FILE>
    private let periodFrames: Int
    private let ring: AudioRing
    private let underruns: SPSCRing<Int64>
    private let timingPath: String

    init(path: String, format: AudioFormat, periodFrames: Int, ring: AudioRing, underruns: SPSCRing<Int64>) throws(DeviceError) {
        wav = try WAVFileWriter(path: path, format: format)
        timingPath = path + ".timing.jsonl"
        guard let file = fopen(timingPath, "w") else {
            throw DeviceError(device: "virtual:\(path)", reason: "cannot create \(timingPath): \(String(cString: strerror(errno)))")
        }
        timing = file
        self.periodFrames = periodFrames
        self.ring = ring
        self.underruns = underruns
    }

    func run(schedule: EmissionSchedule, renderDone: () -> Bool) throws(DeviceError) {
        let channels = ring.channelCount
        let chunk = UnsafeMutablePointer<Float>.allocate(capacity: periodFrames * channels)
        defer { chunk.deallocate() }
        var written: Int64 = 0
        var pendingUnderrun: (Int64, Int64)? = nil
        var record = [Int64](repeating: 0, count: 2)
        while true {
            let done = renderDone()
            var moved = false
            while ring.readableFrames > 0 {
                // Align reads to periods so each timing line heads one period.
                let inPeriod = Int(written % Int64(periodFrames))
                let count = ring.read(into: chunk, frames: periodFrames - inPeriod)
                if inPeriod == 0 {
                    fputs("{\"frame\":\(written),\"mono_ns\":\(schedule.time(ofFrame: written))}\n", timing)
                }
                try wav.write(chunk, frames: count)
                written += Int64(count)
                moved = true
                // Underrun lines follow the period line they fall in.
                while true {
                    if pendingUnderrun == nil, record.withUnsafeMutableBufferPointer({ underruns.read(into: $0.baseAddress!, frames: 1) }) == 1 {
                        pendingUnderrun = (record[0], record[1])
                    }
                    guard let event = pendingUnderrun, event.0 < written else { break }
                    fputs("{\"underrun\":true,\"frame\":\(event.0),\"frames\":\(event.1),\"mono_ns\":\(schedule.time(ofFrame: event.0))}\n", timing)
                    pendingUnderrun = nil
                }
            }
            if done && !moved && ring.readableFrames == 0 { break }
            if !moved {
                var pause = timespec(tv_sec: 0, tv_nsec: 2_000_000)
                nanosleep(&pause, nil)
            }
        }
        fclose(timing)
        try wav.close()
    }
}
