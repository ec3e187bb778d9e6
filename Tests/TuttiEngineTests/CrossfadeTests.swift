import Foundation
#if canImport(Glibc)
import Glibc
#endif
import Synchronization
import Testing
import TuttiCore
import TuttiEngine
import TuttiMedia
import TuttiTestSupport

/// Crossfade in the engine, sample by sample: the reader's equal-power overlap, the album
/// rule, and queue edits, seeks and setting changes during a fade through the producer
/// (stepped, so that what is decoded when an edit comes is exact). Every expected stream is
/// computed from the files as ffmpeg wrote them, decoded on their own.
@Suite struct CrossfadeTests {
    static let rate = 48_000
    static let fade = 4 * rate

    /// A 16-bit FLAC tone at 48 kHz (no resampling, so every comparison is exact).
    static func tone(_ path: String, frequency: Int, seconds: Double, album: String? = nil, track: String? = nil) throws -> String {
        var metadata: [String] = []
        if let album { metadata += ["-metadata", "album=\(album)"] }
        if let track { metadata += ["-metadata", "track=\(track)"] }
        try TestMedia.ffmpeg(["-f", "lavfi", "-i", "sine=frequency=\(frequency):sample_rate=\(rate):duration=\(seconds)",
                              "-ac", "2", "-c:a", "flac"] + metadata + [path])
        return path
    }

    /// The file's samples, interleaved stereo, as Tutti's decoder gives them.
    static func samples(_ path: String, gain: Float = 1) throws -> [Float] {
        let decoder = try AudioFileDecoder(path: path, outputChannelCount: 2)
        var all: [Float] = []
        var block: [Float] = []
        while try decoder.read(into: &block) > 0 { all += block }
        return gain == 1 ? all : all.map { $0 * gain }
    }

    /// Everything a reader gives, with its item reports.
    static func readAll(_ reader: GaplessQueueReader) -> (samples: [Float], outcomes: [ItemOutcome]) {
        let outcomes = Mutex<[ItemOutcome]>([])
        reader.onItem = { outcome in outcomes.withLock { $0.append(outcome) } }
        var all: [Float] = []
        var block: [Float] = []
        while reader.read(into: &block) > 0 { all += block }
        return (all, outcomes.withLock { $0.filter { $0.frameCount > 0 } })
    }

    /// `outgoing` from frame `start` on fading out over `length` frames while `incoming`
    /// fades in: the equal-power crossfade written out, frame by frame.
    static func crossfaded(_ outgoing: [Float], into incoming: [Float], length: Int) -> [Float] {
        let start = outgoing.count / 2 - length
        var result = Array(outgoing[..<(start * 2)])
        for frame in 0..<length {
            let angle = (Double(frame) + 0.5) / Double(length) * Double.pi / 2
            let (out, fadeIn) = (Float(cos(angle)), Float(sin(angle)))
            for channel in 0..<2 {
                result.append(outgoing[(start + frame) * 2 + channel] * out + incoming[frame * 2 + channel] * fadeIn)
            }
        }
        return result + incoming[(length * 2)...]
    }

    static func largestDifference(_ a: [Float], _ b: [Float]) -> Float {
        guard a.count == b.count else { return .infinity }
        return zip(a, b).reduce(0) { max($0, abs($1.0 - $1.1)) }
    }

    @Test func consecutiveItemsOverlapOnTheEqualPowerCurve() throws {
        let directory = try TemporaryDirectory("crossfade-curve")
        defer { directory.remove() }
        let a = try Self.tone(directory.file("a.flac"), frequency: 440, seconds: 10)
        let b = try Self.tone(directory.file("b.flac"), frequency: 660, seconds: 9)
        let reader = GaplessQueueReader(paths: [a, b], outputRate: Self.rate, channelCount: 2, crossfade: MediaTime(frame: 4, sampleRate: 1))
        #expect(reader.crossfadeFrames == Self.fade)
        let (output, outcomes) = Self.readAll(reader)
        let expected = Self.crossfaded(try Self.samples(a), into: try Self.samples(b), length: Self.fade)
        #expect(output.count == expected.count)
        #expect(Self.largestDifference(output, expected) < 1e-6)
        // The second item starts where the fade does: its span overlaps the first's last 4 s.
        #expect(outcomes.map(\.startFrame) == [0, 6 * Int64(Self.rate)])
        #expect(outcomes.map(\.frameCount) == [10 * Int64(Self.rate), 9 * Int64(Self.rate)])
        // The curve is equal power: out² + in² = 1 at every frame, and symmetric.
        for frame in [0, 1, Self.fade / 3, Self.fade / 2, Self.fade - 1] {
            let gains = Crossfade.gains(atFrame: frame, of: Self.fade)
            #expect(abs(gains.fadingOut * gains.fadingOut + gains.fadingIn * gains.fadingIn - 1) < 1e-6)
            let mirrored = Crossfade.gains(atFrame: Self.fade - 1 - frame, of: Self.fade)
            #expect(abs(gains.fadingOut - mirrored.fadingIn) < 1e-6)
        }
    }

