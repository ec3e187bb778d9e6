import Foundation
import Testing
@testable import TuttiHouse
@testable import TuttiMedia
import TuttiProtocol
import TuttiTestSupport

/// Loudness in the library (issue 36), from real files made with the ffmpeg CLI: an untagged
/// file measured by the scan agrees with FFmpeg's own `ebur128` filter (the anchor, measured on
/// the same file); ReplayGain and R128 tags are honoured instead of measuring; an album without
/// tags is its tracks combined; a rescan measures only what changed.
@Suite struct LibraryLoudnessTests {
    /// White noise at `amplitude`: louder noise is louder by the same dB, broadband like music.
    static func noise(_ path: String, amplitude: Double, seconds: Int = 6, seed: Int = 1, metadata: [String] = []) throws {
        try TestMedia.ffmpeg(["-f", "lavfi", "-i", "anoisesrc=c=white:a=\(amplitude):seed=\(seed):d=\(seconds)", "-ac", "2"]
                             + metadata.flatMap { ["-metadata", $0] } + [path])
    }

    /// FFmpeg's `ebur128` filter's integrated loudness and true peak (dBTP) of a file.
    static func ffmpegLoudness(_ path: String) throws -> (lufs: Double, truePeakDB: Double) {
        let result = try TestMedia.execute("ffmpeg", ["-nostdin", "-nostats", "-i", path, "-af", "ebur128=peak=true", "-f", "null", "-"])
        guard result.status == 0 else { throw TestFailure("ffmpeg ebur128 on \(path) failed") }
        let output = String(decoding: result.standardError, as: UTF8.self)
        // The summary at the end: "I:         -14.0 LUFS" … "Peak:        -3.2 dBFS".
        let summary = output.components(separatedBy: "Summary:").last ?? ""
        func value(after label: String) -> Double? {
            guard let range = summary.range(of: label) else { return nil }
            return Double(summary[range.upperBound...].trimmingCharacters(in: .whitespaces).split(separator: " ").first ?? "")
        }
        guard let lufs = value(after: "I:"), let peak = value(after: "Peak:") else { throw TestFailure("no ebur128 summary in: \(summary)") }
        return (lufs, peak)
    }

    @Test func theScanMeasuresOrReadsEachTrackAndItsAlbum() throws {
        let directory = try TemporaryDirectory("library-loudness")
        defer { directory.remove() }
        let music = directory.file("music")
        try FileManager.default.createDirectory(atPath: music + "/Album", withIntermediateDirectories: true)
        // About −8, −14 and −23 LUFS, untagged; two of them one album.
        let loud = music + "/Album/01 loud.flac", middle = music + "/Album/02 middle.flac", quiet = music + "/quiet.flac"
        try Self.noise(loud, amplitude: 0.48, metadata: ["album=Levels"])
        try Self.noise(middle, amplitude: 0.24, seed: 2, metadata: ["album=Levels"])
        try Self.noise(quiet, amplitude: 0.085, seed: 3)
        // Tagged by a tagger: its tags are taken, not measured (they say −10 LUFS, it is not).
        let tagged = music + "/tagged.flac", opus = music + "/r128.opus"
        try Self.noise(tagged, amplitude: 0.16, seed: 4, metadata: ["REPLAYGAIN_TRACK_GAIN=-8.00 dB", "REPLAYGAIN_TRACK_PEAK=0.5",
                                                                     "REPLAYGAIN_ALBUM_GAIN=-7.5 dB"])
        try Self.noise(opus, amplitude: 0.16, seed: 5, metadata: ["R128_TRACK_GAIN=-2560"])

        let library = try MusicLibrary(directory: directory.file("state"))
        let scanner = LibraryScanner(roots: [music], library: library)
        let first = try scanner.scan()
        #expect(first.read == 5 && first.unreadable == 0)
        let found = try library.loudness(atPaths: [loud, middle, quiet, tagged, opus])
        for path in [loud, middle, quiet] {
            let anchor = try Self.ffmpegLoudness(path)
            let measured = try #require(found[path]?.track)
            print("loudness: \((path as NSString).lastPathComponent): Tutti \(measured.integratedLUFS) LUFS, true peak \(20 * log10(measured.peak)) dBTP; ffmpeg ebur128 \(anchor.lufs) LUFS, \(anchor.truePeakDB) dBTP")
            // FFmpeg prints a tenth of a LU.
            #expect(abs(measured.integratedLUFS - anchor.lufs) <= 0.06, "\(path): \(measured.integratedLUFS) against ffmpeg's \(anchor.lufs)")
            // The true peak of white noise, whose inter-sample peaks come from content near
            // Nyquist, depends on each library's interpolation filter: libebur128's and FFmpeg's
            // differ by 0.7–0.8 dB on these files (a peak protection's margin, not a level).
            #expect(abs(20 * log10(measured.peak) - anchor.truePeakDB) <= 1, "\(path): true peak \(measured.peak) against ffmpeg's \(anchor.truePeakDB) dBTP")
        }
        let levels = [loud, middle, quiet].compactMap { found[$0]?.track?.integratedLUFS }
        #expect(levels.count == 3 && levels[0] > -10 && levels[0] < -6 && levels[1] > -16 && levels[1] < -12 && levels[2] > -25 && levels[2] < -21, "\(levels)")
        // The album, untagged: its two tracks' powers averaged (equal lengths), for both.
        let album = try #require(found[loud]?.album)
        let expected = 10 * log10((pow(10, levels[0] / 10) + pow(10, levels[1] / 10)) / 2)
        #expect(abs(album.integratedLUFS - expected) < 0.01 && found[middle]?.album == album, "\(album) against \(expected)")
        // A track in no album is its own album.
        #expect(found[quiet]?.album == found[quiet]?.track)
        // Tags honoured: ReplayGain's against −18 LUFS, R128's against −23 LUFS in 1/256 dB.
        #expect(found[tagged]?.track == Loudness(integratedLUFS: -10, peak: 0.5))
        #expect(found[tagged]?.album?.integratedLUFS == -10.5)
        #expect(found[opus]?.track?.integratedLUFS == -13)
        #expect(try library.search("loud", limit: 5).first?.loudnessLUFS == levels[0])

        // A rescan measures nothing unchanged; a file rewritten is measured again.
        #expect(try scanner.scan().read == 0)
        try Self.noise(quiet, amplitude: 0.24, seed: 3)
        #expect(try scanner.scan().read == 1)
        let again = try #require(try library.loudness(atPaths: [quiet])[quiet]?.track)
        #expect(abs(again.integratedLUFS - levels[1]) < 0.5, "the rewritten file measured \(again.integratedLUFS)")
    }

