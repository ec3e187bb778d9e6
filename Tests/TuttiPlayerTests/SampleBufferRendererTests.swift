import Dispatch
import Foundation
import Testing
import TuttiCore
@testable import TuttiPlayer
import TuttiTestSupport

/// The renderer and synchronizer on a real-time virtual sound card: what the card emitted
/// (its WAV capture, Float32 at 48 kHz, so bit-exact) and when (its timing file) are checked
/// sample by sample.
///
/// Each test drives playback from a thread of its own and waits on the synchronizer's boundary
/// observer (timeouts only as guards), so a Swift concurrency pool held by other tests cannot
/// delay its steps; steps that depend on where the playhead is read it first and keep seconds
/// of margin.
@Suite struct SampleBufferRendererPlaybackTests {
    static let rate = 48000

    /// Media time 0 plays exactly at the host time given to setRate, and the output is the
    /// enqueued signal, sample for sample: a gap in presentation times plays as silence, and
    /// there is silence before and after.
    @Test func startsAtTheGivenHostTimeAndPlaysExactly() async throws {
        let signal = distinctSignal(frames: 3 * Self.rate, seed: 1)
        let split = 2 * Self.rate, gap = Self.rate / 2
        let (capture, hostTime, underruns) = try await onOwnThread {
            let rig = try RendererRig("start")
            try enqueueSignal(interleavedFrames(signal, 0..<split), on: rig.renderer)
            try enqueueSignal(interleavedFrames(signal, split..<(3 * Self.rate)), on: rig.renderer, from: MediaTime(frame: Int64(split + gap), sampleRate: Self.rate))
            let hostTime = try rig.start()
            try waitForTimeline(rig.synchronizer, toReach: MediaTime(value: 37, timescale: 10))
            return (try rig.finish(), hostTime, rig.device.underrunCount)
        }

        let start = try #require(capture.firstSoundFrame(threshold: 0))
        // The first sound leaves the DAC at the host time asked for, within one frame.
        let error = capture.emissionTime(ofFrame: Double(start)) - Double(hostTime)
        #expect(abs(error) <= 1e9 / Double(Self.rate), "first sound \(error) ns from the requested host time")
        #expect(start == deviceFrame(in: capture, atHostTime: hostTime))
        let end = start + 3 * Self.rate + gap
        #expect(capture.frameCount >= end + Self.rate / 10)
        #expect(firstMismatch(interleavedFrames(capture.samples, start..<(start + split)), interleavedFrames(signal, 0..<split)) == nil)
        #expect(interleavedFrames(capture.samples, (start + split)..<(start + split + gap)).allSatisfy { $0 == 0 })
        #expect(firstMismatch(interleavedFrames(capture.samples, (start + split + gap)..<end), interleavedFrames(signal, split..<(3 * Self.rate))) == nil)
        #expect(interleavedFrames(capture.samples, end..<(end + Self.rate / 10)).allSatisfy { $0 == 0 })
        #expect(underruns == 0)
    }

    /// A flush seconds ahead of the playhead is honoured: the output is A up to the flush time,
    /// then B enqueued from that time, with no gap and nothing of A after it.
    @Test func acceptedFlushFromReplacesTheRestSampleExactly() async throws {
        let a = distinctSignal(frames: 12 * Self.rate, seed: 2)
        let b = distinctSignal(frames: 2 * Self.rate, seed: 3)
        let (capture, cutFrame, accepted) = try await onOwnThread {
            let rig = try RendererRig("flush-accepted")
            try enqueueSignal(a, on: rig.renderer)
            _ = try rig.start()
            try waitForTimeline(rig.synchronizer, toReach: MediaTime(value: 1, timescale: 2))
            // Three seconds past wherever the playhead is now (0.5 s unless this thread was held up).
            let ahead = rig.synchronizer.currentTime() + MediaTime(value: 3, timescale: 1)
            let cutFrame = max(4 * Self.rate, Int(ahead.frame(atSampleRate: Self.rate, rounding: .up)))
            let cut = MediaTime(frame: Int64(cutFrame), sampleRate: Self.rate)
            let accepted = RendererTestBox<Bool?>(nil)
            rig.renderer.flush(fromSourceTime: cut) { ok in accepted.withValue { $0 = ok } }
            if accepted.current == true { try enqueueSignal(b, on: rig.renderer, from: cut) }
            try waitForTimeline(rig.synchronizer, toReach: cut + MediaTime(value: 22, timescale: 10))
            return (try rig.finish(), cutFrame, accepted.current)
        }

        #expect(accepted == true)
        let start = try #require(capture.firstSoundFrame(threshold: 0))
        #expect(firstMismatch(interleavedFrames(capture.samples, start..<(start + cutFrame)), interleavedFrames(a, 0..<cutFrame)) == nil)
        #expect(firstMismatch(interleavedFrames(capture.samples, (start + cutFrame)..<(start + cutFrame + 2 * Self.rate)), b) == nil)
        let end = start + cutFrame + 2 * Self.rate
        #expect(interleavedFrames(capture.samples, end..<(end + Self.rate / 10)).allSatisfy { $0 == 0 })
    }