    @Test func anAlbumsNextTrackStaysGaplessAndOtherAlbumsFade() throws {
        let directory = try TemporaryDirectory("crossfade-album")
        defer { directory.remove() }
        let one = try Self.tone(directory.file("1.flac"), frequency: 440, seconds: 5, album: "Live", track: "1/9")
        let two = try Self.tone(directory.file("2.flac"), frequency: 660, seconds: 5, album: "Live", track: "2/9")
        let four = try Self.tone(directory.file("4.flac"), frequency: 550, seconds: 9, album: "Live", track: "4")
        let other = try Self.tone(directory.file("x.flac"), frequency: 330, seconds: 9, album: "Studio", track: "5")
        let reader = GaplessQueueReader(paths: [one, two, four, other], outputRate: Self.rate, channelCount: 2,
                                        crossfade: MediaTime(frame: 4, sampleRate: 1))
        let (output, outcomes) = Self.readAll(reader)
        // 1 → 2: the album in order, joined gapless; 2 → 4 skips a track; 4 → another album.
        var expected = try Self.samples(one) + Self.samples(two)
        expected = Self.crossfaded(expected, into: try Self.samples(four), length: Self.fade)
        expected = Self.crossfaded(expected, into: try Self.samples(other), length: Self.fade)
        #expect(Self.largestDifference(output, expected) < 1e-6)
        let second = Int64(Self.rate)
        #expect(outcomes.map(\.startFrame) == [0, 5 * second, 6 * second, 11 * second])

        #expect(AlbumPosition(track: " 07/12", disc: "2/2") == AlbumPosition(disc: 2, track: 7))
        #expect(AlbumPosition(track: "side A", disc: nil) == nil)
        #expect(AlbumPosition(disc: 2, track: 1).follows(AlbumPosition(disc: 1, track: 14)))
        #expect(!AlbumPosition(disc: 1, track: 3).follows(AlbumPosition(disc: 1, track: 3)))
    }

    @Test func shortItemsFadeOverHalfTheirLengthAndNeverReachBackPastTheirStart() throws {
        let directory = try TemporaryDirectory("crossfade-short")
        defer { directory.remove() }
        let a = try Self.tone(directory.file("a.flac"), frequency: 440, seconds: 6)
        let first = try Self.tone(directory.file("s1.flac"), frequency: 880, seconds: 1)
        let second = try Self.tone(directory.file("s2.flac"), frequency: 990, seconds: 1)
        let c = try Self.tone(directory.file("c.flac"), frequency: 660, seconds: 5)
        let reader = GaplessQueueReader(paths: [a, first, second, c], outputRate: Self.rate, channelCount: 2,
                                        crossfade: MediaTime(frame: 4, sampleRate: 1))
        let (output, outcomes) = Self.readAll(reader)
        // A 1 s item is faded into over half of it, and out of over what is its own (0.5 s).
        let half = Self.rate / 2
        var expected = Self.crossfaded(try Self.samples(a), into: try Self.samples(first), length: half)
        expected = Self.crossfaded(expected, into: try Self.samples(second), length: half)
        expected = Self.crossfaded(expected, into: try Self.samples(c), length: half)
        #expect(Self.largestDifference(output, expected) < 1e-6)
        #expect(outcomes.map(\.startFrame) == [0, 11 * Int64(half), 12 * Int64(half), 13 * Int64(half)])
    }

