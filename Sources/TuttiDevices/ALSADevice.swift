import CALSA
import Synchronization
import TuttiCore
#if canImport(Glibc)
import Glibc
#endif

/// Real playback through ALSA, on a real-time thread that renders one period at a time and
/// blocks in `snd_pcm_writei`, so the sound card's clock paces the pipeline.
///
/// It survives what happens to sound cards in a home (docs/ALSA-VIRTUAL.md, "Recovery"):
/// - an xrun is recovered with `snd_pcm_recover`;
/// - a device that fails (unplugged, suspended, a route change: `-ENODEV`, `-ESTRPIPE`,
///   `-EIO`) is closed and reopened every `reopenInterval` until it returns, possibly with
///   another period size.
///
/// After either, the frames the card did not emit are accounted from time stamps (the time the
/// last written frame was due to leave against the time the card starts again), never from the
/// sample counter, which stops while the card does. The device frame numbering therefore keeps
/// tracking true time, and `timingEpoch` tells the pipeline to refit the card's timing.
///
/// Thread-safety: the render thread owns the PCM from `start` on; other threads read only
/// atomics (`position()` is the render thread's latest reading, published lock-free). The
/// steady-state loop uses only preallocated buffers; only the recovery path, which runs while the
/// card is gone and no deadline can be met, opens and closes the PCM (and so allocates).
/// Note that ALSA's `null` PCM accepts anything and is not paced.
public final class ALSADevice: OutputDevice, @unchecked Sendable {
    public let name: String
    public let pcmName: String
    public let format: AudioFormat
    /// How often a vanished device is looked for.
    public static let reopenIntervalNanoseconds: Int64 = 100_000_000
    @_spi(Testing) public var renderLoopObserver: RenderLoopObserver?

    /// Owned by the render thread once started.
    private var pcm: OpaquePointer?
    public let clock: any HostClock
    private let requestedPeriodFrames: Int
    private let bufferPeriods: Int
    private let currentPeriodFrames: Atomic<Int>
    private let currentBufferFrames: Atomic<Int>
    private let stopRequested = Atomic<Bool>(false)
    private let finished = Atomic<Bool>(false)
    /// The render thread's latest (frames emitted, host time) pair, as bit patterns.
    private let published: Atomic<WordPair>
    private let xruns = Atomic<Int>(0)
    private let epoch = Atomic<Int>(0)
    /// While the device is gone: the host time it went, and the error it failed with.
    private let lostSince = Atomic<Int64>(0)
    private let lostError = Atomic<Int32>(0)
    /// The last recovery: how long the card was silent, and the frames that accounts for.
    private let lastGapNanoseconds = Atomic<Int64>(0)
    private let lastMissedFrames = Atomic<Int64>(0)
    /// Render buffers, sized for `renderCapacityFrames`; a larger period renders in parts.
    private let renderCapacityFrames: Int
    private let floatPeriod: UnsafeMutablePointer<Float>
    private let devicePeriod: UnsafeMutableRawPointer
    private var thread: DeviceThread?
    private var failure: DeviceError?

    /// True when ALSA reports at least one sound card.
    public static var soundCardPresent: Bool {
        tutti_alsa_silence_errors()
        var card: Int32 = -1
        return snd_card_next(&card) == 0 && card >= 0
    }

    public init(clock: any HostClock, pcmName: String, format requested: AudioFormat, periodFrames: Int = 480, bufferPeriods: Int = 4) throws(DeviceError) {
        tutti_alsa_silence_errors()
        let opened = try Self.open(pcmName: pcmName, format: requested, periodFrames: periodFrames, bufferPeriods: bufferPeriods)
        pcm = opened.pcm
        name = "alsa:\(pcmName)"
        self.pcmName = pcmName
        format = AudioFormat(sampleRate: opened.rate, channelCount: requested.channelCount, sampleFormat: requested.sampleFormat)
        requestedPeriodFrames = periodFrames
        self.bufferPeriods = bufferPeriods
        currentPeriodFrames = Atomic(opened.periodFrames)
        currentBufferFrames = Atomic(opened.bufferFrames)
        published = Atomic(WordPair(first: 0, second: UInt(bitPattern: Int(clock.now()))))
        self.clock = clock
        renderCapacityFrames = max(opened.periodFrames, 4096)
        floatPeriod = .allocate(capacity: renderCapacityFrames * requested.channelCount)
        floatPeriod.initialize(repeating: 0, count: renderCapacityFrames * requested.channelCount)
        devicePeriod = .allocate(byteCount: renderCapacityFrames * format.bytesPerFrame, alignment: 16)
    }

