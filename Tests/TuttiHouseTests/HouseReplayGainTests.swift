import Foundation
import Testing
import TuttiCore
import TuttiMedia
import TuttiProtocol
import TuttiSimulation
@testable import TuttiHouse
import TuttiTestSupport

/// Even loudness in the house (issue 36), on a testing loop, measured on the stream the rooms
/// were sent: three untagged files at about −8, −14 and −23 LUFS play within 0.5 LU of one
/// another with track gain, and never over full scale; album gain keeps an album's tracks'
/// levels relative to one another; and the rule itself, item by item.
@Suite(.serialized) struct HouseReplayGainTests {
    /// Each item's loudness in the stream sent, item `i` being `seconds` long from frame
    /// `i × seconds × 48 000`.
    func itemLoudness(_ house: HouseHarness, items: Int, seconds: Int) async throws -> (levels: [Double], peak: Float) {
        let stream = try await house.waitForProduction()
        let frames = items * seconds * 48000
        let audio = try HouseHarness.audio(try await house.messages("kitchen"), stream: stream.id, from: 0, frames: frames)
        var levels: [Double] = []
        for item in 0..<items {
            // Its middle: clear of the joins.
            let from = (item * seconds * 48000 + 24000) * 2, to = ((item + 1) * seconds * 48000 - 24000) * 2
            levels.append(try #require(LoudnessMeter.measure(samples: Array(audio[from..<to]), sampleRate: 48000, channelCount: 2)).integratedLUFS)
        }
        return (levels, audio.reduce(0) { max($0, abs($1)) })
    }

    @Test func trackGainEvensOutAndAlbumGainKeepsAnAlbumsLevels() async throws {
        let directory = try TemporaryDirectory("house-replay-gain")
        defer { directory.remove() }
        let music = directory.file("music")
        try FileManager.default.createDirectory(atPath: music, withIntermediateDirectories: true)
        let seconds = 4
        let loud = music + "/01 loud.flac", middle = music + "/02 middle.flac", quiet = music + "/03 quiet.flac"
        for (path, amplitude, seed) in [(loud, 0.48, 1), (middle, 0.24, 2), (quiet, 0.085, 3)] {
            try TestMedia.ffmpeg(["-f", "lavfi", "-i", "anoisesrc=c=white:a=\(amplitude):seed=\(seed):d=\(seconds):r=48000", "-ac", "2",
                                  "-metadata", "album=Levels", path])
        }
        var configuration = House.Configuration()
        configuration.stateDirectory = directory.file("state")
        configuration.musicDirectories = [music]
        let house = HouseHarness(configuration: configuration)
        house.house.startLibraryScan()
        // A guard only: the scan's loudness pass runs at nice 10, and beside the suites phase on
        // two busy cores it once took over 30 s (CI).
        let deadline = Date().addingTimeInterval(180)
        while try await house.control(.status).status?.library?.scanning != false {
            guard Date() < deadline else { throw TestFailure("the library scan did not finish") }
            try await Task.sleep(nanoseconds: 20_000_000)
        }
        try await house.connect("kitchen")

        // As they are: about −8, −14 and −23 LUFS.
        _ = try await house.control(.play(files: [loud, middle, quiet]))
        let plain = try await itemLoudness(house, items: 3, seconds: seconds)
        print("replay gain off: \(plain.levels) LUFS, peak \(plain.peak)")
        #expect(plain.levels[0] > -10 && plain.levels[1] > -16 && plain.levels[1] < -12 && plain.levels[2] < -21, "\(plain.levels)")

        // Track gain: each to −18 LUFS, within 0.5 LU of one another, nothing over full scale.
        let status = try await house.control(.replayGain(mode: .track)).status
        #expect(status?.replayGain == ReplayGainSettings(mode: .track))
        _ = try await house.control(.stop)
        _ = try await house.messages("kitchen")
        _ = try await house.control(.play(files: [loud, middle, quiet]))
        let track = try await itemLoudness(house, items: 3, seconds: seconds)
        let spread = (track.levels.max() ?? 0) - (track.levels.min() ?? 0)
        print("replay gain track: \(track.levels) LUFS (spread \(spread) LU), peak \(track.peak)")
        #expect(spread <= 0.5 && track.levels.allSatisfy { abs($0 + 18) < 0.5 }, "\(track.levels)")
        #expect(track.peak <= 1, "a sample at \(track.peak)")

        // Album gain: one gain for the album's tracks (its loudness is theirs combined, about
        // −11.7 LUFS), so their differences stay.
        _ = try await house.control(.replayGain(mode: .album))
        _ = try await house.control(.stop)
        _ = try await house.messages("kitchen")
        _ = try await house.control(.play(files: [loud, middle, quiet]))
        let album = try await itemLoudness(house, items: 3, seconds: seconds)
        print("replay gain album: \(album.levels) LUFS, peak \(album.peak)")
        for (a, b) in zip(album.levels, plain.levels) { #expect(abs((a - album.levels[0]) - (b - plain.levels[0])) < 0.05, "\(album.levels) against \(plain.levels)") }
        #expect(album.peak <= 1, "a sample at \(album.peak)")
        // Kept across a restart of the house.
        let restarted = HouseHarness(configuration: configuration, clock: house.clock)
        #expect(try await restarted.control(.status).status?.replayGain?.mode == .album)
    }

    /// A file outside the library has no known loudness: it plays at the missing preamp's gain
    /// the first time, is measured as it plays, and plays at its own gain from its next play on,
    /// across a restart of the house too. Pipes and HLS are never measured.
    @Test func anItemOutsideTheLibraryIsMeasuredTheFirstTimeItPlaysThrough() async throws {
        let directory = try TemporaryDirectory("house-replay-gain-played")
        defer { directory.remove() }
        let seconds = 4
        let loud = directory.file("loud.flac")
        try TestMedia.ffmpeg(["-f", "lavfi", "-i", "anoisesrc=c=white:a=0.48:seed=1:d=\(seconds):r=48000", "-ac", "2", loud])
        var configuration = House.Configuration()
        configuration.stateDirectory = directory.file("state")
        let house = HouseHarness(configuration: configuration)
        try await house.connect("kitchen")
        _ = try await house.control(.replayGain(mode: .track))
        _ = try await house.control(.play(files: [loud]))
        let first = try await itemLoudness(house, items: 1, seconds: seconds).levels[0]
        try await house.runLoop(until: "the item's loudness, measured as it played") { $0.playedLoudness[loud] != nil }
        _ = try await house.control(.stop)
        _ = try await house.messages("kitchen")
        _ = try await house.control(.play(files: [loud]))
        let second = try await itemLoudness(house, items: 1, seconds: seconds).levels[0]
        print("replay gain, an item outside the library: first play \(first) LUFS, second \(second) LUFS")
        #expect(first > -10, "the first play was not at the missing preamp's 0 dB: \(first) LUFS")
        #expect(abs(second + 18) < 0.5, "the second play was not at −18 LUFS: \(second)")

        let restarted = HouseHarness(configuration: configuration, clock: house.clock)
        try await restarted.connect("kitchen")
        _ = try await restarted.control(.play(files: [loud]))
        let third = try await itemLoudness(restarted, items: 1, seconds: seconds).levels[0]
        #expect(abs(third + 18) < 0.5, "after a restart: \(third) LUFS")

        // The same audio each play: files and URLs of files; a pipe, standard input or HLS not.
        #expect(GroupSession.isMeasurableAsPlayed("/music/a.flac") && GroupSession.isMeasurableAsPlayed("https://h/a.mp3"))
        #expect(!GroupSession.isMeasurableAsPlayed("pipe:/tmp/fifo") && !GroupSession.isMeasurableAsPlayed("-")
                && !GroupSession.isMeasurableAsPlayed("https://h/live.m3u8"))
        // Off: never measured.
        let status = try await restarted.control(.replayGain(measureAsPlayed: false)).status
        #expect(status?.replayGain?.measureAsPlayed == false)
        #expect(try await restarted.onLoop { $0.defaultGroup.queueEntry(path: "/elsewhere/b.flac", tag: 1).measuresLoudness } == false)
    }

    @Test func theRuleItemByItem() {
        let quiet = Loudness(integratedLUFS: -23, peak: 0.3), loud = Loudness(integratedLUFS: -8, peak: 1.0)
        func gain(_ known: (track: Loudness?, album: Loudness?)?, _ settings: ReplayGainSettings, random: Bool = false) -> Double {
            (20 * log10(Double(GroupSession.gain(for: known, settings: settings, random: random))) * 100).rounded() / 100
        }
        #expect(gain((quiet, loud), ReplayGainSettings(mode: .off)) == 0)
        #expect(gain((quiet, loud), ReplayGainSettings(mode: .track)) == 5)
        #expect(gain((quiet, loud), ReplayGainSettings(mode: .album)) == -10)
        // auto: the album's, unless random.
        #expect(gain((quiet, loud), ReplayGainSettings(mode: .auto)) == -10)
        #expect(gain((quiet, loud), ReplayGainSettings(mode: .auto), random: true) == 5)
        #expect(gain((quiet, loud), ReplayGainSettings(mode: .track, preampDB: 3)) == 8)
        // Limited: +15 dB would take a 0.3 peak to 1.7; it stops at full scale (+10.46 dB).
        #expect(gain((quiet, nil), ReplayGainSettings(mode: .track, preampDB: 10)) == 10.46)
        #expect(gain((quiet, nil), ReplayGainSettings(mode: .track, preampDB: 10, limit: false)) == 15)
        // Unknown: the missing preamp; no album: the track's.
        #expect(gain(nil, ReplayGainSettings(mode: .track, missingPreampDB: -6)) == -6)
        #expect(gain((quiet, nil), ReplayGainSettings(mode: .album)) == 5)
    }
}