    /// A flush at or behind the playhead cannot be honoured: refused, and A plays intact,
    /// nothing lost or repeated. An overlapping enqueue is refused too and changes nothing.
    @Test func refusedFlushLeavesPlaybackIntact() async throws {
        let a = distinctSignal(frames: 4 * Self.rate, seed: 4)
        let (capture, results, overlapError) = try await onOwnThread {
            let rig = try RendererRig("flush-refused")
            try enqueueSignal(a, on: rig.renderer)
            _ = try rig.start()
            try waitForTimeline(rig.synchronizer, toReach: MediaTime(value: 1, timescale: 1))

            let results = RendererTestBox<[Bool]>([])
            rig.renderer.flush(fromSourceTime: MediaTime(value: 1, timescale: 2)) { ok in results.withValue { $0.append(ok) } }
            let now = rig.synchronizer.currentTime()
            rig.renderer.flush(fromSourceTime: now) { ok in results.withValue { $0.append(ok) } }
            rig.renderer.flush(fromSourceTime: now + MediaTime(value: 1, timescale: 10)) { ok in results.withValue { $0.append(ok) } }
            var overlapError: SampleBufferRendererError?
            do throws(SampleBufferRendererError) {
                try rig.renderer.enqueue(PCMBuffer(format: RendererRig.format, samples: distinctSignal(frames: 4800, seed: 9),
                                                   presentationTime: MediaTime(value: 2, timescale: 1)))
            } catch {
                overlapError = error
            }
            try waitForTimeline(rig.synchronizer, toReach: MediaTime(value: 42, timescale: 10))
            return (try rig.finish(), results.current, overlapError)
        }

        #expect(results == [false, false, false])
        #expect(overlapError == .overlapsEnqueuedMedia(presentationTime: MediaTime(value: 2, timescale: 1), enqueuedEnd: MediaTime(value: 4, timescale: 1)))
        let start = try #require(capture.firstSoundFrame(threshold: 0))
        #expect(firstMismatch(interleavedFrames(capture.samples, start..<(start + 4 * Self.rate)), a) == nil)
        let end = start + 4 * Self.rate
        #expect(interleavedFrames(capture.samples, end..<(end + Self.rate / 10)).allSatisfy { $0 == 0 })
    }