    /// Opens and configures `pcmName`; the rate must be the one asked for (a device that comes
    /// back at another rate is not the same device to the pipeline).
    private static func open(pcmName: String, format requested: AudioFormat, periodFrames: Int, bufferPeriods: Int, requireRate: Bool = false)
        throws(DeviceError) -> (pcm: OpaquePointer, rate: Int, periodFrames: Int, bufferFrames: Int) {
        let deviceName = "alsa:\(pcmName)"
        var handle: OpaquePointer? = nil
        var status = snd_pcm_open(&handle, pcmName, SND_PCM_STREAM_PLAYBACK, 0)
        guard status >= 0, let handle else {
            throw DeviceError(device: deviceName, reason: "cannot open: \(String(cString: snd_strerror(status)))")
        }
        func fail(_ what: String, _ code: Int32) -> DeviceError {
            snd_pcm_close(handle)
            return DeviceError(device: deviceName, reason: "\(what): \(String(cString: snd_strerror(code)))")
        }
        var hw: OpaquePointer? = nil
        snd_pcm_hw_params_malloc(&hw)
        defer { snd_pcm_hw_params_free(hw) }
        snd_pcm_hw_params_any(handle, hw)
        status = snd_pcm_hw_params_set_access(handle, hw, SND_PCM_ACCESS_RW_INTERLEAVED)
        if status < 0 { throw fail("interleaved access not supported", status) }
        let alsaFormat: snd_pcm_format_t = switch requested.sampleFormat {
        case .float32: SND_PCM_FORMAT_FLOAT_LE
        case .int16: SND_PCM_FORMAT_S16_LE
        case .int24: SND_PCM_FORMAT_S24_3LE
        }
        status = snd_pcm_hw_params_set_format(handle, hw, alsaFormat)
        if status < 0 { throw fail("sample format \(requested.sampleFormat.rawValue) not supported", status) }
        status = snd_pcm_hw_params_set_channels(handle, hw, UInt32(requested.channelCount))
        if status < 0 { throw fail("\(requested.channelCount) channels not supported", status) }
        var rate = UInt32(requested.sampleRate)
        status = requireRate ? snd_pcm_hw_params_set_rate(handle, hw, rate, 0) : snd_pcm_hw_params_set_rate_near(handle, hw, &rate, nil)
        if status < 0 { throw fail("rate \(requested.sampleRate) not supported", status) }
        var period = snd_pcm_uframes_t(periodFrames)
        snd_pcm_hw_params_set_period_size_near(handle, hw, &period, nil)
        var buffer = snd_pcm_uframes_t(Int(period) * bufferPeriods)
        snd_pcm_hw_params_set_buffer_size_near(handle, hw, &buffer)
        status = snd_pcm_hw_params(handle, hw)
        if status < 0 { throw fail("cannot configure", status) }
        snd_pcm_hw_params_get_period_size(hw, &period, nil)
        snd_pcm_hw_params_get_buffer_size(hw, &buffer)
        return (handle, Int(rate), Int(period), Int(buffer))
    }

    deinit {
        if let pcm { snd_pcm_close(pcm) }
        floatPeriod.deallocate()
        devicePeriod.deallocate()
    }

    public var periodFrames: Int { currentPeriodFrames.load(ordering: .relaxed) }
    public var bufferFrames: Int { currentBufferFrames.load(ordering: .relaxed) }
    public var underrunCount: Int { xruns.load(ordering: .relaxed) }
    public var isPaced: Bool { true }
    public var isFinished: Bool { finished.load(ordering: .acquiring) }
    public var timingEpoch: Int { epoch.load(ordering: .acquiring) }

    public var interruption: DeviceInterruption? {
        let since = lostSince.load(ordering: .acquiring)
        guard since != 0 else { return nil }
        return DeviceInterruption(reason: String(cString: snd_strerror(lostError.load(ordering: .relaxed))), sinceHostTime: since)
    }

    public var lastRecovery: DeviceRecovery? {
        guard epoch.load(ordering: .acquiring) > 0 else { return nil }
        return DeviceRecovery(gapNanoseconds: lastGapNanoseconds.load(ordering: .relaxed), missedFrames: lastMissedFrames.load(ordering: .relaxed),
                              periodFrames: periodFrames)
    }

    public func start(source: any RenderSource) throws(DeviceError) {
        guard let pcm else { throw DeviceError(device: name, reason: "started twice") }
        let status = snd_pcm_prepare(pcm)
        if status < 0 { throw DeviceError(device: name, reason: "cannot prepare: \(String(cString: snd_strerror(status)))") }
        thread = DeviceThread(name: "tutti-alsa", realtime: true) { [self] in renderLoop(source: source) }
    }

    public func stop() { stopRequested.store(true, ordering: .releasing) }

    public func waitUntilFinished() throws(DeviceError) {
        thread?.join()
        if let failure { throw failure }
    }

    public func position() -> DevicePosition {
        let pair = published.load(ordering: .acquiring)
        return DevicePosition(framesEmitted: Int64(Int(bitPattern: pair.first)), hostTime: Int64(Int(bitPattern: pair.second)))
    }

    /// Render-thread state: the next device frame, and when the frames written so far will all
    /// have left the card.
    private struct Progress {
        var total: Int64 = 0
        var drainedAt: Int64 = 0
        /// Frames taken from the source for the period the card failed in, never written.
        var dropped = 0
        /// Recoveries in a row with no write between them: a card that "recovers" and fails
        /// again at once (a suspend that `snd_pcm_resume` cannot see) is treated as gone.
        var failedRecoveries = 0
    }

