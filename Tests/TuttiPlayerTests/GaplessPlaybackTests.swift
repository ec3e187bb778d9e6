import Foundation
import Testing
import TuttiCore
import TuttiDevices
import TuttiMedia
import TuttiEngine
@testable import TuttiPlayer
import TuttiTestSupport

/// Renders a queue to a WAV file through the real player and device; returns the file and outcomes.
func renderQueue(_ paths: [String], to output: String, sampleRate: Int = 48000, start: MediaTime = .zero) throws -> (WAVFile, [ItemOutcome]) {
    var configuration = QueuePlayer.Configuration()
    configuration.startTime = start
    let format = AudioFormat(sampleRate: sampleRate, channelCount: 2)
    let player = QueuePlayer(items: paths.map(PlayerItem.init(path:)), outputFormat: format, configuration: configuration)
    let device = WAVFileDevice(clock: MonotonicClock(), path: output, format: format)
    try player.play(on: device)
    let outcomes = try waitOnOwnThread("the player to finish") { try player.waitUntilFinished() }
    return (try WAVFile(path: output), outcomes)
}

@Suite struct GaplessPlaybackTests {
    /// Frame counts of the four cuts of the 44.1 kHz recording: deliberately not multiples of
    /// any codec's frame size.
    static let cuts = [181_837, 242_551, 166_579, 150_000]

    /// One continuous recording cut into 4 tracks, each encoded on its own, played as a queue,
    /// must come out as that one recording: the right length, aligned at every join, no click.
    ///
    /// The AAC tracks carry iTunes gapless info (iTunSMPB: priming, padding, original length), as
    /// Apple's encoders write it; `ffmpegAACWithRoundedEditListsIsGapless` covers FFmpeg's own.
    @Test(arguments: [
        ("mp3", ["-c:a", "libmp3lame", "-b:a", "256k"]),
        ("m4a", ["-c:a", "aac", "-b:a", "256k", "-movflags", "use_metadata_tags"]),
        ("opus", ["-c:a", "libopus", "-b:a", "192k"]),
    ])
    func tracksCutFromOneRecordingPlayAsOne(format: (String, [String])) throws {
        try checkCutRecording(extension: format.0, codec: format.1, tolerancePerJoin: 1)
    }

    /// Plain FFmpeg-made .m4a files: their edit lists are rounded to the 1 ms movie timescale,
    /// so Tutti reads the exact priming and length from the file's own boxes.
    @Test func ffmpegAACWithRoundedEditListsIsGapless() throws {
        try checkCutRecording(extension: "m4a", codec: ["-c:a", "aac", "-b:a", "256k"], tolerancePerJoin: 1, iTunesGaplessInfo: false)
    }

