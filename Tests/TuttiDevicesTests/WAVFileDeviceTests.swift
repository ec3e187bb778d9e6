import Testing
import TuttiCore
@testable import TuttiDevices
import TuttiTestSupport

@Suite struct WAVFileDeviceTests {
    @Test(arguments: [SampleFormat.float32, .int16, .int24])
    func writesExactlyTheStreamInEachFormat(sampleFormat: SampleFormat) throws {
        let directory = try TemporaryDirectory("wavdev")
        defer { directory.remove() }
        let path = directory.file("o.wav")
        let device = WAVFileDevice(clock: MonotonicClock(), path: path, format: AudioFormat(sampleRate: 44100, channelCount: 2, sampleFormat: sampleFormat), periodFrames: 1000)
        try device.start(source: RampSource(totalFrames: 12345))
        try waitOnOwnThread("the device to finish") { try device.waitUntilFinished() }
        let wav = try WAVFile(path: path)
        #expect(wav.sampleRate == 44100 && wav.channelCount == 2 && wav.sampleFormat.rawValue == sampleFormat.rawValue)
        #expect(wav.frameCount == 12345)
        // The ramp is a multiple of 2^-13, exact in every format.
        var mismatches = 0
        for frame in 0..<wav.frameCount where wav.samples[2 * frame] != RampSource.ramp(Int64(frame)) || wav.samples[2 * frame + 1] != -RampSource.ramp(Int64(frame)) {
            mismatches += 1
        }
        #expect(mismatches == 0)
        // ffmpeg reads what we wrote.
        let decoded = try TestMedia.decodeWithFFmpeg(path)
        #expect(decoded.count == 12345 * 2)
    }

    @Test func integerConversionRoundsAndClips() {
        let input: [Float] = [0, 1, -1, 1.5, -1.5, 0.5 / 32768, -0.25]
        var out = [Int16](repeating: 0, count: input.count)
        out.withUnsafeMutableBytes { SampleConversion.convert(input, count: input.count, to: .int16, into: $0.baseAddress!) }
        #expect(out == [0, 32767, -32768, 32767, -32768, 1, -8192])
    }

    @Test func specsParseAndRejectNonsense() throws {
        #expect(try DeviceSpec(parsing: "alsa") == .alsa("default"))
        #expect(try DeviceSpec(parsing: "alsa:hw:1,0") == .alsa("hw:1,0"))
        #expect(try DeviceSpec(parsing: "wav:/tmp/x.wav") == .wav("/tmp/x.wav"))
        #expect(try DeviceSpec(parsing: "virtual:out.wav") == .virtual("out.wav"))
        #expect(try DeviceSpec(parsing: "null") == .null)
        #expect(throws: DeviceError.self) { try DeviceSpec(parsing: "speaker:kitchen") }
        #expect(throws: DeviceError.self) { try DeviceSpec(parsing: "wav:") }
    }

    @Test func missingALSADeviceGivesOneLineError() {
        do {
            _ = try ALSADevice(clock: MonotonicClock(), pcmName: "hw:42", format: AudioFormat(sampleRate: 48000, channelCount: 2))
            Issue.record("opening hw:42 should fail on this machine")
        } catch {
            #expect(error.description.hasPrefix("alsa:hw:42: cannot open"))
            #expect(!error.description.contains("\n"))
        }
    }
}
