import CAllocationCounter
import Dispatch
import Foundation
import Synchronization
import Testing
import TuttiCore
@_spi(Testing) import TuttiDevices
@testable import TuttiPlayer
import TuttiSimulation
import TuttiTestSupport

/// A signal in which every frame differs and no sample is zero: any shift, gap, repeat or
/// loss shows in a sample comparison, and silence is unambiguous.
func distinctSignal(frames: Int, channels: Int = 2, seed: UInt64) -> [Float] {
    var generator = SplitMix64(seed: seed)
    return (0..<(frames * channels)).map { _ in
        let magnitude = Float(0.05 + 0.45 * generator.nextUnitInterval())
        return generator.next() & 1 == 0 ? magnitude : -magnitude
    }
}

/// Enqueues `samples` (48 kHz stereo unless told) from `start` in buffers of `chunk` frames.
func enqueueSignal(_ samples: [Float], on renderer: SampleBufferRenderer, from start: MediaTime = .zero,
                   format: AudioFormat = AudioFormat(sampleRate: 48000, channelCount: 2), chunk: Int = 4800) throws {
    let frames = samples.count / format.channelCount
    var offset = 0
    while offset < frames {
        let count = min(chunk, frames - offset)
        let buffer = PCMBuffer(format: format, samples: Array(samples[(offset * format.channelCount)..<((offset + count) * format.channelCount)]),
                               presentationTime: start + MediaTime(frame: Int64(offset), sampleRate: format.sampleRate))
        try renderer.enqueue(buffer)
        offset += count
    }
}

/// A virtual sound card on the real clock, a synchronizer and one renderer on it.
final class RendererRig: Sendable {
    static let format = AudioFormat(sampleRate: 48000, channelCount: 2)
    let directory: TemporaryDirectory
    let device: VirtualDevice
    let synchronizer: RenderSynchronizer
    let renderer: SampleBufferRenderer
    var capturePath: String { directory.file("out.wav") }

    /// The real-time lead is generous (0.5 s) so a feeder thread starved by parallel tests on
    /// busy cores still keeps ahead of the device; flushes in these tests are seconds ahead.
    init(_ label: String, observer: RenderLoopObserver? = nil) throws {
        directory = try TemporaryDirectory("renderer-\(label)")
        let device = VirtualDevice(clock: MonotonicClock(), capturePath: directory.file("out.wav"), format: Self.format)
        device.renderLoopObserver = observer
        self.device = device
        synchronizer = try RenderSynchronizer(device: device)
        renderer = SampleBufferRenderer(route: LocalDeviceRoute(device: device, realTimeLead: MediaTime(value: 1, timescale: 2)))
        synchronizer.addRenderer(renderer)
    }

    /// Starts the timeline at media time `time`, `delay` from now; returns the host time.
    func start(at time: MediaTime = .zero, delay: Int64 = 300_000_000) throws -> Int64 {
        let hostTime = MonotonicClock().now() + delay
        try synchronizer.setRate(1, time: time, atHostTime: hostTime)
        return hostTime
    }

    /// Stops everything and reads back what the device emitted.
    func finish() throws -> VirtualCapture {
        try synchronizer.stop()
        return try VirtualCapture(path: capturePath)
    }

    deinit { directory.remove() }
}

struct TimelineTimeout: Error, CustomStringConvertible {
    let time: MediaTime
    var description: String { "the timeline did not reach \(time.seconds) s in time" }
}

/// Blocks (guarded by `timeout` seconds) until the synchronizer's timeline has passed `time`.
///
/// Woken by a boundary observer on a queue of its own, so it is meant for the tests' own
/// threads (`onOwnThread`): the tests' real-time steps must not wait for a turn on the Swift
/// concurrency pool, which other tests on busy cores may hold for seconds.
func waitForTimeline(_ synchronizer: RenderSynchronizer, toReach time: MediaTime, timeout: Double = 60) throws {
    let reached = DispatchSemaphore(value: 0)
    let observer = synchronizer.addBoundaryTimeObserver(forTimes: [time], queue: DispatchQueue(label: "renderer-test-wait")) { _ in
        reached.signal()
    }
    defer { synchronizer.removeTimeObserver(observer) }
    // Passed before the observer started looking: it will not fire.
    if synchronizer.currentTime() > time { return }
    if reached.wait(timeout: .now() + timeout) == .timedOut { throw TimelineTimeout(time: time) }
}

/// The first `count` values of `stream`, or fewer if it ends or `timeout` seconds pass.
func firstValues(_ stream: AsyncStream<MediaTime>, count: Int, timeout: Double = 60) async throws -> [MediaTime] {
    try await withThrowingTaskGroup(of: [MediaTime]?.self) { group in
        group.addTask {
            var values: [MediaTime] = []
            for await value in stream {
                values.append(value)
                if values.count == count { break }
            }
            return values
        }
        group.addTask {
            try await Task.sleep(for: .seconds(timeout))
            return nil
        }
        let first = try await group.next() ?? nil
        group.cancelAll()
        return first ?? []
    }
}

/// Interleaved frames `range` of `samples`, cut short where `samples` ends (so that a short
/// capture fails a comparison instead of crashing the test run).
func interleavedFrames(_ samples: [Float], _ range: Range<Int>, channels: Int = 2) -> [Float] {
    let upper = min(range.upperBound * channels, samples.count)
    let lower = min(max(range.lowerBound * channels, 0), upper)
    return Array(samples[lower..<upper])
}

/// Where two interleaved signals first differ (`nil` when they are identical), in a form that
/// keeps a failure message short.
func firstMismatch(_ actual: [Float], _ expected: [Float], channels: Int = 2) -> String? {
    if let index = (0..<min(actual.count, expected.count)).first(where: { actual[$0] != expected[$0] }) {
        return "frame \(index / channels) differs: \(actual[index]) instead of \(expected[index])"
    }
    if actual.count != expected.count { return "\(actual.count / channels) frames instead of \(expected.count / channels)" }
    return nil
}

/// The device frame emitted at host time `hostTime`, from the capture's timing file.
func deviceFrame(in capture: VirtualCapture, atHostTime hostTime: Int64) -> Int {
    Int(capture.frame(atEmissionTime: Double(hostTime)).rounded())
}

/// A value shared with a media-request block.
final class RendererTestBox<Value: Sendable>: @unchecked Sendable {
    private let lock = NSLock()
    private var value: Value
    init(_ value: Value) { self.value = value }
    func withValue<R>(_ body: (inout Value) -> R) -> R { lock.withLock { body(&value) } }
    var current: Value { lock.withLock { value } }
}
