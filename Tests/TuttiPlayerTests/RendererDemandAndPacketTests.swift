import Dispatch
import Foundation
import Testing
import TuttiCore
import TuttiDevices
import TuttiMedia
@testable import TuttiPlayer
import TuttiTestSupport

/// How much media a renderer asks for depends on its route: a local device wants about two
/// seconds, a group of remote rooms wants the house's five minutes.
@Suite struct RendererDemandTests {
    /// Runs a request block that enqueues `step` silence buffers while the renderer is ready and
    /// reports, each time it returns, how much is buffered ahead.
    private func fill(_ renderer: SampleBufferRenderer, step: MediaTime, next: RendererTestBox<MediaTime>) -> (AsyncStream<MediaTime>, RendererTestBox<Int>) {
        let (stream, continuation) = AsyncStream.makeStream(of: MediaTime.self)
        let calls = RendererTestBox(0)
        let stepFrames = Int(step.frame(atSampleRate: renderer.format.sampleRate))
        let silence = [Float](repeating: 0, count: stepFrames * renderer.format.channelCount)
        renderer.requestMediaDataWhenReady(on: DispatchQueue(label: "fill")) {
            calls.withValue { $0 += 1 }
            while renderer.isReadyForMoreMediaData {
                let time = next.withValue { value -> MediaTime in defer { value += step }; return value }
                try? renderer.enqueue(PCMBuffer(format: renderer.format, samples: silence, presentationTime: time))
            }
            continuation.yield(renderer.bufferedDuration)
        }
        return (stream, calls)
    }

    @Test func localDeviceRouteAsksForAboutTwoSeconds() async throws {
        let device = VirtualDevice(clock: MonotonicClock(), capturePath: nil, format: RendererRig.format)
        let renderer = SampleBufferRenderer(route: LocalDeviceRoute(device: device))
        #expect(renderer.route.forwardBufferDuration == MediaTime(value: 2, timescale: 1))
        let next = RendererTestBox(MediaTime.zero)
        let (reports, calls) = fill(renderer, step: MediaTime(value: 1, timescale: 10), next: next)
        let first = try await firstValues(reports, count: 1)
        #expect(first == [MediaTime(value: 2, timescale: 1)])
        #expect(!renderer.isReadyForMoreMediaData)
        let callsWhenFull = calls.current

        // A flush makes room: the block is asked again and fills back up to two seconds.
        next.withValue { $0 = MediaTime(value: 1, timescale: 1) }
        let accepted = RendererTestBox<Bool?>(nil)
        renderer.flush(fromSourceTime: MediaTime(value: 1, timescale: 1)) { ok in accepted.withValue { $0 = ok } }
        #expect(accepted.current == true)
        let second = try await firstValues(reports, count: 1)
        #expect(second == [MediaTime(value: 2, timescale: 1)])
        #expect(calls.current == callsWhenFull + 1)
        renderer.stopRequestingMediaData()
    }

    @Test func roomGroupRouteAsksForMinutes() async throws {
        // 8 kHz mono keeps five minutes of enqueued silence small.
        let format = AudioFormat(sampleRate: 8000, channelCount: 1)
        let route = RoomGroupRoute(rooms: ["kitchen", "hall"])
        #expect(route.forwardBufferDuration == MediaTime(value: 300, timescale: 1))
        #expect(route.flushLeadTime == MediaTime(value: 1, timescale: 2))
        let renderer = SampleBufferRenderer(format: format, route: route)
        let next = RendererTestBox(MediaTime.zero)
        let (reports, _) = fill(renderer, step: MediaTime(value: 1, timescale: 1), next: next)
        let full = try await firstValues(reports, count: 1)
        #expect(full == [MediaTime(value: 300, timescale: 1)])
        #expect(!renderer.isReadyForMoreMediaData)
        renderer.stopRequestingMediaData()

        // Its flush lead is the house's margin: half a second ahead is fine.
        let results = RendererTestBox<[Bool]>([])
        renderer.flush(fromSourceTime: MediaTime(value: 1, timescale: 4)) { ok in results.withValue { $0.append(ok) } }
        renderer.flush(fromSourceTime: MediaTime(value: 1, timescale: 2)) { ok in results.withValue { $0.append(ok) } }
        #expect(results.current == [false, true])
        #expect(renderer.bufferedDuration == MediaTime(value: 1, timescale: 2))
    }
}

