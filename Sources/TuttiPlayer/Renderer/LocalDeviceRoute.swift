import TuttiCore
import TuttiDevices

/// A route to one local output device (sound card, virtual or null device).
///
/// The renderer asks for about two seconds of media (`forwardBufferDuration`), keeps all but
/// `realTimeLead` of it in ordinary memory, and so can honour a flush as close to the playhead
/// as the device's own buffer plus that lead (`flushLeadTime`).
///
/// Thread-safety: an immutable value; the device it names is itself thread-safe.
public struct LocalDeviceRoute: RenderRoute {
    public let device: any OutputDevice
    public let forwardBufferDuration: MediaTime
    public let realTimeLead: MediaTime

    public init(device: any OutputDevice,
                forwardBufferDuration: MediaTime = MediaTime(value: 2, timescale: 1),
                realTimeLead: MediaTime = MediaTime(value: 1, timescale: 5)) {
        precondition(realTimeLead > .zero, "the real-time lead must be positive")
        self.device = device
        self.forwardBufferDuration = forwardBufferDuration
        self.realTimeLead = realTimeLead
    }

    /// The device's buffer (what it has pulled but not yet emitted) plus the real-time lead:
    /// media closer to the playhead than this may already be in the device or the ring.
    public var flushLeadTime: MediaTime {
        MediaTime(frame: Int64(device.bufferFrames), sampleRate: device.format.sampleRate) + realTimeLead
    }
}
