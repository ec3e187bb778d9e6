import Foundation
import Testing
import TuttiCore
import TuttiEngine
import TuttiProtocol
import TuttiSimulation
@testable import TuttiDiagnostics
import TuttiTestSupport

/// Crossfade heard from the cards of two speaker processes with skewed clocks and crystals
/// (issue 36): with `crossfade 4`, a tone fades into another on the equal-power curve (each
/// tone's level fitted on the card, within 0.1 dB of cos and sin); two tracks cut from one
/// recording, tagged as one album in order, join gapless (the card's lag across the join);
/// and a seek during a fade cuts without a gap. Both rooms play the whole stream in sync.
extension MultiRoomEndToEndTests {
    /// `seconds` of a tone at `frequency` (amplitude 0.25) over pink noise (so that every
    /// checkpoint matches one place only: over quieter noise, the analysis locked on a tone's
    /// period 5 cycles off), 48 kHz stereo FLAC.
    func toneOverNoise(_ path: String, frequency: Int, seconds: Double, seed: Int, noise: Double = 0.05, metadata: [String] = []) throws {
        try TestMedia.ffmpeg(["-f", "lavfi", "-i", "sine=f=\(frequency):r=48000:d=\(seconds)",
                              "-f", "lavfi", "-i", "anoisesrc=c=pink:a=\(noise):r=48000:seed=\(seed):d=\(seconds)",
                              "-filter_complex", "[0]volume=2[t];[t][1]amix=inputs=2:normalize=0", "-ac", "2", "-c:a", "flac",
                              "-sample_fmt", "s32"] + metadata + [path])
    }