/// Compressed packets from the stream parser, decoded by the renderer, played on a real-time
/// virtual device, compared with the ffmpeg CLI's own decode.
@Suite struct RendererPacketTests {
    @Test(arguments: [
        ("flac", 48000, ["-c:a", "flac"]),
        ("mp3", 48000, ["-c:a", "libmp3lame", "-b:a", "256k"]),
        ("flac", 44100, ["-c:a", "flac"]),
    ])
    func parsedPacketsRenderLikeFFmpegDecodes(_ format: (String, Int, [String])) async throws {
        let (fileExtension, sampleRate, codec) = format
        let (capture, hostTime, reference) = try await onOwnThread {
            let rig = try RendererRig("packets-\(fileExtension)-\(sampleRate)")
            let path = rig.directory.file("in.\(fileExtension)")
            try TestMedia.generateTone(path, seconds: 2.5, sampleRate: sampleRate, codecArguments: codec)

            let bytes = [UInt8](try Data(contentsOf: URL(fileURLWithPath: path)))
            let parser = AudioStreamParser()
            var events: [ParsedEvent] = []
            for offset in stride(from: 0, to: bytes.count, by: 4096) {
                events += try parser.push(Array(bytes[offset..<min(offset + 4096, bytes.count)]))
            }
            events += try parser.finish()
            var description: StreamDescription?
            var position: Int64 = 0
            for event in events {
                switch event {
                case .format(let found): description = found
                case .packet(let packet):
                    guard let stream = description else { throw PacketOrderError() }
                    let first = packet.timestamp ?? position
                    // Priming is dropped: give the first packet −delay for the audio to start at 0.
                    let time = MediaTime(frame: first - Int64(stream.encoderDelay ?? 0), sampleRate: stream.sampleRate)
                    try rig.renderer.enqueue(packet, description: stream, presentationTime: time)
                    position = first + Int64(packet.frameCount ?? 0)
                }
            }
            try rig.renderer.endContiguousRun()
            let hostTime = try rig.start()
            try waitForTimeline(rig.synchronizer, toReach: MediaTime(value: 27, timescale: 10))
            // Resampled by one libsoxr run, like ffmpeg's soxr at the same precision.
            let reference = sampleRate == 48000 ? try TestMedia.decodeWithFFmpeg(path)
                                                : try TestMedia.decodeWithFFmpeg(path, filters: "aresample=48000:resampler=soxr:precision=20")
            return (try rig.finish(), hostTime, reference)
        }

        let start = deviceFrame(in: capture, atHostTime: hostTime)
        #expect(interleavedFrames(capture.samples, 0..<start).allSatisfy { $0 == 0 })
        let length = reference.count / 2
        if sampleRate == 48000 {
            #expect(length == 120_000)
            #expect(SignalCheck.maxDifference(interleavedFrames(capture.samples, start..<(start + length)), reference) < 1e-6)
            #expect(interleavedFrames(capture.samples, (start + length)..<(start + length + 4800)).allSatisfy { $0 == 0 })
        } else {
            #expect(abs(length - 120_000) <= 1)
            let output = Array(capture.samples[(start * 2)...])
            #expect(SignalCheck.bestLag(output, reference, channels: 2, around: 60_000) == 0)
            #expect(SignalCheck.rmsDifference(output, reference, channels: 2, frames: 1000..<(length - 1000)) < 1e-4)
            #expect(interleavedFrames(capture.samples, (start + length + 1)..<(start + length + 4800)).allSatisfy { $0 == 0 })
        }
    }
}

struct PacketOrderError: Error, CustomStringConvertible {
    var description: String { "the parser gave a packet before the stream's format" }
}

/// The pieces behind the renderer, without a device.
@Suite struct RendererPartsTests {
    @Test func pendingMediaTrimsSampleExactlyAndKeepsOrder() {
        var pending = RendererPendingMedia(channelCount: 1, mergeLimitFrames: 100)
        pending.insert(start: 0, samples: (0..<10).map(Float.init))
        pending.insert(start: 10, samples: (10..<20).map(Float.init))  // merged
        pending.insert(start: 30, samples: (30..<40).map(Float.init))  // after a gap
        pending.insert(start: 35, samples: [99, 99])                    // overlap: dropped
        #expect(pending.frameCount == 30)
        pending.trim(from: 33)
        #expect(pending.end == 33)
        var runs: [(Int64, [Float])] = []
        _ = pending.forEachRun(in: 5..<100) { start, samples in runs.append((start, Array(samples))); return samples.count }
        #expect(runs.map(\.0) == [5, 30])
        #expect(runs[0].1 == (5..<20).map(Float.init))
        #expect(runs[1].1 == [30, 31, 32])
        pending.drop(before: 12)
        #expect(pending.start == 12)
        pending.trim(from: 12)
        #expect(pending.isEmpty)
    }