    private func publish(_ pcm: OpaquePointer, _ progress: inout Progress) {
        var delay: snd_pcm_sframes_t = 0
        if snd_pcm_delay(pcm, &delay) < 0 { delay = 0 }
        let now = clock.now()
        let emitted = max(0, progress.total - Int64(delay))
        progress.drainedAt = now + Int64(delay) * 1_000_000_000 / Int64(format.sampleRate)
        published.store(WordPair(first: UInt(bitPattern: Int(emitted)), second: UInt(bitPattern: Int(now))), ordering: .releasing)
    }

    /// After the card stopped (an xrun, a reopen), moves the frame numbering on by the frames
    /// it did not emit: the time since the last written frame was due to leave, at least the
    /// frames dropped from the interrupted period.
    private func accountGap(_ progress: inout Progress, dropped: Int) {
        let gap = max(0, clock.now() - progress.drainedAt)
        let missed = max(Int64(dropped), (gap * Int64(format.sampleRate) + 500_000_000) / 1_000_000_000)
        progress.total += missed
        lastGapNanoseconds.store(gap, ordering: .relaxed)
        lastMissedFrames.store(missed, ordering: .relaxed)
        epoch.add(1, ordering: .releasing)
    }

    private func renderLoop(source: any RenderSource) {
        renderLoopObserver?.didEnter()
        let channels = format.channelCount
        var progress = Progress()
        progress.drainedAt = clock.now()
        var ended = false
        var restarted = false
        while !ended && !stopRequested.load(ordering: .relaxed) {
            guard let pcm else {
                reopen(&progress)
                restarted = true
                continue
            }
            let chunk = min(currentPeriodFrames.load(ordering: .relaxed), renderCapacityFrames)
            let result = source.render(into: floatPeriod, frameCount: chunk, deviceFrame: progress.total)
            ended = result.endOfStream
            var frames = result.frames
            if frames < chunk && !ended {
                // The pipeline was late (or is refilling after a recovery): keep the card fed
                // with silence rather than xrun.
                (floatPeriod + frames * channels).update(repeating: 0, count: (chunk - frames) * channels)
                frames = chunk
                if !restarted { xruns.add(1, ordering: .relaxed) }
            }
            restarted = false
            if frames == 0 { break }
            SampleConversion.convert(floatPeriod, count: frames * channels, to: format.sampleFormat, into: devicePeriod)
            var offset = 0
            while offset < frames && !stopRequested.load(ordering: .relaxed) {
                let written = snd_pcm_writei(pcm, devicePeriod + offset * format.bytesPerFrame, snd_pcm_uframes_t(frames - offset))
                if written >= 0 {
                    offset += Int(written)
                    continue
                }
                let error = Int32(written)
                progress.total += Int64(offset)
                progress.failedRecoveries += 1
                let recovered = error != -ENODEV && progress.failedRecoveries <= 3 ? snd_pcm_recover(pcm, error, 1) : error
                if recovered >= 0 {
                    // An xrun (or a suspend the card came back from): it starts again empty.
                    xruns.add(1, ordering: .relaxed)
                    accountGap(&progress, dropped: frames - offset)
                    restarted = true
                } else {
                    // The device is gone: close it and look for it again.
                    lostError.store(-recovered, ordering: .relaxed)
                    lostSince.store(clock.now(), ordering: .releasing)
                    snd_pcm_close(pcm)
                    self.pcm = nil
                    progress.dropped = frames - offset
                }
                offset = -1
                break
            }
            if offset >= 0 {
                progress.total += Int64(offset)
                progress.failedRecoveries = 0
                publish(pcm, &progress)
            }
        }
        if let pcm {
            if stopRequested.load(ordering: .relaxed) { snd_pcm_drop(pcm) } else { snd_pcm_drain(pcm) }
        }
        renderLoopObserver?.willExit()
        finished.store(true, ordering: .releasing)
    }

    /// Looks for the vanished device every `reopenIntervalNanoseconds` until it opens (or the
    /// device is stopped), then accounts the frames it missed.
    private func reopen(_ progress: inout Progress) {
        while !stopRequested.load(ordering: .relaxed) {
            if let opened = try? Self.open(pcmName: pcmName, format: format, periodFrames: requestedPeriodFrames, bufferPeriods: bufferPeriods,
                                           requireRate: true) {
                guard snd_pcm_prepare(opened.pcm) >= 0 else {
                    snd_pcm_close(opened.pcm)
                    var pause = timespec(tv_sec: 0, tv_nsec: Int(Self.reopenIntervalNanoseconds))
                    nanosleep(&pause, nil)
                    continue
                }
                pcm = opened.pcm
                currentPeriodFrames.store(opened.periodFrames, ordering: .relaxed)
                currentBufferFrames.store(opened.bufferFrames, ordering: .relaxed)
                accountGap(&progress, dropped: progress.dropped)
                progress.dropped = 0
                progress.failedRecoveries = 0
                lostSince.store(0, ordering: .releasing)
                return
            }
            var pause = timespec(tv_sec: 0, tv_nsec: Int(Self.reopenIntervalNanoseconds))
            nanosleep(&pause, nil)
        }
    }
}