    private func checkCutRecording(extension fileExtension: String, codec: [String], tolerancePerJoin: Int, iTunesGaplessInfo: Bool = true) throws {
        let format = (fileExtension, codec)
        let directory = try TemporaryDirectory("gapless-\(format.0)")
        defer { directory.remove() }
        let total = Self.cuts.reduce(0, +)
        let source = directory.file("continuous.wav")
        try TestMedia.generateTone(source, seconds: Double(total) / 44100, sampleRate: 44100, codecArguments: ["-c:a", "pcm_f32le"])
        var tracks: [String] = []
        var start = 0
        for (index, length) in Self.cuts.enumerated() {
            let path = directory.file("track\(index).\(format.0)")
            var metadata: [String] = []
            if format.0 == "m4a" && iTunesGaplessInfo {
                let hexLength = String(length, radix: 16, uppercase: true)
                metadata = ["-metadata", "iTunSMPB= 00000000 00000400 00000000 " + String(repeating: "0", count: 16 - hexLength.count) + hexLength]
            }
            try TestMedia.ffmpeg(["-i", source, "-af", "atrim=start_sample=\(start):end_sample=\(start + length),asetpts=PTS-STARTPTS"] + format.1 + metadata + [path])
            tracks.append(path)
            start += length
        }
        let (output, outcomes) = try renderQueue(tracks, to: directory.file("queue.wav"))
        #expect(outcomes.allSatisfy { $0.error == nil }, "\(outcomes.compactMap(\.error))")

        // The reference: the continuous recording resampled once to 48 kHz.
        let reference = try TestMedia.decodeWithFFmpeg(source, filters: "aresample=48000:resampler=soxr:precision=20")
        let referenceFrames = reference.count / 2
        #expect(abs(output.frameCount - referenceFrames) <= Self.cuts.count * tolerancePerJoin, "length \(output.frameCount) vs \(referenceFrames)")

        // At every join the output lines up with the recording (no added or missing samples)
        // and is as close to it as anywhere else in the track (no click, no gap).
        let bodyError = SignalCheck.rmsDifference(output.samples, reference, channels: 2, frames: 48000..<96000)
        let bodyLevel = SignalCheck.rms(reference, channels: 2, frames: 48000..<96000)
        var joinFrame = 0
        for length in Self.cuts.dropLast() {
            joinFrame += length * 48000 / 44100
            let lag = SignalCheck.bestLag(output.samples, reference, channels: 2, around: joinFrame)
            #expect(abs(lag) <= tolerancePerJoin * (1 + Self.cuts.firstIndex(of: length)!), "join at \(joinFrame): misaligned by \(lag) frames")
            let joinError = SignalCheck.rmsDifference(output.samples, reference, channels: 2, frames: (joinFrame - 480)..<(joinFrame + 480))
            // With inexact edit lists the later tracks are shifted, so only lengths and lags count.
            if tolerancePerJoin <= 1 { #expect(joinError < max(4 * bodyError, 0.01), "join at \(joinFrame): error \(joinError) vs \(bodyError) in the body") }
            let joinLevel = SignalCheck.rms(output.samples, channels: 2, frames: (joinFrame - 480)..<(joinFrame + 480))
            #expect(joinLevel > 0.9 * bodyLevel, "join at \(joinFrame): level dropped to \(joinLevel) (a gap)")
        }
    }

    /// Mixed codecs and rates in one queue: each item is converted and the queue is the sum of
    /// the items, to a frame per join.
    @Test func mixedFormatsAndRatesQueueToTheOutputFormat() throws {
        let directory = try TemporaryDirectory("mixed")
        defer { directory.remove() }
        let specs: [(String, Int, Int, [String])] = [
            ("a.flac", 44100, 2, []),
            ("b.wav", 96000, 1, ["-c:a", "pcm_s24le"]),
            ("c.ogg", 48000, 2, ["-c:a", "libvorbis"]),
            ("d.m4a", 88200, 2, ["-c:a", "alac"]),
            ("e.mp3", 44100, 1, ["-c:a", "libmp3lame"]),
        ]
        var expected = 0
        var paths: [String] = []
        for (name, rate, channels, codec) in specs {
            let path = directory.file(name)
            try TestMedia.generateTone(path, seconds: 1.2345, sampleRate: rate, channels: channels, codecArguments: codec)
            expected += Int((1.2345 * 48000).rounded())
            paths.append(path)
        }
        let (output, outcomes) = try renderQueue(paths, to: directory.file("mixed.wav"))
        #expect(outcomes.count == specs.count && outcomes.allSatisfy { $0.error == nil })
        #expect(abs(output.frameCount - expected) <= specs.count)
        // Each item starts where the previous one ended on the output timeline.
        for (previous, next) in zip(outcomes, outcomes.dropFirst()) {
            #expect(abs(next.startFrame - (previous.startFrame + previous.frameCount)) <= 1)
        }
    }

    @Test func startOffsetIsSampleExact() throws {
        let directory = try TemporaryDirectory("start")
        defer { directory.remove() }
        let path = directory.file("s.flac")
        try TestMedia.generateTone(path, seconds: 3, sampleRate: 48000)
        let (output, _) = try renderQueue([path], to: directory.file("o.wav"), start: MediaTime(value: 3, timescale: 2))
        let reference = try TestMedia.decodeWithFFmpeg(path)
        #expect(output.frameCount == 72000)
        #expect(SignalCheck.maxDifference(output.samples, Array(reference[(72000 * 2)...])) < 1e-6)
    }

    /// Broken items are reported with a one-line reason naming them; the rest of the queue plays.
    @Test func brokenItemsAreSkippedAndReported() throws {
        let directory = try TemporaryDirectory("broken")
        defer { directory.remove() }
        let good1 = directory.file("good1.flac"), good2 = directory.file("good2.wav")
        try TestMedia.generateTone(good1, seconds: 1, sampleRate: 48000)
        try TestMedia.generateTone(good2, seconds: 1, sampleRate: 48000)
        let text = directory.file("notes.txt")
        try "not audio at all".write(toFile: text, atomically: true, encoding: .utf8)
        let truncated = directory.file("cut.flac")
        try TestMedia.generateTone(truncated, seconds: 4, sampleRate: 48000)
        let bytes = try Data(contentsOf: URL(fileURLWithPath: truncated))
        try bytes.prefix(bytes.count / 2).write(to: URL(fileURLWithPath: truncated))
        let missing = directory.file("missing.mp3")

        let (output, outcomes) = try renderQueue([good1, missing, text, truncated, good2], to: directory.file("o.wav"))
        #expect(outcomes.map(\.index) == [0, 1, 2, 3, 4])
        #expect(outcomes[0].error == nil && outcomes[4].error == nil)
        let errors = outcomes.compactMap(\.error)
        #expect(errors.count == 3)
        #expect(errors.allSatisfy { !$0.description.contains("\n") })
        #expect(outcomes[1].error?.description == "\(missing): no such file")
        #expect(outcomes[2].error?.kind == .notAudio && outcomes[2].error!.description.hasPrefix(text + ": "))
        #expect(outcomes[3].error?.kind == .truncated || outcomes[3].error?.kind == .corrupt)
        #expect(outcomes[3].error!.description.hasPrefix(truncated + ": "))
        // Both good files played in full, plus what could be decoded of the truncated one.
        let reference2 = try TestMedia.decodeWithFFmpeg(good2)
        #expect(output.frameCount >= 96000 + 48000)
        #expect(SignalCheck.maxDifference(Array(output.samples.suffix(96000)), reference2) < 1e-6)
    }
}

/// The looper: a template item played N times, joined seamlessly.
@Suite struct LooperTests {
    /// 20 iterations of a 1.3 s item: exactly 20 times the item, sample for sample.
    @Test func twentyIterationsAreExactlyTwentyItems() throws {
        let directory = try TemporaryDirectory("looper")
        defer { directory.remove() }
        let item = directory.file("item.flac")
        try TestMedia.generateTone(item, seconds: 1.3, sampleRate: 48000)
        var configuration = QueuePlayer.Configuration()
        configuration.passes = 20
        let format = AudioFormat(sampleRate: 48000, channelCount: 2)
        let player = QueuePlayer(items: [PlayerItem(path: item)], outputFormat: format, configuration: configuration)
        let device = WAVFileDevice(clock: MonotonicClock(), path: directory.file("loop.wav"), format: format)
        try player.play(on: device)
        let outcomes = try waitOnOwnThread("the player to finish") { try player.waitUntilFinished() }
        #expect(outcomes.count == 20 && outcomes.map(\.pass) == Array(0..<20))
        #expect(outcomes.allSatisfy { $0.error == nil && $0.frameCount == 62_400 })
        let output = try WAVFile(path: directory.file("loop.wav"))
        let once = try TestMedia.decodeWithFFmpeg(item)
        #expect(output.frameCount == 20 * 62_400)
        #expect(output.samples == Array((0..<20).map { _ in once }.joined()))
    }

