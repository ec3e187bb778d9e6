import Foundation
import NIOCore
import NIOPosix
import Synchronization
import Testing
import TuttiCore
@_spi(Testing) import TuttiHouseAirPlay
import TuttiProtocol
@testable import TuttiAirPlayRooms

/// An AirPlay room's sender (`RAOPSenderSession`) against the house's own AirPlay receiver, on
/// real sockets: what one sends, the other must take, bit for bit and at the time it says.
@Suite struct RAOPSenderSessionTests {
    final class Sink: AirPlaySink {
        struct State {
            var began: AirPlayStreamInfo?
            var samples: [Int16] = []
            var timestamps: [UInt32] = []
            var schedules: [(rtpTime: UInt32, hostTime: Int64)] = []
            var volumes: [Double] = []
            var ended: String?
        }
        let state = Mutex(State())
        func airPlayBegan(_ stream: AirPlayStreamInfo) { state.withLock { $0.began = stream } }
        func airPlayAudio(_ samples: [Int16], frameCount: Int, rtpTimestamp: UInt32) {
            state.withLock { $0.samples += samples; $0.timestamps.append(rtpTimestamp) }
        }
        func airPlaySchedule(rtpTime: UInt32, hostTime: Int64, errorNanoseconds: Double) { state.withLock { $0.schedules.append((rtpTime, hostTime)) } }
        func airPlayVolume(_ decibels: Double) { state.withLock { $0.volumes.append(decibels) } }
        func airPlayMetadata(_ metadata: AirPlayMetadata) {}
        func airPlayFlushed() {}
        func airPlayEnded(_ reason: String) { state.withLock { $0.ended = reason } }
    }

    /// Waits (guarded by `timeout`) until `condition` holds of the sink's state.
    func wait(_ sink: Sink, timeout: Double = 10, _ what: String, until condition: (Sink.State) -> Bool) async throws {
        let deadline = Date().addingTimeInterval(timeout)
        while Date() < deadline {
            if sink.state.withLock({ condition($0) }) { return }
            try await Task.sleep(nanoseconds: 10_000_000)
        }
        Issue.record("timed out waiting for \(what)")
        throw CancellationError()
    }

    /// 200 packets of a ramp, every 50th dropped on arrival (so the receiver asks for them and
    /// the session resends them): every sample arrives, in order; the packets' RTP times are 352
    /// apart from the session's first; the sync says frame F is heard at T on the sender's
    /// clock, and the receiver, through its fit of that clock from our timing replies, schedules
    /// F within 1 ms of T on its own (the same machine's); the volume is 0 dB; TEARDOWN ends it.
    @Test func aReceiverTakesTheStreamBitExactWithResendsAndTheSchedule() async throws {
        let clock = MonotonicClock()
        let sink = Sink()
        var configuration = AirPlayReceiver.Configuration(host: "127.0.0.1", port: 0, clock: clock)
        configuration.dropsEveryNthAudioPacket = 50
        let receiver = AirPlayReceiver(configuration: configuration, sink: sink) { _ in }
        let port = try await receiver.start()
        let loop = MultiThreadedEventLoopGroup.singleton.next()
        let session = try await loop.submit {
            NIOLoopBound(RAOPSenderSession(configuration: .init(host: "127.0.0.1", port: port), eventLoop: loop, clock: clock) { _ in }, eventLoop: loop)
        }.get()
        try await loop.flatSubmit { session.value.start() }.get()
        let packets = 200, frames = 352
        let ramp = (0..<(packets * frames * 2)).map { Int16(truncatingIfNeeded: $0 &* 7) }
        // Syncs until the receiver has fitted our clock (it ignores them before), then the audio.
        let origin = clock.now() + 2_000_000_000
        var sent = 0
        while sink.state.withLock({ $0.schedules.isEmpty }) && sent < 400 {
            _ = try await loop.submit { session.value.sendSync(frame: 0, heardAt: origin, latencyFrames: 22050) }.get()
            sent += 1
            try await Task.sleep(nanoseconds: 20_000_000)
        }
        for packet in 0..<packets {
            try await loop.submit {
                ramp.withUnsafeBufferPointer { all in
                    session.value.sendAudio(UnsafeBufferPointer(rebasing: all[(packet * frames * 2)..<((packet + 1) * frames * 2)]), frames: frames, frame: Int64(packet * frames))
                }
            }.get()
        }
        // A few packets more, of silence: a receiver sees a packet lost only when a later one
        // comes, and the ramp's last may be one of those dropped (its number is random: one run
        // in fifty, and CI met it).
        let silence = [Int16](repeating: 0, count: frames * 2)
        for extra in 0..<4 {
            try await loop.submit {
                silence.withUnsafeBufferPointer { session.value.sendAudio($0, frames: frames, frame: Int64((packets + extra) * frames)) }
            }.get()
        }
        try await wait(sink, "all samples") { $0.samples.count >= ramp.count + silence.count * 4 }
        try await wait(sink, "the volume") { !$0.volumes.isEmpty }
        let (resent, first) = try await loop.submit { (session.value.resendsAnswered, session.value.firstTimestamp) }.get()
        try await loop.submit { session.value.stop() }.get()
        try await wait(sink, "the end") { $0.ended != nil }
        await receiver.stop()
        let state = sink.state.withLock { $0 }
        #expect(state.began?.announcement.encoding == .appleLossless)
        #expect(state.samples.count == ramp.count + silence.count * 4 && Array(state.samples.prefix(ramp.count)) == ramp, "the samples differ from what was sent")
        #expect(resent >= packets / 50 - 1, "resends answered: \(resent)")
        #expect(state.timestamps.first == first && zip(state.timestamps, state.timestamps.dropFirst()).allSatisfy { $1 &- $0 == 352 })
        let schedule = try #require(state.schedules.first)
        #expect(schedule.rtpTime == first)
        // Within 5 ms: the fit of a few exchanges on a loaded machine (this suite runs beside forty
        // others); a sync read 0.25 s off (iTunes' flags) or a frame off would be far outside.
        #expect(abs(schedule.hostTime - origin) < 5_000_000, "frame 0 scheduled \(Double(schedule.hostTime - origin) / 1e6) ms from where the sync put it")
        #expect(state.volumes.allSatisfy { $0 == 0 })
    }