    @Test(.timeLimit(.minutes(3)))
    func aCrossfadeIsEqualPowerOnTheCardsAndAnAlbumStaysGapless() async throws {
        let directory = try TemporaryDirectory("crossfade")
        defer { directory.preserveLogs(as: "crossfade"); directory.remove() }
        let rate = 48_000, fade = 4 * 48_000
        let morning = directory.file("morning.flac"), evening = directory.file("evening.flac")
        try toneOverNoise(morning, frequency: 440, seconds: 8, seed: 1, metadata: ["-metadata", "album=Morning", "-metadata", "track=1"])
        try toneOverNoise(evening, frequency: 660, seconds: 12, seed: 2, metadata: ["-metadata", "album=Evening", "-metadata", "track=1"])
        // One recording cut in two at a frame no codec block divides, tagged as an album's
        // first and second tracks.
        // The first longer than twice the crossfade, so the fade into it is the whole 4 s.
        let recording = directory.file("live.flac"), cutAt = 400_001
        try toneOverNoise(recording, frequency: 550, seconds: 11.5, seed: 3, noise: 0.1)
        let first = directory.file("live-1.flac"), second = directory.file("live-2.flac")
        try TestMedia.ffmpeg(["-i", recording, "-af", "atrim=end_sample=\(cutAt)", "-c:a", "flac", "-sample_fmt", "s32",
                              "-metadata", "album=Live", "-metadata", "track=1/2", first])
        try TestMedia.ffmpeg(["-i", recording, "-af", "atrim=start_sample=\(cutAt),asetpts=PTS-STARTPTS", "-c:a", "flac", "-sample_fmt", "s32",
                              "-metadata", "album=Live", "-metadata", "track=2/2", second])

        let specs = [RoomSpec(name: "a", offset: "400", drift: "60", device: "-40", latency: "0"),
                     RoomSpec(name: "b", offset: "-600", drift: "-70", device: "50", latency: "0")]
        let (server, port, speakers) = try await startHouse(in: directory, rooms: specs)
        defer {
            for speaker in speakers { speaker.interrupt() }
            server.interrupt()
        }
        await #expect(throws: ControlRefusal.self) { try await send(.crossfade(seconds: 31), port: port) }
        #expect(try await send(.crossfade(seconds: 4), port: port).status?.crossfadeSeconds == 4)
        _ = try await rooms(port)
        let files = [morning, evening, first, second]
        _ = try await send(.play(files: files), port: port)
        // Morning [0, 8 s) fades into Evening [4 s, 16 s), which fades into Live 1 from 12 s.
        // A seek in the item heard, Live 1, during that fade: it cuts there, to Live 1 at 1 s.
        try await waitForRooms(port, timeout: 30) { rooms in (rooms["a"]?.playheadSeconds ?? 0) > 13.2 }
        let seek = try await send(.seek(seconds: 1), port: port)
        let streamCut = try #require(seek.edited?.cut, "the seek cut nothing: \(String(describing: seek.edited))")
        let cut = Int64((streamCut.fromSeconds * Double(rate)).rounded())
        #expect(cut > Int64(12 * rate) && cut < Int64(16 * rate), "cut at frame \(cut), not within the fade")
        // Live 1 from 1 s (to 400 001 frames), then Live 2 gapless: the end at cut + 10.5 s.
        let end = Double(cut) / Double(rate) + 10.5
        try await waitForRooms(port, timeout: 30) { rooms in (rooms["a"]?.playheadSeconds ?? 0) > end - 0.1 }
        try await Task.sleep(nanoseconds: 300_000_000)
        for speaker in speakers { #expect(speaker.interrupt() == 0) }

        // What the stream is: the queue crossfaded up to the cut, then Live 1 from 1 s and Live 2.
        func read(_ reader: GaplessQueueReader) -> [Float] {
            var samples: [Float] = [], block: [Float] = []
            while reader.read(into: &block) > 0 { samples += block }
            return samples
        }
        let before = read(GaplessQueueReader(paths: files, outputRate: rate, channelCount: 2, crossfade: MediaTime(frame: 4, sampleRate: 1)))
        // After the cut, the one recording from 1 s on, as ffmpeg decodes it: the album's two
        // tracks joined with nothing added, lost or faded (the engine reads the same).
        let after = Array(try TestMedia.decodeWithFFmpeg(recording)[(2 * rate)...])
        let engineAfter = read(GaplessQueueReader(paths: [first, second], outputRate: rate, channelCount: 2, offset: MediaTime(frame: 1, sampleRate: 1),
                                                  crossfade: MediaTime(frame: 4, sampleRate: 1)))
        #expect(engineAfter.count == after.count && zip(engineAfter, after).allSatisfy { abs($0 - $1) < 1e-6 }, "the album's tracks did not join as one recording")
        let stream = Array(before[..<(Int(cut) * 2)]) + after
        let captures = try captures(in: directory, rooms: specs)
        let heard = SyncAnalysis.analyse(rooms: captures, reference: stream, interval: 4800)
        print("crossfade: rooms a–b p50 \(heard.percentile(50) / 1000) µs, p99 \(heard.percentile(99) / 1000) µs over \(heard.skews.count) checkpoints")
        for room in specs.map(\.name) {
            let gains = heard.gains.compactMap { $0.gain[room] }
            #expect(heard.unmatched[room] == 0 && heard.discontinuities[room] == 0 && heard.underruns[room] == 0,
                    "\(room): unmatched \(String(describing: heard.unmatched[room])), jumps \(heard.jumps)")
            #expect(gains.count >= 150 && gains.allSatisfy { abs($0 - 1) < 0.01 }, "\(room)'s gain against the stream: \(gains.min() ?? .nan)…\(gains.max() ?? .nan)")
            for point in heard.gains where abs((point.gain[room] ?? 1) - 1) > 0.01 { print("crossfade: \(room) gain \(point.gain[room]!) at frame \(point.frame)") }
        }
        #expect(heard.percentile(99) / 1000 <= 50, "rooms \(heard.percentile(99) / 1000) µs apart (p99)")

        for room in captures {
            /// Where the card emitted stream frame `frame`: its lag, to a fraction of a frame.
            func lag(at frame: Int) throws -> Double {
                let nearest = try #require(heard.series.min { abs($0.frame - frame) < abs($1.frame - frame) }?.heard[room.name])
                let guess = room.capture.frame(atEmissionTime: nearest) - Double(heard.series.min { abs($0.frame - frame) < abs($1.frame - frame) }!.frame)
                return try #require(SyncAnalysis.locate(frame, in: room.capture, reference: stream, guess: Int(guess.rounded()), search: 24)?.lag,
                                    "\(room.name): frame \(frame) not found")
            }
            // The equal-power curve: each tone's level on the card, against cos and sin of the
            // fade's quarter turn, relative to its level alone.
            let channel = room.capture.samples.enumerated().compactMap { $0.offset % 2 == 0 ? Double($0.element) : nil }
            func levels(at frame: Int) throws -> [Double] {
                let centre = Int((Double(frame) + (try lag(at: frame))).rounded())
                return ToneFit(Array(channel[(centre - 4800)..<(centre + 4800)]), frequencies: [440.0 / 48000, 660.0 / 48000]).amplitudes
            }
            let morningAlone = try levels(at: 2 * rate)[0], eveningAlone = try levels(at: 10 * rate)[1]
            var worst = 0.0
            for tenth in [2, 3, 4, 5, 6, 7, 8] {
                let x = Double(tenth) / 10
                let levels = try levels(at: 4 * rate + Int(x * Double(fade)))
                let expected = (morningAlone * cos(x * Double.pi / 2), eveningAlone * sin(x * Double.pi / 2))
                let errors = (20 * log10(levels[0] / expected.0), 20 * log10(levels[1] / expected.1))
                worst = max(worst, abs(errors.0), abs(errors.1))
                #expect(abs(errors.0) <= 0.1 && abs(errors.1) <= 0.1, "\(room.name) at \(x) of the fade: \(errors.0) dB, \(errors.1) dB off the curve")
            }
            // No gap where the album's second track follows its first, nor at the seek's cut.
            let join = Int(cut) + (cutAt - rate)
            let albumGap = try lag(at: join + 8) - lag(at: join - 8 - SyncAnalysis.window)
            let seekGap = try lag(at: Int(cut) + 8) - lag(at: Int(cut) - 8 - SyncAnalysis.window)
            print("crossfade: \(room.name) off the equal-power curve by \(worst) dB at most; album join \(albumGap) frames, seek cut \(seekGap) frames")
            #expect(abs(albumGap) <= 4 && abs(seekGap) <= 4, "\(room.name): album join \(albumGap) frames, seek cut \(seekGap) frames")
        }
    }
}