    @Test func mediaMustBeEnqueuedInOrderAndGapsAreAllowed() throws {
        let format = AudioFormat(sampleRate: 48000, channelCount: 2)
        let renderer = SampleBufferRenderer(format: format, route: RoomGroupRoute(rooms: []))
        try renderer.enqueue(PCMBuffer(format: format, samples: [Float](repeating: 0.5, count: 9600), presentationTime: .zero))
        #expect(throws: SampleBufferRendererError.overlapsEnqueuedMedia(presentationTime: MediaTime(value: 1, timescale: 20),
                                                                      enqueuedEnd: MediaTime(value: 1, timescale: 10))) {
            try renderer.enqueue(PCMBuffer(format: format, samples: [Float](repeating: 0.5, count: 9600), presentationTime: MediaTime(value: 1, timescale: 20)))
        }
        try renderer.enqueue(PCMBuffer(format: format, samples: [Float](repeating: 0.5, count: 9600), presentationTime: MediaTime(value: 1, timescale: 5)))
        #expect(renderer.bufferedDuration == MediaTime(value: 3, timescale: 10))
        renderer.flush()
        #expect(renderer.bufferedDuration == .zero)
        try renderer.enqueue(PCMBuffer(format: format, samples: [Float](repeating: 0.5, count: 960), presentationTime: .zero))
    }

    /// One resampler per contiguous run: buffers enqueued in pieces convert exactly as the whole.
    @Test func contiguousBuffersResampleAsOneRun() throws {
        let output = AudioFormat(sampleRate: 48000, channelCount: 2)
        let source = AudioFormat(sampleRate: 44100, channelCount: 1)
        let signal = (0..<44100).map { Float(sin(Double($0) * 0.05)) * 0.5 }
        func converted(pieces: Int) throws -> [Float] {
            let conversion = RendererConversion(output: output, quality: .high)
            var placed: [RendererConversion.Placed] = []
            let size = signal.count / pieces
            for index in 0..<pieces {
                let part = Array(signal[(index * size)..<((index + 1) * size)])
                placed += try conversion.convert(PCMBuffer(format: source, samples: part, presentationTime: MediaTime(frame: Int64(index * size), sampleRate: 44100)))
            }
            if let tail = conversion.endRun() { placed.append(tail) }
            // Placed back to back from frame 0.
            var expectedStart: Int64 = 0
            for piece in placed {
                #expect(piece.startFrame == expectedStart)
                expectedStart += Int64(piece.samples.count / 2)
            }
            return placed.flatMap(\.samples)
        }
        let whole = try converted(pieces: 1)
        let pieces = try converted(pieces: 7)
        #expect(whole.count == 48000 * 2)
        #expect(pieces.count == whole.count)
        #expect(SignalCheck.maxDifference(whole, pieces) < 1e-6)
        // Mono is copied to both channels.
        #expect(stride(from: 0, to: whole.count, by: 2).allSatisfy { whole[$0] == whole[$0 + 1] })
    }

    @Test func timelineMapsDeviceFramesAndContinuesInPlace() {
        var timeline = SynchronizerTimeline(sampleRate: 48000)
        let start = timeline.set(rate: 1, time: MediaTime(value: 10, timescale: 1), atDeviceFrame: 1000)
        #expect(start.isJump && start.mediaFrame == 480_000)
        let before = timeline.media(atDeviceFrame: 999), during = timeline.media(atDeviceFrame: 1480)
        #expect(before.frame == 0 && !before.playing)
        #expect(during.frame == 480_480 && during.playing)
        // A pause at a nanosecond reading within half a frame of the timeline continues it.
        let pause = timeline.set(rate: 0, time: MediaTime(value: 10_010_000_003, timescale: 1_000_000_000), atDeviceFrame: 1480)
        #expect(!pause.isJump && pause.time == MediaTime(value: 480_480, timescale: 48000))
        let resume = timeline.set(rate: 1, time: MediaTime(value: 1001, timescale: 100), atDeviceFrame: 5000)
        #expect(!resume.isJump && resume.mediaFrame == 480_480)
        #expect(timeline.firstDeviceFrame(playing: 480_000..<480_100, notBefore: 0) == 1000)
        #expect(timeline.firstDeviceFrame(playing: 480_470..<480_500, notBefore: 1490) == 5000)
        #expect(timeline.earliestMediaStillToPlay(fromDeviceFrame: 1200) == 480_200)
        // A later change cancels what was scheduled after it.
        _ = timeline.set(rate: 0, time: .zero, atDeviceFrame: 3000)
        #expect(timeline.anchors.count == 4)
        let later = timeline.media(atDeviceFrame: 6000)
        #expect(later.frame == 0 && !later.playing)
    }

    @Test func periodicMultiplesAreExact() {
        let quarter = MediaTime(value: 1, timescale: 4)
        #expect(SynchronizerTimeObservers.multiples(of: quarter, from: .zero, inclusive: true, through: MediaTime(value: 1, timescale: 1))
            == (0...4).map { MediaTime(value: Int64($0), timescale: 4) })
        #expect(SynchronizerTimeObservers.multiples(of: quarter, from: .zero, inclusive: false, through: MediaTime(value: 3, timescale: 10))
            == [quarter])
        #expect(SynchronizerTimeObservers.multiples(of: quarter, from: MediaTime(value: -3, timescale: 10), inclusive: true, through: .zero)
            == [MediaTime(value: -1, timescale: 4), .zero])
    }
}
