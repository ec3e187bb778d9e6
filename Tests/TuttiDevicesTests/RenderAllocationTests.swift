import Testing
import TuttiCore
@_spi(Testing) @testable import TuttiDevices
import TuttiSimulation
import TuttiTestSupport

/// The render loops must never allocate: a malloc interposer counts every allocation made on
/// the render thread between entering and leaving its loop.
@Suite struct RenderAllocationTests {
    static let format = AudioFormat(sampleRate: 48000, channelCount: 2)

    @Test func virtualDeviceRenderLoopDoesNotAllocate() async throws {
        let directory = try TemporaryDirectory("alloc")
        defer { directory.remove() }
        // Real time, real pacing clock, real capture thread; includes an underrun.
        let device = VirtualDevice(clock: MonotonicClock(), capturePath: directory.file("a.wav"), format: Self.format)
        let counter = RenderThreadAllocations()
        device.renderLoopObserver = counter.observer
        try device.start(source: RampSource(totalFrames: 48000, stall: 9600..<10080))
        try await onOwnThread("the device to finish") { try device.waitUntilFinished() }
        #expect(device.underrunCount == 1)
        #expect(counter.allocations == 0)
    }

    @Test func alsaRenderLoopDoesNotAllocate() async throws {
        // ALSA's "null" PCM runs the whole ALSA write path with no sound card.
        let device = try ALSADevice(clock: MonotonicClock(), pcmName: "null", format: Self.format)
        let counter = RenderThreadAllocations()
        device.renderLoopObserver = counter.observer
        try device.start(source: RampSource(totalFrames: 48000 * 5))
        try await onOwnThread("the device to finish") { try device.waitUntilFinished() }
        #expect(device.position().framesEmitted > 0)
        #expect(counter.allocations == 0)
    }

    /// The counter is not vacuous: a source that allocates on every render is caught.
    @Test func allocatingSourceIsDetected() async throws {
        let device = VirtualDevice(clock: FreeRunningClock(), capturePath: nil, format: Self.format)
        let counter = RenderThreadAllocations()
        device.renderLoopObserver = counter.observer
        try device.start(source: RampSource(totalFrames: 4800, allocateOnRender: true))
        try await onOwnThread("the device to finish") { try device.waitUntilFinished() }
        #expect(counter.allocations >= 10)
    }
}