    @Test func aLoopingItemShorterThanTheCrossfadeMovesOn() throws {
        let directory = try TemporaryDirectory("crossfade-loop")
        defer { directory.remove() }
        let item = try Self.tone(directory.file("a.flac"), frequency: 440, seconds: 2)
        // Repeat single: one entry, passes without end.
        let reader = GaplessQueueReader(paths: [item], outputRate: Self.rate, channelCount: 2, passes: nil,
                                        crossfade: MediaTime(frame: 10, sampleRate: 1))
        let starts = Mutex<[Int64]>([])
        reader.onItem = { outcome in if outcome.frameCount == 0 && outcome.error == nil { starts.withLock { $0.append(outcome.startFrame) } } }
        var block: [Float] = []
        var frames = 0, reads = 0
        while frames < 8 * Self.rate {
            reads += 1
            try #require(reads < 10_000, "the reader gave \(frames) frames in \(reads) reads")
            let got = reader.read(into: &block)
            try #require(got > 0)
            frames += got
        }
        // Each pass fades into the next over half of it: a new pass every second.
        #expect(Array(starts.withLock { $0 }.prefix(6)) == (0..<6).map { Int64($0 * Self.rate) })
    }

    @Test func itemsAtAnotherRateFadeThroughTheirOwnResamplers() throws {
        let directory = try TemporaryDirectory("crossfade-resampled")
        defer { directory.remove() }
        let a = directory.file("a.flac"), b = directory.file("b.flac")
        for (path, frequency, seconds) in [(a, 440, 5), (b, 660, 4)] {
            try TestMedia.ffmpeg(["-f", "lavfi", "-i", "sine=frequency=\(frequency):sample_rate=44100:duration=\(seconds)", "-ac", "2", "-c:a", "flac", path])
        }
        func alone(_ path: String) -> [Float] {
            Self.readAll(GaplessQueueReader(paths: [path], outputRate: Self.rate, channelCount: 2)).samples
        }
        let reader = GaplessQueueReader(paths: [a, b], outputRate: Self.rate, channelCount: 2, crossfade: MediaTime(frame: 2, sampleRate: 1))
        let (output, outcomes) = Self.readAll(reader)
        // Each item resampled on its own, as it would play alone, then overlapped.
        let expected = Self.crossfaded(alone(a), into: alone(b), length: 2 * Self.rate)
        #expect(output.count == expected.count)
        #expect(Self.largestDifference(output, expected) < 1e-6)
        #expect(outcomes.map(\.startFrame) == [0, 3 * Int64(Self.rate)])
    }

    @Test func anItemThatGivesNoAudioLeavesTheFadeForTheNext() throws {
        let directory = try TemporaryDirectory("crossfade-empty")
        defer { directory.remove() }
        let a = try Self.tone(directory.file("a.flac"), frequency: 440, seconds: 6)
        let empty = directory.file("empty.flac")
        try TestMedia.ffmpeg(["-f", "lavfi", "-i", "anullsrc=r=48000:cl=stereo", "-t", "0", "-c:a", "flac", empty])
        let b = try Self.tone(directory.file("b.flac"), frequency: 660, seconds: 9)
        let reader = GaplessQueueReader(paths: [a, empty, b], outputRate: Self.rate, channelCount: 2, crossfade: MediaTime(frame: 4, sampleRate: 1))
        let reports = Mutex<[ItemOutcome]>([])
        reader.onItem = { outcome in reports.withLock { $0.append(outcome) } }
        var output: [Float] = [], block: [Float] = []
        while reader.read(into: &block) > 0 { output += block }
        // It opened (so a fade into it was set up) and ended with nothing.
        #expect(reports.withLock { $0 }.contains { $0.tag == 1 && $0.info != nil && $0.error != nil }, "\(reports.withLock { $0 })")
        #expect(Self.largestDifference(output, Self.crossfaded(try Self.samples(a), into: try Self.samples(b), length: Self.fade)) < 1e-6)
    }