    /// An AirPlay room's device time: frame n is heard exactly n / 44 100 s after frame 0, in
    /// integer nanoseconds rounded down, and the frame heard at a time is its inverse, for
    /// years of frames without overflow.
    @Test func aRoomsFramesAndTimesAreExact() {
        #expect(AirPlayRoom.nanoseconds(ofFrame: 44100) == 1_000_000_000)
        #expect(AirPlayRoom.nanoseconds(ofFrame: 1) == 22675)
        #expect(AirPlayRoom.nanoseconds(ofFrame: 352) == 7_981_859)
        var random = SplitMix64(seed: 9)
        for _ in 0..<10_000 {
            let frame = Int64(random.next() % (44100 * 86_400 * 365 * 5))
            // Frame n is heard from just after its rounded-down time until just before n + 1's.
            #expect(AirPlayRoom.frame(atNanoseconds: AirPlayRoom.nanoseconds(ofFrame: frame) + 1) == frame)
            #expect(AirPlayRoom.frame(atNanoseconds: AirPlayRoom.nanoseconds(ofFrame: frame + 1) - 1) == frame)
        }
    }

    /// A receiver that is not there, or that refuses: `start` fails with the reason, and nothing
    /// is left open.
    @Test func aReceiverThatIsNotThereOrRefusesFailsTheStart() async throws {
        let loop = MultiThreadedEventLoopGroup.singleton.next()
        let clock = MonotonicClock()
        // A port nobody listens on.
        let closed = try await ServerBootstrap(group: loop).bind(host: "127.0.0.1", port: 0).get()
        let port = closed.localAddress!.port!
        try await closed.close()
        let session = try await loop.submit {
            NIOLoopBound(RAOPSenderSession(configuration: .init(host: "127.0.0.1", port: port), eventLoop: loop, clock: clock) { _ in }, eventLoop: loop)
        }.get()
        await #expect(throws: (any Error).self) { try await loop.flatSubmit { session.value.start() }.get() }
        #expect(try await loop.submit { if case .ended = session.value.state { true } else { false } }.get())
        // A receiver switched off is tried again and again: no attempt leaves a socket open.
        func openFiles() -> Int { (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd").count) ?? 0 }
        let before = openFiles()
        for _ in 0..<20 {
            let again = try await loop.submit {
                NIOLoopBound(RAOPSenderSession(configuration: .init(host: "127.0.0.1", port: port), eventLoop: loop, clock: clock) { _ in }, eventLoop: loop)
            }.get()
            _ = try? await loop.flatSubmit { again.value.start() }.get()
        }
        // (Other suites run beside this one: a little slack, far under 40 leaked.)
        #expect(openFiles() - before < 8, "\(openFiles() - before) files more open after 20 failed attempts")

        // A receiver busy with another sender answers 453 to the ANNOUNCE.
        let sink = Sink()
        let receiver = AirPlayReceiver(configuration: .init(host: "127.0.0.1", port: 0, clock: clock), sink: sink) { _ in }
        let receiverPort = try await receiver.start()
        let firstSession = try await loop.submit {
            NIOLoopBound(RAOPSenderSession(configuration: .init(host: "127.0.0.1", port: receiverPort), eventLoop: loop, clock: clock) { _ in }, eventLoop: loop)
        }.get()
        try await loop.flatSubmit { firstSession.value.start() }.get()
        let second = try await loop.submit {
            NIOLoopBound(RAOPSenderSession(configuration: .init(host: "127.0.0.1", port: receiverPort), eventLoop: loop, clock: clock) { _ in }, eventLoop: loop)
        }.get()
        do {
            try await loop.flatSubmit { second.value.start() }.get()
            Issue.record("a second sender was taken")
        } catch {
            #expect("\(error)".contains("453"), "\(error)")
        }
        try await loop.submit { firstSession.value.stop() }.get()
        await receiver.stop()
    }
}
