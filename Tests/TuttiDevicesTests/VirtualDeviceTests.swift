import Foundation
import Testing
import TuttiCore
@testable import TuttiDevices
import TuttiSimulation
import TuttiTestSupport

struct TimingLine {
    var frame: Int64
    var monoNanoseconds: Int64
    var underrunFrames: Int64?
}

func readTiming(_ path: String) throws -> [TimingLine] {
    let text = try String(contentsOfFile: path, encoding: .utf8)
    return try text.split(separator: "\n").map { line in
        let object = try JSONSerialization.jsonObject(with: Data(line.utf8)) as! [String: Any]
        return TimingLine(frame: (object["frame"] as! NSNumber).int64Value,
                          monoNanoseconds: (object["mono_ns"] as! NSNumber).int64Value,
                          underrunFrames: (object["underrun"] as? Bool) == true ? (object["frames"] as! NSNumber).int64Value : nil)
    }
}

@Suite struct VirtualDeviceTests {
    static let format = AudioFormat(sampleRate: 48000, channelCount: 2)

    /// Sixty seconds of simulated time, run as fast as the CPU allows: the device emits exactly
    /// rate × (1 + ppm) frames per second, every timing line is the exact crystal time of its
    /// frame, and the capture holds exactly the frames the source delivered.
    @Test(arguments: [0.0, 100.0, -73.5])
    func emitsExactFramesPerSecondOverAMinute(driftPPM: Double) throws {
        let directory = try TemporaryDirectory("virtual")
        defer { directory.remove() }
        let clock = FreeRunningClock(startingAt: 5_000_000_000)
        let rateWithDrift = 48000.0 * (1 + driftPPM / 1e6)
        let total = Int64((60 * rateWithDrift).rounded(.up))
        let device = VirtualDevice(clock: clock, capturePath: directory.file("out.wav"), format: Self.format, driftPPM: driftPPM)
        try device.start(source: RampSource(totalFrames: total))
        try waitOnOwnThread("the device to finish") { try device.waitUntilFinished() }
        #expect(device.underrunCount == 0)

        // Frames per second of the pacing clock, measured from the timing file over the minute.
        let lines = try readTiming(directory.file("out.wav.timing.jsonl"))
        #expect(lines.count == Int((total + 479) / 480))
        let start = lines[0].monoNanoseconds
        #expect(start == 5_000_000_000)
        let framesInMinute = lines.last(where: { $0.monoNanoseconds < start + 60_000_000_000 })!
        let period = 1e9 / rateWithDrift
        for (k, line) in lines.enumerated() {
            #expect(line.frame == Int64(k) * 480)
            let ideal = Double(start) + Double(line.frame) * period
            #expect(abs(Double(line.monoNanoseconds) - ideal) <= 1, "frame \(line.frame)")
        }
        // Frames emitted in the first 60 s = frames with emission time < start + 60 s.
        let emittedInMinute = framesInMinute.frame + Int64(((Double(start + 60_000_000_000) - Double(framesInMinute.monoNanoseconds)) / period).rounded(.up))
        #expect(emittedInMinute == Int64((60 * rateWithDrift).rounded(.up)))
        // The device finished when its last frame left the DAC.
        #expect(clock.now() == device.emissionSchedule!.time(ofFrame: total))
        #expect(device.position() == DevicePosition(framesEmitted: total, hostTime: device.emissionSchedule!.time(ofFrame: total)))

        let wav = try WAVFile(path: directory.file("out.wav"))
        #expect(wav.frameCount == Int(total))
        var mismatches = 0
        for frame in 0..<wav.frameCount where wav.samples[2 * frame] != RampSource.ramp(Int64(frame)) || wav.samples[2 * frame + 1] != -RampSource.ramp(Int64(frame)) {
            mismatches += 1
        }
        #expect(mismatches == 0)
    }

