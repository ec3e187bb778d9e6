import Synchronization
import TuttiCore
import TuttiDevices
import TuttiStreamAudio
import TuttiProtocol

/// A room's playout on a real device: a thread that clocks `Playout` a few tens of
/// milliseconds ahead of the device, block by block, into the device's ring.
///
/// It runs on its own thread (elevated priority when permitted); the device's render thread
/// only reads the ring. The device's emission times are fitted from its position reports
/// (`DeviceTimingEstimator`).
public final class PlayoutEngine: @unchecked Sendable {
    public struct Configuration: Sendable {
        public var blockFrames = 240
        /// How far ahead of the device the ring is kept: the command-to-sound floor. At least
        /// two of the device's periods whatever is set (a device takes a period at once).
        public var leadFrames = 2400
        /// The ring is topped up to `leadFrames` once it has fallen this far below: the engine
        /// wakes every 20 ms for four blocks rather than at every device period for one or two
        /// (half the wake-ups of a small speaker's busiest thread). At least one device period
        /// whatever is set, so a device with a long period wakes the engine once per period.
        public var refillFrames = 960
        public var controller = PlayoutController.Configuration()
        public init() {}
    }

    public let inputs: PlayoutInputs
    public let device: any OutputDevice
    public let source: PlayoutRenderSource
    public let configuration: Configuration
    public let playout: Playout
    private let running = Atomic<Bool>(false)
    private let reportState = Mutex(PlayoutReport())
    private var thread: DeviceThread?
    // Engine-thread state.
    private var deviceTiming: DeviceTimingEstimator
    private var lastPositionRead: Int64 = 0
    private var deviceEpoch = 0
    private var interruptionLogged = false

    /// Notable events (a stall, a resync), one line each; called on the engine thread. Set
    /// before `start`.
    public var onEvent: (@Sendable (String) -> Void)? {
        get { playout.onEvent }
        set { playout.onEvent = newValue }
    }

    public init(inputs: PlayoutInputs, device: any OutputDevice, latencyNanoseconds: Int64, localClock: any HostClock,
                configuration: Configuration = Configuration()) {
        self.inputs = inputs
        self.device = device
        var configuration = configuration
        configuration.leadFrames = max(configuration.leadFrames, 2 * device.periodFrames)
        configuration.refillFrames = max(configuration.refillFrames, device.periodFrames)
        self.configuration = configuration
        source = PlayoutRenderSource(channelCount: device.format.channelCount, capacityFrames: configuration.leadFrames * 4,
                                     wakeBelowFrames: configuration.leadFrames - min(configuration.refillFrames, configuration.leadFrames / 2))
        playout = Playout(inputs: inputs, format: device.format, blockFrames: configuration.blockFrames, latencyNanoseconds: latencyNanoseconds,
                          localClock: localClock, controller: configuration.controller)
        deviceTiming = DeviceTimingEstimator(sampleRate: device.format.sampleRate)
    }

    public var latestReport: PlayoutReport { reportState.withLock { $0 } }

    /// How long before a frame leaves the DAC it is committed: planned a block at a time, kept
    /// `leadFrames` ahead in the ring, then in the device's own buffer. What is committed cannot
    /// change, so an anchor must reach the room at least this long before it is heard.
    public var outputLeadNanoseconds: Int64 {
        Int64(configuration.leadFrames + configuration.blockFrames + device.bufferFrames) * 1_000_000_000 / Int64(device.format.sampleRate)
    }

    /// Prefills the ring with silence, starts the device and the engine thread.
    public func start() throws(DeviceError) {
        let silence = [Float](repeating: 0, count: configuration.leadFrames * device.format.channelCount)
        _ = source.ring.write(silence, frames: configuration.leadFrames)
        try device.start(source: source)
        running.store(true, ordering: .releasing)
        thread = DeviceThread(name: "tutti-playout", realtime: true, priority: 30) { [self] in run() }
    }

    public func stop() throws(DeviceError) {
        running.store(false, ordering: .releasing)
        source.consumed.signal()
        thread?.join()
        device.stop()
        try device.waitUntilFinished()
    }

    /// Logs, once, that the device went and is being looked for.
    private func noteDeviceInterruption() {
        guard !interruptionLogged, let interruption = device.interruption else { return }
        interruptionLogged = true
        let every = Self.seconds(ALSADevice.reopenIntervalNanoseconds)
        onEvent?("\(device.name) failed (\(interruption.reason)); reopening it every \(every) s, silent until it returns")
    }

    /// Seconds with two decimals, e.g. "2.04".
    private static func seconds(_ nanoseconds: Int64) -> String {
        let hundredths = (max(0, nanoseconds) + 5_000_000) / 10_000_000
        let fraction = hundredths % 100
        return "\(hundredths / 100).\(fraction < 10 ? "0" : "")\(fraction)"
    }

    private func run() {
        while running.load(ordering: .acquiring) {
            if device.interruption != nil { noteDeviceInterruption() }
            if source.ring.readableFrames >= configuration.leadFrames || source.ring.writableFrames < configuration.blockFrames {
                // Full: sleep until the device has drawn the ring down to its wake level.
                source.consumed.prepareToWait()
                if source.ring.readableFrames > source.wakeBelowFrames { source.consumed.wait(timeoutNanoseconds: 100_000_000) }
                if source.ring.readableFrames > source.wakeBelowFrames && source.ring.writableFrames >= configuration.blockFrames { continue }
            }
            refreshDeviceTiming()
            playout.render(firstFrame: source.nextWriteDeviceFrame, device: deviceTiming.map)
            _ = playout.block.withUnsafeBufferPointer { source.ring.write($0.baseAddress!, frames: configuration.blockFrames) }
            var report = playout.report
            report.deviceUnderruns = device.underrunCount
            reportState.withLock { $0 = report }
        }
    }

    private func refreshDeviceTiming() {
        noteDeviceInterruption()
        let epoch = device.timingEpoch
        if epoch != deviceEpoch {
            // The device restarted: its earlier positions are on another line.
            deviceEpoch = epoch
            deviceTiming = DeviceTimingEstimator(sampleRate: device.format.sampleRate)
            lastPositionRead = .min
            playout.deviceRestarted()
            if let recovery = device.lastRecovery {
                let what = interruptionLogged ? "is back after \(Self.seconds(recovery.gapNanoseconds)) s with a period of \(recovery.periodFrames) frames"
                                              : "ran dry (an xrun) and restarted after \(Self.seconds(recovery.gapNanoseconds)) s"
                onEvent?("\(device.name) \(what); \(recovery.missedFrames) frames missed, playing in sync again")
            }
            interruptionLogged = false
        }
        let position = device.position()
        if lastPositionRead == .min || position.framesEmitted >= lastPositionRead + 480 {
            deviceTiming.add(frame: position.framesEmitted, time: position.hostTime)
            lastPositionRead = position.framesEmitted
        }
    }
}
