import Synchronization
@_spi(Testing) import TuttiDevices
import CAllocationCounter

/// A source whose frame `n` is the value `ramp(n)` on the left and `-ramp(n)` on the right, so a
/// captured file shows exactly which frames were emitted where. Allocation-free.
final class RampSource: RenderSource, @unchecked Sendable {
    let totalFrames: Int64
    /// Device frames in this range get no data (a stalled pipeline), to provoke underruns.
    let stall: Range<Int64>
    private var next: Int64 = 0
    let allocateOnRender: Bool

    init(totalFrames: Int64, stall: Range<Int64> = 0..<0, allocateOnRender: Bool = false) {
        self.totalFrames = totalFrames
        self.stall = stall
        self.allocateOnRender = allocateOnRender
    }

    static func ramp(_ frame: Int64) -> Float { Float(frame % 8192) / 8192 }

    func render(into buffer: UnsafeMutablePointer<Float>, frameCount: Int, deviceFrame: Int64) -> RenderResult {
        if allocateOnRender {
            // A deliberately bad source: proves the allocation counter sees what it should.
            let garbage = [Int](repeating: Int(deviceFrame), count: 16)
            if garbage.count == 17 { buffer[0] = 1 }
        }
        if stall.contains(deviceFrame) { return RenderResult(frames: 0, endOfStream: false) }
        let count = Int(min(Int64(frameCount), totalFrames - next))
        for i in 0..<count {
            let value = Self.ramp(next + Int64(i))
            buffer[2 * i] = value
            buffer[2 * i + 1] = -value
        }
        next += Int64(count)
        return RenderResult(frames: count, endOfStream: next == totalFrames)
    }

    func waitForFrames(timeoutNanoseconds: Int64) {}
}

/// Counts allocations on a device's render thread between entering and leaving its loop.
final class RenderThreadAllocations: Sendable {
    private let count = Atomic<Int64>(-1)

    var observer: RenderLoopObserver {
        RenderLoopObserver(didEnter: { tutti_alloc_track_begin() },
                           willExit: { [self] in self.count.store(tutti_alloc_track_end(), ordering: .releasing) })
    }

    /// Allocations counted; -1 if the loop never ran.
    var allocations: Int64 { count.load(ordering: .acquiring) }
}
