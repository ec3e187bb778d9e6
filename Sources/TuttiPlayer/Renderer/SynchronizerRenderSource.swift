import Atomics
import Synchronization
import TuttiCore
import TuttiDevices

/// The render source a synchronizer gives its device: mixes the real-time rings of its
/// renderers at the device frames they were planned for, and silence everywhere else.
///
/// Thread-safety: `render` runs on the device's render thread and never allocates, locks,
/// logs or waits; renderers are plugged in through atomic slots (`attach`/`detach`, any one
/// thread at a time, serialised by the synchronizer's lock).
final class SynchronizerRenderSource: RenderSource, @unchecked Sendable {
    static let maximumRenderers = 8

    private let core: SynchronizerCore
    private let channelCount: Int
    /// Opaque pointers to retained `RendererRing`s; 0 is an empty slot.
    private let slots: UnsafeMutablePointer<UnsafeAtomic<UInt>.Storage>
    private let scratch: UnsafeMutablePointer<Float>
    private let scratchFrames = 2048
    /// Wakes the feeder after every period: the render position moved, there is room to fill.
    let feederWake = WakeSignal()
    /// Wakes a caller waiting for the render thread to let go of a detached ring.
    let renderTick = WakeSignal()

    init(core: SynchronizerCore, channelCount: Int) {
        self.core = core
        self.channelCount = channelCount
        slots = .allocate(capacity: Self.maximumRenderers)
        for index in 0..<Self.maximumRenderers { (slots + index).initialize(to: UnsafeAtomic<UInt>.Storage(0)) }
        scratch = .allocate(capacity: scratchFrames * channelCount)
        scratch.initialize(repeating: 0, count: scratchFrames * channelCount)
    }

    deinit {
        for index in 0..<Self.maximumRenderers {
            let bits = UnsafeAtomic<UInt>(at: slots + index).load(ordering: .relaxed)
            if bits != 0 { Unmanaged<RendererRing>.fromOpaque(UnsafeRawPointer(bitPattern: bits)!).release() }
        }
        slots.deinitialize(count: Self.maximumRenderers)
        slots.deallocate()
        scratch.deallocate()
    }

    private func slot(_ index: Int) -> UnsafeAtomic<UInt> { UnsafeAtomic(at: slots + index) }

    // MARK: Control side

    /// Puts `ring` in a free slot; returns false when all are taken.
    func attach(_ ring: RendererRing) -> Bool {
        for index in 0..<Self.maximumRenderers where slot(index).load(ordering: .relaxed) == 0 {
            slot(index).store(UInt(bitPattern: Unmanaged.passRetained(ring).toOpaque()), ordering: .releasing)
            return true
        }
        return false
    }

    /// Empties `ring`'s slot and waits until the render thread can no longer be using it
    /// (two render calls later, or at once when the device has stopped), then releases it.
    func detach(_ ring: RendererRing) {
        let bits = UInt(bitPattern: Unmanaged.passUnretained(ring).toOpaque())
        for index in 0..<Self.maximumRenderers where slot(index).load(ordering: .relaxed) == bits {
            slot(index).store(0, ordering: .releasing)
            let target = core.renderCalls.load(ordering: .acquiring) + 2
            while core.renderCalls.load(ordering: .acquiring) < target && !core.device.isFinished {
                renderTick.prepareToWait()
                if core.renderCalls.load(ordering: .acquiring) >= target { break }
                renderTick.wait(timeoutNanoseconds: 10_000_000)
            }
            Unmanaged<RendererRing>.fromOpaque(UnsafeRawPointer(bitPattern: bits)!).release()
        }
    }

    // MARK: Render thread

    func render(into buffer: UnsafeMutablePointer<Float>, frameCount: Int, deviceFrame: Int64) -> RenderResult {
        // Published first: from now on planning for these frames is too late.
        core.renderPosition.store(deviceFrame + Int64(frameCount), ordering: .releasing)
        buffer.update(repeating: 0, count: frameCount * channelCount)
        for index in 0..<Self.maximumRenderers {
            let bits = slot(index).load(ordering: .acquiring)
            if bits == 0 { continue }
            // Unretained: the slot holds a reference until `detach` has seen this call end.
            Unmanaged<RendererRing>.fromOpaque(UnsafeRawPointer(bitPattern: bits)!)._withUnsafeGuaranteedRef {
                $0.mix(into: buffer, frames: frameCount, deviceFrame: deviceFrame, scratch: scratch, scratchFrames: scratchFrames)
            }
        }
        core.renderCalls.add(1, ordering: .releasing)
        feederWake.signal()
        renderTick.signal()
        return RenderResult(frames: frameCount, endOfStream: false)
    }

    /// Never called for paced devices; the synchronizer always has frames (silence at worst).
    func waitForFrames(timeoutNanoseconds: Int64) {}
}
