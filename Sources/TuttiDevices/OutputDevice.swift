import TuttiCore

/// A sink of audio that runs its own clocked thread and pulls from a `RenderSource`.
///
/// Lifecycle: `start(source:)` once, then either the source ends (the device plays out what it
/// holds and finishes) or `stop()` ends it early. `waitUntilFinished()` joins the device's
/// threads and finalizes any files; it returns the first error the device met, if any.
/// Thread-safety: all members may be called from any thread except where noted.
public protocol OutputDevice: AnyObject, Sendable {
    /// The spec this device was made from, e.g. "virtual:/tmp/out.wav".
    var name: String { get }
    /// Rate, channels and the sample format the device emits.
    var format: AudioFormat { get }
    /// Frames pulled from the source per render call.
    var periodFrames: Int { get }
    /// Frames queued between the render call and emission (the device's output latency).
    var bufferFrames: Int { get }

    /// Whether a clock paces the render calls (a sound card, `virtual`, `null`). An offline
    /// device (`wav:`) renders as fast as it can and waits for data instead of underrunning.
    var isPaced: Bool { get }

    /// Called on the render thread; set before `start`. A test hook.
    @_spi(Testing) var renderLoopObserver: RenderLoopObserver? { get set }

    func start(source: any RenderSource) throws(DeviceError)
    /// Ends playback at once (Ctrl-C); the device finishes after its current period.
    func stop()
    /// True once the render thread has ended.
    var isFinished: Bool { get }
    /// Joins the device's threads and closes its files. Call once, from a non-real-time thread.
    func waitUntilFinished() throws(DeviceError)

    /// The clock `position()` reports host times in, which every host time given to or by a
    /// player of this device is read on.
    var clock: any HostClock { get }
    /// Frames emitted so far and the host time at which the last of them was emitted, like
    /// ALSA's status/htimestamp pair.
    func position() -> DevicePosition
    /// Periods that were not fully ready by their deadline and were completed with silence.
    var underrunCount: Int { get }

    /// Counts restarts of the device's timing (an xrun it recovered from, a reopen after it
    /// vanished). `position()` readings from before a restart need not lie on one line with
    /// later ones, so whoever fits them starts again.
    var timingEpoch: Int { get }
    /// Set while the device is gone and being looked for.
    var interruption: DeviceInterruption? { get }
    /// How the device came back from its latest restart, if it ever restarted.
    var lastRecovery: DeviceRecovery? { get }
}

extension OutputDevice {
    /// Devices that never restart their timing.
    public var timingEpoch: Int { 0 }
    public var interruption: DeviceInterruption? { nil }
    public var lastRecovery: DeviceRecovery? { nil }
}

/// A device's reading of its own progress.
public struct DevicePosition: Sendable, Equatable {
    /// Frames that have left the device (reached the DAC).
    public var framesEmitted: Int64
    /// The time, in the device's reporting clock, at which frame `framesEmitted` is emitted.
    public var hostTime: Int64

    public init(framesEmitted: Int64, hostTime: Int64) {
        self.framesEmitted = framesEmitted
        self.hostTime = hostTime
    }
}

/// A problem with an output device, naming the device and the reason in one line.
public struct DeviceError: Error, Sendable, CustomStringConvertible, Equatable {
    public let device: String
    public let reason: String

    public init(device: String, reason: String) {
        self.device = device
        self.reason = reason
    }

    public var description: String { "\(device): \(reason)" }
}

@_spi(Testing) extension OutputDevice {
    /// Devices without the hook observe nothing.
    public var renderLoopObserver: RenderLoopObserver? {
        get { nil }
        set {}
    }
}