    /// At another rate the seams stay continuous through the resampler: the loop equals the
    /// concatenation resampled once.
    @Test func resampledLoopsAreContinuous() throws {
        let directory = try TemporaryDirectory("looper-rate")
        defer { directory.remove() }
        let item = directory.file("item.wav")
        try TestMedia.generateTone(item, seconds: 1.3, sampleRate: 44100)
        var configuration = QueuePlayer.Configuration()
        configuration.passes = 5
        let format = AudioFormat(sampleRate: 48000, channelCount: 2)
        let player = QueuePlayer(items: [PlayerItem(path: item)], outputFormat: format, configuration: configuration)
        try player.play(on: WAVFileDevice(clock: MonotonicClock(), path: directory.file("loop.wav"), format: format))
        _ = try waitOnOwnThread("the player to finish") { try player.waitUntilFinished() }
        let output = try WAVFile(path: directory.file("loop.wav"))
        #expect(abs(output.frameCount - 5 * 62_400) <= 1)
        let joined = directory.file("joined.wav")
        try TestMedia.ffmpeg(["-stream_loop", "4", "-i", item, "-c:a", "pcm_f32le", joined])
        let reference = try TestMedia.decodeWithFFmpeg(joined, filters: "aresample=48000:resampler=soxr:precision=20")
        let body = 48_000..<(4 * 62_400)
        #expect(SignalCheck.rmsDifference(output.samples, reference, channels: 2, frames: body) < 1e-4)
    }

    @Test func aQueueThatNeverPlaysDoesNotLoopForever() throws {
        let directory = try TemporaryDirectory("looper-bad")
        defer { directory.remove() }
        var configuration = QueuePlayer.Configuration()
        configuration.passes = nil
        let format = AudioFormat(sampleRate: 48000, channelCount: 2)
        let player = QueuePlayer(items: [PlayerItem(path: directory.file("missing.flac"))], outputFormat: format, configuration: configuration)
        try player.play(on: WAVFileDevice(clock: MonotonicClock(), path: directory.file("out.wav"), format: format))
        let outcomes = try waitOnOwnThread("the player to finish") { try player.waitUntilFinished() }
        #expect(outcomes.count == 1 && outcomes[0].error?.kind == .notFound)
    }
}