    /// An item of unknown length (a live stream: here a named pipe of raw PCM still open) is not
    /// held back by the crossfade: its audio comes out as it arrives, though 10 s are set.
    @Test func aLiveItemIsNotDelayedByTheCrossfade() async throws {
        let directory = try TemporaryDirectory("crossfade-live")
        defer { directory.remove() }
        let fifo = directory.file("live.fifo")
        #expect(mkfifo(fifo, 0o600) == 0)
        let finish = DispatchSemaphore(value: 0)
        // The reader closes its end before the writer is done: a write then fails, not the process.
        signal(SIGPIPE, SIG_IGN)
        let writer = Thread {
            // Two seconds of a ramp, then the pipe stays open until the test is done.
            let descriptor = open(fifo, O_WRONLY)
            guard descriptor >= 0 else { return }
            let samples = (0..<(2 * 48_000 * 2)).map { Int16(truncatingIfNeeded: $0 % 20_000) }
            _ = samples.withUnsafeBytes { write(descriptor, $0.baseAddress, $0.count) }
            finish.wait()
            close(descriptor)
        }
        writer.start()
        defer { finish.signal() }
        let got = try await onOwnThread("the live item's first second", timeout: .seconds(20), onTimeout: { finish.signal() }) {
            let reader = GaplessQueueReader(paths: ["pipe:\(fifo)?sampleformat=48000:16:2"], outputRate: 48_000, channelCount: 2,
                                            crossfade: MediaTime(frame: 10, sampleRate: 1))
            var frames = 0
            var block: [Float] = []
            while frames < 48_000 {
                let read = reader.read(into: &block)
                if read == 0 { break }
                frames += read
            }
            return frames
        }
        #expect(got >= 48_000)
    }

    // MARK: Edits through the producer

    /// Three 9 s items on a producer stepped by the test, its output taking up to `capacity` frames.
    struct Producing {
        let directory: TemporaryDirectory
        let paths: [String]
        let output = MemoryTimelineOutput(channels: 2)
        let producer: QueueProducer

        init(_ label: String, crossfade seconds: Int, entries: (([String]) -> [QueueProducer.Entry])? = nil) throws {
            directory = try TemporaryDirectory("crossfade-\(label)")
            paths = [try CrossfadeTests.tone(directory.file("a.flac"), frequency: 440, seconds: 9),
                     try CrossfadeTests.tone(directory.file("b.flac"), frequency: 660, seconds: 9),
                     try CrossfadeTests.tone(directory.file("c.flac"), frequency: 550, seconds: 9)]
            var configuration = QueueProducer.Configuration(outputFormat: AudioFormat(sampleRate: CrossfadeTests.rate, channelCount: 2))
            configuration.crossfade = MediaTime(frame: Int64(seconds), sampleRate: 1)
            let queue = entries?(paths) ?? paths.enumerated().map { QueueProducer.Entry(path: $1, tag: $0) }
            producer = QueueProducer(entries: queue, configuration: configuration, output: output)
        }

        /// Produces until the output is full at `frames`, with the edit horizon at `horizon`.
        func produce(upTo frames: Int64, horizon: Int64) {
            output.capacity = frames
            output.horizon = horizon
            _ = producer.produceAvailable()
        }

        func finish() -> [Float] {
            output.capacity = .max
            while producer.produceAvailable() {}
            return output.samples
        }
    }

    @Test func removingTheItemFadingInFadesIntoTheOneAfterItInstead() throws {
        let run = try Producing("remove", crossfade: 4)
        defer { run.directory.remove() }
        // Decoded into the fade from A to B (it starts at 5 s); the horizon before it.
        run.produce(upTo: Int64(6 * Self.rate), horizon: Int64(Self.rate))
        #expect(run.output.writtenFrames >= Int64(5 * Self.rate + Self.rate / 2))
        run.producer.edit { $0.removeAll { $0.tag == 1 } }
        let output = run.finish()
        let (a, c) = (try Self.samples(run.paths[0]), try Self.samples(run.paths[2]))
        #expect(Self.largestDifference(output, Self.crossfaded(a, into: c, length: Self.fade)) < 1e-6)
    }

    @Test func aSeekDuringAFadeCutsToTheItemFadingInAtTheHorizon() throws {
        let run = try Producing("seek", crossfade: 4)
        defer { run.directory.remove() }
        let horizon = Int64(6 * Self.rate)
        run.produce(upTo: Int64(8 * Self.rate), horizon: horizon)
        let before = run.output.samples
        run.producer.seek(to: MediaTime(frame: 1, sampleRate: 1))
        let output = run.finish()
        // Up to the horizon as it was (A fading into B); from it, B from 1 s on, then B into C.
        let (b, c) = (try Self.samples(run.paths[1]), try Self.samples(run.paths[2]))
        let after = Self.crossfaded(Array(b[(2 * Self.rate)...]), into: c, length: Self.fade)
        #expect(Self.largestDifference(output, Array(before[..<(Int(horizon) * 2)]) + after) < 1e-6)
    }