    /// Pausing at a host time while playing and resuming half a second later in place inserts
    /// exactly that much silence: nothing lost, nothing repeated.
    @Test func pauseAndResumeInPlaceLoseNothing() async throws {
        let a = distinctSignal(frames: 12 * Self.rate, seed: 5)
        let (capture, pauseHost, pauseTime) = try await onOwnThread {
            let rig = try RendererRig("pause")
            try enqueueSignal(a, on: rig.renderer)
            _ = try rig.start()
            try waitForTimeline(rig.synchronizer, toReach: MediaTime(value: 1, timescale: 2))
            // The media already committed for after the pause is withdrawn and played later.
            let pauseHost = MonotonicClock().now() + 300_000_000
            let pauseTime = rig.synchronizer.time(atHostTime: pauseHost)
            try rig.synchronizer.setRate(0, time: pauseTime, atHostTime: pauseHost)
            try rig.synchronizer.setRate(1, time: pauseTime, atHostTime: pauseHost + 500_000_000)
            try waitForTimeline(rig.synchronizer, toReach: pauseTime + MediaTime(value: 12, timescale: 10))
            return (try rig.finish(), pauseHost, pauseTime)
        }

        let start = try #require(capture.firstSoundFrame(threshold: 0))
        let pauseDevice = deviceFrame(in: capture, atHostTime: pauseHost)
        let resumeDevice = deviceFrame(in: capture, atHostTime: pauseHost + 500_000_000)
        let pauseFrame = pauseDevice - start
        #expect(abs(pauseFrame - Int(pauseTime.frame(atSampleRate: Self.rate, rounding: .toNearestOrAwayFromZero))) <= 1)
        #expect(resumeDevice - pauseDevice == Self.rate / 2)
        #expect(firstMismatch(interleavedFrames(capture.samples, start..<pauseDevice), interleavedFrames(a, 0..<pauseFrame)) == nil)
        #expect(interleavedFrames(capture.samples, pauseDevice..<resumeDevice).allSatisfy { $0 == 0 })
        #expect(firstMismatch(interleavedFrames(capture.samples, resumeDevice..<(resumeDevice + Self.rate)), interleavedFrames(a, pauseFrame..<(pauseFrame + Self.rate))) == nil)
    }

    /// The render thread never allocates, while the app enqueues from a request block, the
    /// timeline pauses and resumes, observers run, media is flushed from a time and entirely.
    @Test func renderThreadDoesNotAllocate() async throws {
        let signal = distinctSignal(frames: 4 * Self.rate, seed: 6)
        let (allocations, played, observed) = try await onOwnThread {
            let probe = AllocationProbe()
            let rig = try RendererRig("alloc", observer: probe.observer)
            let next = RendererTestBox(0)
            let renderer = rig.renderer
            renderer.requestMediaDataWhenReady(on: DispatchQueue(label: "feed")) {
                while renderer.isReadyForMoreMediaData {
                    let offset = next.withValue { value -> Int in defer { value += 2400 }; return value }
                    guard offset < 4 * Self.rate else { renderer.stopRequestingMediaData(); return }
                    try? renderer.enqueue(PCMBuffer(format: RendererRig.format, samples: interleavedFrames(signal, offset..<(offset + 2400)),
                                                    presentationTime: MediaTime(frame: Int64(offset), sampleRate: Self.rate)))
                }
            }
            let ticks = RendererTestBox(0)
            let observer = rig.synchronizer.addPeriodicTimeObserver(forInterval: MediaTime(value: 1, timescale: 10), queue: DispatchQueue(label: "ticks")) { _ in
                ticks.withValue { $0 += 1 }
            }
            let sync = rig.synchronizer
            _ = try rig.start()
            try waitForTimeline(sync, toReach: MediaTime(value: 1, timescale: 1))
            try sync.setRate(0)
            try sync.setRate(1)
            renderer.flush(fromSourceTime: sync.currentTime() + MediaTime(value: 2, timescale: 1)) { _ in }
            try waitForTimeline(sync, toReach: sync.currentTime() + MediaTime(value: 1, timescale: 2))
            renderer.flush()
            try waitForTimeline(sync, toReach: sync.currentTime() + MediaTime(value: 1, timescale: 5))
            sync.removeTimeObserver(observer)
            let capture = try rig.finish()
            return (probe.allocations, capture.firstSoundFrame(threshold: 0) != nil, ticks.current)
        }
        #expect(allocations == 0)
        #expect(played)
        #expect(observed > 0)
    }

