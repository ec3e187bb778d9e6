import CALSA
import Synchronization
import TuttiCore
#if canImport(Glibc)
import Glibc
#endif

/// Real playback through ALSA, on a real-time thread that renders one period at a time and
/// blocks in `snd_pcm_writei`, so the sound card's clock paces the pipeline.
///
/// The render loop uses only preallocated buffers; an xrun is counted and recovered with
/// `snd_pcm_recover`. Note that ALSA's `null` PCM accepts anything and is not paced.
public final class ALSADevice: OutputDevice, @unchecked Sendable {
    public let name: String
    public let pcmName: String
    public let format: AudioFormat
    public let periodFrames: Int
    public let bufferFrames: Int
    @_spi(Testing) public var renderLoopObserver: RenderLoopObserver?

    private let pcm: OpaquePointer
    public let clock: any HostClock
    private let stopRequested = Atomic<Bool>(false)
    private let finished = Atomic<Bool>(false)
    private let written = Atomic<Int64>(0)
    private let xruns = Atomic<Int>(0)
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
        status = snd_pcm_hw_params_set_rate_near(handle, hw, &rate, nil)
        if status < 0 { throw fail("rate \(requested.sampleRate) not supported", status) }
        var period = snd_pcm_uframes_t(periodFrames)
        snd_pcm_hw_params_set_period_size_near(handle, hw, &period, nil)
        var buffer = snd_pcm_uframes_t(periodFrames * bufferPeriods)
        snd_pcm_hw_params_set_buffer_size_near(handle, hw, &buffer)
        status = snd_pcm_hw_params(handle, hw)
        if status < 0 { throw fail("cannot configure", status) }
        snd_pcm_hw_params_get_period_size(hw, &period, nil)
        snd_pcm_hw_params_get_buffer_size(hw, &buffer)

        pcm = handle
        name = deviceName
        self.pcmName = pcmName
        format = AudioFormat(sampleRate: Int(rate), channelCount: requested.channelCount, sampleFormat: requested.sampleFormat)
        self.periodFrames = Int(period)
        bufferFrames = Int(buffer)
        self.clock = clock
        floatPeriod = .allocate(capacity: Int(period) * requested.channelCount)
        floatPeriod.initialize(repeating: 0, count: Int(period) * requested.channelCount)
        devicePeriod = .allocate(byteCount: Int(period) * format.bytesPerFrame, alignment: 16)
    }

    deinit {
        snd_pcm_close(pcm)
        floatPeriod.deallocate()
        devicePeriod.deallocate()
    }

    public var underrunCount: Int { xruns.load(ordering: .relaxed) }
    public var isPaced: Bool { true }
    public var isFinished: Bool { finished.load(ordering: .acquiring) }

    public func start(source: any RenderSource) throws(DeviceError) {
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
        var delay: snd_pcm_sframes_t = 0
        let total = written.load(ordering: .acquiring)
        if snd_pcm_delay(pcm, &delay) < 0 { delay = 0 }
        return DevicePosition(framesEmitted: max(0, total - Int64(delay)), hostTime: clock.now())
    }

    private func renderLoop(source: any RenderSource) {
        renderLoopObserver?.didEnter()
        let channels = format.channelCount
        var total: Int64 = 0
        var ended = false
        while !ended && !stopRequested.load(ordering: .relaxed) {
            let result = source.render(into: floatPeriod, frameCount: periodFrames, deviceFrame: total)
            ended = result.endOfStream
            var frames = result.frames
            if frames < periodFrames && !ended {
                // The pipeline was late: keep the card fed with silence rather than xrun.
                (floatPeriod + frames * channels).update(repeating: 0, count: (periodFrames - frames) * channels)
                frames = periodFrames
                xruns.add(1, ordering: .relaxed)
            }
            if frames == 0 { break }
            SampleConversion.convert(floatPeriod, count: frames * channels, to: format.sampleFormat, into: devicePeriod)
            var offset = 0
            while offset < frames && !stopRequested.load(ordering: .relaxed) {
                let result = snd_pcm_writei(pcm, devicePeriod + offset * format.bytesPerFrame, snd_pcm_uframes_t(frames - offset))
                if result >= 0 {
                    offset += Int(result)
                } else if snd_pcm_recover(pcm, Int32(result), 1) >= 0 {
                    xruns.add(1, ordering: .relaxed)
                } else {
                    failure = DeviceError(device: name, reason: "write failed: \(String(cString: snd_strerror(Int32(result))))")
                    stopRequested.store(true, ordering: .relaxed)
                }
            }
            total += Int64(offset)
            written.store(total, ordering: .releasing)
        }
        if stopRequested.load(ordering: .relaxed) { snd_pcm_drop(pcm) } else { snd_pcm_drain(pcm) }
        renderLoopObserver?.willExit()
        finished.store(true, ordering: .releasing)
    }
}