    /// Debian's loudgain (0.6.8, `loudgain -a -s e`: track and album tags, extended) tags an
    /// album; the library takes its figures exactly, without measuring.
    @Test func tagsWrittenByLoudgainAreHonoured() throws {
        let directory = try TemporaryDirectory("library-loudgain")
        defer { directory.remove() }
        let music = directory.file("music")
        try FileManager.default.createDirectory(atPath: music, withIntermediateDirectories: true)
        let a = music + "/a.flac", b = music + "/b.flac"
        try Self.noise(a, amplitude: 0.3, seed: 7, metadata: ["album=Tagged"])
        try Self.noise(b, amplitude: 0.1, seed: 8, metadata: ["album=Tagged"])
        try TestMedia.run("loudgain", ["-a", "-s", "e", a, b])
        // What loudgain wrote, read back with FFmpeg.
        func tag(_ path: String, _ key: String) throws -> String {
            let output = try TestMedia.run("ffprobe", ["-v", "error", "-show_entries", "format_tags=\(key)", "-of", "default=nw=1:nk=1", path])
            return String(decoding: output, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
        }
        let library = try MusicLibrary(directory: directory.file("state"))
        #expect(try LibraryScanner(roots: [music], library: library).scan().read == 2)
        let found = try library.loudness(atPaths: [a, b])
        for path in [a, b] {
            let trackGain = try #require(LoudnessTags.decibels(try tag(path, "REPLAYGAIN_TRACK_GAIN")))
            let albumGain = try #require(LoudnessTags.decibels(try tag(path, "REPLAYGAIN_ALBUM_GAIN")))
            let peak = try #require(Double(try tag(path, "REPLAYGAIN_TRACK_PEAK")))
            print("loudgain: \((path as NSString).lastPathComponent) track gain \(trackGain) dB, album gain \(albumGain) dB, peak \(peak)")
            #expect(found[path]?.track == Loudness(integratedLUFS: -18 - trackGain, peak: peak), "\(String(describing: found[path]))")
            #expect(found[path]?.album?.integratedLUFS == -18 - albumGain)
        }
    }

    @Test(arguments: [("-6.20 dB", -6.2), ("+3.1 dB", 3.1), ("-6.2", -6.2), ("  0.00 db ", 0.0)])
    func replayGainTextsParse(text: String, decibels: Double) {
        #expect(LoudnessTags.decibels(text) == decibels)
    }

    @Test func unparsableTagsAreNoTags() {
        #expect(LoudnessTags.loudness(gain: "loud", peak: nil, r128: nil) == nil)
        #expect(LoudnessTags.loudness(gain: "-900 dB", peak: nil, r128: nil) == nil)
        #expect(LoudnessTags.loudness(gain: nil, peak: nil, r128: "99999") == nil)
        // A peak not given or absurd is full scale.
        #expect(LoudnessTags.loudness(gain: "-4 dB", peak: "-1", r128: nil) == Loudness(integratedLUFS: -14, peak: 1))
    }
}