    /// The clock mapping agrees with the device's position report, and the observer streams
    /// yield the exact times the timeline passes.
    @Test func timeMappingAndObservers() async throws {
        struct Readings: Sendable {
            var originHostTime: Int64?
            var beforeStart: MediaTime
            var atOrigin: MediaTime
            var secondLater: MediaTime
            var notPlayed: Int64?
            var positionTime: MediaTime
            var current: MediaTime
            var afterTime: MediaTime
            var positionHostTime: Int64
            var roundTrip: Int64?
        }
        let signal = distinctSignal(frames: 2 * Self.rate, seed: 7)
        let origin = MediaTime(value: 10, timescale: 1)
        let rig = try RendererRig("mapping")
        let sync = rig.synchronizer
        try enqueueSignal(signal, on: rig.renderer, from: origin)
        // Registered before the start (the streams buffer what they yield until consumed).
        let periodic = sync.periodicTimes(interval: MediaTime(value: 1, timescale: 4))
        let boundaries = sync.boundaryTimes([MediaTime(value: 106, timescale: 10), MediaTime(value: 9, timescale: 1),
                                             MediaTime(value: 101, timescale: 10), MediaTime(value: 103, timescale: 10)])
        let periodicTask = Task { try await firstValues(periodic, count: 5) }
        let boundaryTask = Task { try await firstValues(boundaries, count: 10) }
        let hostTime = try rig.start(at: origin)
        let (readings, capture) = try await onOwnThread {
            let originHostTime = sync.hostTime(forMediaTime: origin)
            var readings = Readings(originHostTime: originHostTime, beforeStart: sync.time(atHostTime: hostTime - 1_000_000),
                                    atOrigin: sync.time(atHostTime: originHostTime ?? hostTime),
                                    secondLater: sync.time(atHostTime: (originHostTime ?? hostTime) + 1_000_000_000),
                                    notPlayed: sync.hostTime(forMediaTime: MediaTime(value: 9, timescale: 1)),
                                    positionTime: .zero, current: .zero, afterTime: .zero, positionHostTime: 0, roundTrip: nil)
            try waitForTimeline(sync, toReach: MediaTime(value: 105, timescale: 10))
            let before = rig.device.position()
            readings.current = sync.currentTime()
            let after = rig.device.position()
            readings.positionTime = sync.time(atHostTime: before.hostTime)
            readings.afterTime = sync.time(atHostTime: after.hostTime)
            readings.positionHostTime = before.hostTime
            readings.roundTrip = sync.hostTime(forMediaTime: readings.positionTime)
            try waitForTimeline(sync, toReach: MediaTime(value: 122, timescale: 10))
            return (readings, try rig.finish())
        }

        // Before the start the timeline stands at its old time; media time `origin` plays at
        // the device frame emitted nearest the host time asked for.
        let halfFrame: Int64 = 1_000_000_000 / Int64(2 * Self.rate) + 1
        #expect(readings.beforeStart == .zero)
        let originHostTime = try #require(readings.originHostTime)
        #expect(abs(originHostTime - hostTime) <= halfFrame)
        #expect(abs((readings.atOrigin - origin).nanoseconds) <= 1)
        #expect(abs((readings.secondLater - origin - MediaTime(value: 1, timescale: 1)).nanoseconds) <= 1)
        #expect(readings.notPlayed == nil)
        // The current time is the timeline at the frame the device reports emitting.
        let microsecond = MediaTime(value: 1, timescale: 1_000_000)
        #expect(readings.current >= readings.positionTime - microsecond && readings.current <= readings.afterTime + microsecond)
        let expected = origin + MediaTime(value: readings.positionHostTime - originHostTime, timescale: 1_000_000_000)
        #expect(abs((readings.positionTime - expected).nanoseconds) <= 1)
        #expect(abs(try #require(readings.roundTrip) - readings.positionHostTime) <= 1)

        #expect(try await periodicTask.value == (0..<5).map { origin + MediaTime(value: Int64($0), timescale: 4) })
        #expect(try await boundaryTask.value == [MediaTime(value: 101, timescale: 10), MediaTime(value: 103, timescale: 10), MediaTime(value: 106, timescale: 10)])
        let start = try #require(capture.firstSoundFrame(threshold: 0))
        #expect(start == deviceFrame(in: capture, atHostTime: hostTime))
        #expect(firstMismatch(interleavedFrames(capture.samples, start..<(start + 2 * Self.rate)), signal) == nil)
    }
}
