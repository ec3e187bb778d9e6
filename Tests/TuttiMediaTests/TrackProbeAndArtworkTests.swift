import Foundation
import Testing
@testable import TuttiMedia
import TuttiTestSupport

/// The library's header-only probe against the full decoder's exact account, format by format,
/// and cover art embedded or beside the file; files made with the ffmpeg CLI.
@Suite struct TrackProbeAndArtworkTests {
    /// One file per format the library reads, 3 s of tone, tagged.
    static let formats: [(name: String, arguments: [String])] = [
        ("t.flac", []), ("t.mp3", ["-c:a", "libmp3lame", "-b:a", "128k"]), ("nox.mp3", ["-c:a", "libmp3lame", "-write_xing", "0"]),
        ("t.ogg", ["-c:a", "libvorbis"]), ("t.opus", ["-c:a", "libopus"]), ("t.m4a", ["-c:a", "aac"]), ("t.wav", []),
    ]

    @Test func probeAgreesWithTheDecoder() throws {
        let directory = try TemporaryDirectory("probe")
        defer { directory.remove() }
        for format in Self.formats {
            let path = directory.file(format.name)
            try TestMedia.ffmpeg(["-f", "lavfi", "-i", "sine=frequency=440:sample_rate=44100:duration=3", "-ac", "2"] + format.arguments
                                 + ["-metadata", "title=Tøne", "-metadata", "artist=Ärtist", "-metadata", "album=Albüm", path])
            let probed = try TrackProbe.read(path: path)
            let decoded = try AudioFileDecoder(path: path).info
            #expect(probed.codec == decoded.codec && probed.sampleRate == decoded.sampleRate && probed.channelCount == decoded.channelCount, "\(format.name)")
            if format.name != "t.wav" {  // WAV's INFO tags are not written by ffmpeg for these keys
                #expect(probed.title == "Tøne" && probed.artist == "Ärtist" && probed.album == "Albüm", "\(format.name): \(probed)")
            }
            #expect(probed.title == decoded.title && probed.artist == decoded.artist && probed.album == decoded.album, "\(format.name)")
            let probedSeconds = try #require(probed.duration?.seconds, "\(format.name)")
            let exactSeconds = try #require(decoded.duration?.seconds)
            // Within the encoder's priming and padding (Opus's 312 frames, MP3's 1105) or, for an
            // MP3 without a Xing header, a bitrate estimate's error.
            #expect(abs(probedSeconds - exactSeconds) < 0.08, "\(format.name): probe \(probedSeconds) s, decoder \(exactSeconds) s")
            #expect(!probed.hasArtwork)
        }
    }

    @Test func unreadableFilesSayWhy() throws {
        let directory = try TemporaryDirectory("probe-bad")
        defer { directory.remove() }
        #expect(throws: MediaError.self) { try TrackProbe.read(path: directory.file("missing.flac")) }
        let garbage = directory.file("garbage.mp3")
        _ = FileManager.default.createFile(atPath: garbage, contents: Data((0..<5000).map { UInt8(truncatingIfNeeded: $0 &* 7919) }))
        do {
            _ = try TrackProbe.read(path: garbage)
            Issue.record("garbage read as a track")
        } catch {
            #expect(!error.reason.isEmpty && !error.reason.contains("\n"))
        }
        // A picture is media FFmpeg reads, but not audio.
        try TestMedia.ffmpeg(["-f", "lavfi", "-i", "color=red:s=16x16", "-frames:v", "1", directory.file("p.png")])
        #expect(throws: MediaError.self) { try TrackProbe.read(path: directory.file("p.png")) }
    }

    @Test func artworkEmbeddedOrBesideTheFile() throws {
        let directory = try TemporaryDirectory("artwork")
        defer { directory.remove() }
        let cover = directory.file("made.png")
        try TestMedia.ffmpeg(["-f", "lavfi", "-i", "color=red:s=32x32", "-frames:v", "1", cover])
        let coverBytes = try [UInt8](Data(contentsOf: URL(fileURLWithPath: cover)))
        try FileManager.default.createDirectory(atPath: directory.file("embedded"), withIntermediateDirectories: true)
        try FileManager.default.createDirectory(atPath: directory.file("folder"), withIntermediateDirectories: true)
        try FileManager.default.createDirectory(atPath: directory.file("bare"), withIntermediateDirectories: true)

        // Embedded, in MP3 (ID3 APIC) and FLAC (PICTURE): the same bytes come back.
        for name in ["a.mp3", "a.flac"] {
            let path = directory.file("embedded/" + name)
            try TestMedia.ffmpeg(["-f", "lavfi", "-i", "sine=duration=1", "-i", cover, "-map", "0:a", "-map", "1:v", "-c:v", "png",
                                  "-disposition:v", "attached_pic", "-metadata:s:v", "comment=Cover (front)", path])
            #expect(try TrackProbe.read(path: path).hasArtwork, "\(name)")
            let art = try #require(try Artwork.read(forTrack: path), "\(name)")
            #expect(art.mimeType == "image/png" && art.source == "embedded" && art.bytes == coverBytes, "\(name)")
        }

        // Beside the file: cover.jpg before folder.png; names in any case.
        let track = directory.file("folder/t.ogg")
        try TestMedia.ffmpeg(["-f", "lavfi", "-i", "sine=duration=1", "-c:a", "libvorbis", track])
        try TestMedia.ffmpeg(["-f", "lavfi", "-i", "color=blue:s=8x8", "-frames:v", "1", directory.file("folder/Folder.png")])
        let folder = try #require(try Artwork.read(forTrack: track))
        #expect(folder.mimeType == "image/png" && folder.source == directory.file("folder/Folder.png"))
        try TestMedia.ffmpeg(["-f", "lavfi", "-i", "color=blue:s=8x8", "-frames:v", "1", directory.file("folder/COVER.JPG")])
        let preferred = try #require(try Artwork.read(forTrack: track))
        #expect(preferred.mimeType == "image/jpeg" && preferred.source.hasSuffix("/COVER.JPG") && preferred.bytes.starts(with: [0xFF, 0xD8]))

        // None at all.
        let bare = directory.file("bare/t.flac")
        try TestMedia.ffmpeg(["-f", "lavfi", "-i", "sine=duration=1", bare])
        #expect(try Artwork.read(forTrack: bare) == nil)
        #expect(throws: MediaError.self) { try Artwork.read(forTrack: directory.file("bare/missing.flac")) }
    }
}