    @Test func changingTheCrossfadeWhilePlayingDecodesAgainFromTheHorizon() throws {
        let run = try Producing("change", crossfade: 0)
        defer { run.directory.remove() }
        run.produce(upTo: Int64(12 * Self.rate), horizon: Int64(Self.rate))
        run.producer.setCrossfade(MediaTime(frame: 4, sampleRate: 1))
        let output = run.finish()
        let (a, b, c) = (try Self.samples(run.paths[0]), try Self.samples(run.paths[1]), try Self.samples(run.paths[2]))
        let expected = Self.crossfaded(Self.crossfaded(a, into: b, length: Self.fade), into: c, length: Self.fade)
        #expect(Self.largestDifference(output, expected) < 1e-6)
    }

    @Test func aGainChangedForAnItemAlreadyDecodedTakesEffect() throws {
        let run = try Producing("gain", crossfade: 4)
        defer { run.directory.remove() }
        run.produce(upTo: Int64(9 * Self.rate), horizon: Int64(Self.rate))
        // B's replay gain changes after it was decoded (and faded into): heard from the horizon.
        run.producer.edit({ entries in entries[1].gain = 0.5 }, soundChanged: true)
        let output = run.finish()
        let (a, b, c) = (try Self.samples(run.paths[0]), try Self.samples(run.paths[1], gain: 0.5), try Self.samples(run.paths[2]))
        let expected = Self.crossfaded(Self.crossfaded(a, into: b, length: Self.fade), into: c, length: Self.fade)
        #expect(Self.largestDifference(output, expected) < 1e-6)
    }

    @Test func aGainFoundForAnItemAlreadyDecodedAppliesFromItsNextReading() throws {
        let run = try Producing("gain-later", crossfade: 4)
        defer { run.directory.remove() }
        // B is open and fading in (from 5 s); C is not yet read (from 10 s).
        run.produce(upTo: Int64(6 * Self.rate), horizon: Int64(Self.rate))
        // New gains, as for items whose loudness was measured meanwhile: not a change of sound.
        run.producer.edit { entries in
            entries[1].gain = 0.5
            entries[2].gain = 0.5
        }
        let output = run.finish()
        let (a, b, c) = (try Self.samples(run.paths[0]), try Self.samples(run.paths[1]), try Self.samples(run.paths[2], gain: 0.5))
        let expected = Self.crossfaded(Self.crossfaded(a, into: b, length: Self.fade), into: c, length: Self.fade)
        #expect(Self.largestDifference(output, expected) < 1e-6)
    }

    @Test func anItemAddedAfterTheQueueRanOutIsFadedInto() throws {
        let run = try Producing("append", crossfade: 4) { paths in [QueueProducer.Entry(path: paths[0], tag: 0)] }
        defer { run.directory.remove() }
        run.output.awaitsEdits = true
        run.produce(upTo: .max, horizon: Int64(Self.rate))
        #expect(run.output.writtenFrames == Int64(9 * Self.rate))
        run.producer.edit { $0.append(QueueProducer.Entry(path: run.paths[1], tag: 1)) }
        run.output.awaitsEdits = false
        let output = run.finish()
        let (a, b) = (try Self.samples(run.paths[0]), try Self.samples(run.paths[1]))
        #expect(Self.largestDifference(output, Self.crossfaded(a, into: b, length: Self.fade)) < 1e-6)
    }
}

/// A timeline output in memory for a stepped producer: takes frames up to `capacity`, with an
/// edit horizon the test sets.
final class MemoryTimelineOutput: QueueTimelineOutput, @unchecked Sendable {
    let channels: Int
    var samples: [Float] = []
    var capacity: Int64 = .max
    var horizon: Int64 = 0
    var awaitsEdits = false

    init(channels: Int) { self.channels = channels }

    var writtenFrames: Int64 { Int64(samples.count / channels) }
    var editHorizon: Int64 { horizon }
    func write(_ source: UnsafePointer<Float>, frames: Int) -> Int {
        let taken = Int(min(Int64(frames), max(0, capacity - writtenFrames)))
        samples.append(contentsOf: UnsafeBufferPointer(start: source, count: taken * channels))
        return taken
    }
    func truncate(from frame: Int64) -> Int64 {
        samples.removeSubrange(Int(frame) * channels..<samples.count)
        return frame
    }
    func waitForSpace(timeoutNanoseconds: Int64, evenIfWritable: Bool) {}
    func wake() {}
    var awaitsEditsAfterEnd: Bool { awaitsEdits }
    func queueRanOut() {}
    func finish() {}
}