    /// The same minute in real time on CLOCK_MONOTONIC: the device really keeps pace, finishing
    /// when the crystal model says its last frame is emitted, and reports positions on the way.
    @Test(.timeLimit(.minutes(3)))
    func keepsRealTimeForAMinute() async throws {
        let directory = try TemporaryDirectory("virtual-rt")
        defer { directory.remove() }
        let clock = MonotonicClock()
        let driftPPM = 100.0
        let total = Int64(60 * 48000 * (1 + driftPPM / 1e6))
        let device = VirtualDevice(clock: clock, capturePath: directory.file("rt.wav"), format: Self.format, driftPPM: driftPPM)
        try device.start(source: RampSource(totalFrames: total))
        let finished = try await onOwnThread {
            try waitOnOwnThread("the device to finish") { try device.waitUntilFinished() }
            return clock.now()
        }
        let schedule = try #require(device.emissionSchedule)
        let lastEmission = schedule.time(ofFrame: total)
        // Finishes after its last frame's emission time, not before, and not much after.
        #expect(finished >= lastEmission)
        #expect(finished - lastEmission < 200_000_000)
        // Frames per second of monotonic time, from the device's own position report.
        let position = device.position()
        #expect(position.framesEmitted == total)
        let measuredRate = Double(position.framesEmitted) / (Double(position.hostTime - schedule.start) / 1e9)
        #expect(abs(measuredRate / (48000 * (1 + driftPPM / 1e6)) - 1) < 1e-8)
        #expect(device.underrunCount == 0)
        let lines = try readTiming(directory.file("rt.wav.timing.jsonl"))
        #expect(lines.count == Int((total + 479) / 480))
        #expect(lines.allSatisfy { $0.monoNanoseconds == schedule.time(ofFrame: $0.frame) })
        #expect(try WAVFile(path: directory.file("rt.wav")).frameCount == Int(total))
    }

    /// A pipeline that delivers nothing for five periods: each is played as silence, counted,
    /// and written as an underrun line; the stream continues afterwards.
    @Test func underrunsPlaySilenceAndAreLogged() throws {
        let directory = try TemporaryDirectory("underrun")
        defer { directory.remove() }
        let stall: Range<Int64> = 4800..<(4800 + 5 * 480)
        let source = RampSource(totalFrames: 24000, stall: stall)
        let device = VirtualDevice(clock: FreeRunningClock(), capturePath: directory.file("u.wav"), format: Self.format)
        try device.start(source: source)
        try waitOnOwnThread("the device to finish") { try device.waitUntilFinished() }
        #expect(device.underrunCount == 5)
        let lines = try readTiming(directory.file("u.wav.timing.jsonl"))
        let underruns = lines.filter { $0.underrunFrames != nil }
        #expect(underruns.map(\.frame) == stride(from: Int64(4800), to: 4800 + 5 * 480, by: 480).map { $0 })
        #expect(underruns.allSatisfy { $0.underrunFrames == 480 })
        let wav = try WAVFile(path: directory.file("u.wav"))
        #expect(wav.frameCount == 24000 + 5 * 480)
        #expect(wav.samples[(2 * 4800)..<(2 * (4800 + 2400))].allSatisfy { $0 == 0 })
        // After the gap the source resumes where it stopped: frame 4800 of the ramp.
        #expect(wav.samples[2 * (4800 + 2400) + 2] == RampSource.ramp(4801))
    }

    @Test func nullDeviceIsPacedAndWritesNothing() throws {
        let clock = FreeRunningClock()
        let device = VirtualDevice(clock: clock, capturePath: nil, format: Self.format, driftPPM: -20)
        try device.start(source: RampSource(totalFrames: 48000 * 10))
        try waitOnOwnThread("the device to finish") { try device.waitUntilFinished() }
        #expect(device.name == "null")
        #expect(clock.now() == EmissionSchedule(sampleRate: 48000, driftPPM: -20, start: 0).time(ofFrame: 480_000))
    }

    @Test func positionIsReportedInTheGivenClock() throws {
        let clock = FreeRunningClock(startingAt: 1_000_000_000)
        let speakerClock = SkewedClock(base: clock, offsetNanoseconds: 777_000_000, driftPPM: 50, anchor: 0)
        let device = VirtualDevice(clock: clock, capturePath: nil, format: Self.format, reportingClock: speakerClock)
        try device.start(source: RampSource(totalFrames: 48000))
        try waitOnOwnThread("the device to finish") { try device.waitUntilFinished() }
        let position = device.position()
        #expect(position.framesEmitted == 48000)
        #expect(position.hostTime == speakerClock.reading(atBase: 2_000_000_000))
    }

    @Test func emissionScheduleInvertsExactly() {
        let schedule = EmissionSchedule(sampleRate: 44100, driftPPM: 37.25, start: 123)
        for frame: Int64 in [0, 1, 441, 44_100 * 3600, 44_100 * 86_400 * 7] {
            let time = schedule.time(ofFrame: frame)
            #expect(schedule.framesEmitted(by: time + 1) == frame || schedule.framesEmitted(by: time) == frame)
        }
    }
}
