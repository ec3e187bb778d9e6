import Foundation
import Synchronization
import TuttiCore
import TuttiDevices

/// What a synchronizer shares with its renderers: the device, the timeline and the render
/// thread's progress.
///
/// Thread-safety: `timeline` is read and replaced under a leaf lock (held only to copy the
/// value, never while taking another lock); the atomics are written by the render thread only.
final class SynchronizerCore: @unchecked Sendable {
    let device: any OutputDevice
    let sampleRate: Int
    private let timelineLock = NSLock()
    private var currentTimeline: SynchronizerTimeline
    /// The first device frame the render thread has not started rendering: planning for
    /// earlier frames is too late.
    let renderPosition = Atomic<Int64>(0)
    /// Render calls completed; lets a remover know the render thread has let go of a ring.
    let renderCalls = Atomic<Int>(0)

    init(device: any OutputDevice) {
        self.device = device
        sampleRate = device.format.sampleRate
        currentTimeline = SynchronizerTimeline(sampleRate: device.format.sampleRate)
    }

    var timeline: SynchronizerTimeline {
        get { timelineLock.withLock { currentTimeline } }
        set { timelineLock.withLock { currentTimeline = newValue } }
    }

    /// The media time of the frame the device is emitting now, per its position report.
    func currentTime() -> MediaTime {
        let position = device.position()
        return timeline.time(atDeviceFrame: position.framesEmitted)
    }

    /// Host time (the device's reporting clock) at which device frame `frame` is emitted,
    /// extrapolated at the nominal rate from the position report `position`.
    func hostTime(ofDeviceFrame frame: Int64, from position: DevicePosition) -> Int64 {
        position.hostTime + WideMath.multiplyDivide(frame - position.framesEmitted, 1_000_000_000, Int64(sampleRate),
                                                    rounding: .toNearestOrAwayFromZero)
    }

    /// The device frame emitted at host time `hostTime` (nearest), from `position`.
    func deviceFrame(atHostTime hostTime: Int64, from position: DevicePosition, rounding: FloatingPointRoundingRule = .toNearestOrAwayFromZero) -> Int64 {
        position.framesEmitted + WideMath.multiplyDivide(hostTime - position.hostTime, Int64(sampleRate), 1_000_000_000, rounding: rounding)
    }
}
