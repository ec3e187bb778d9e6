import Foundation
import Testing
@testable import TuttiHouse
import TuttiProtocol
import TuttiTestSupport

/// Only what is meant to be played: files under the allowed directories (after resolving
/// links and `..`), and http(s) URLs.
@Suite struct MediaAccessTests {
    @Test func refusesWhatIsOutsideTheAllowedDirectories() throws {
        let directory = try TemporaryDirectory("media-access")
        defer { directory.remove() }
        let music = directory.file("music")
        try FileManager.default.createDirectory(atPath: music, withIntermediateDirectories: true)
        _ = FileManager.default.createFile(atPath: music + "/a.flac", contents: Data([1]))
        _ = FileManager.default.createFile(atPath: directory.file("secret.txt"), contents: Data([2]))
        try FileManager.default.createSymbolicLink(atPath: music + "/link.flac", withDestinationPath: directory.file("secret.txt"))
        try FileManager.default.createSymbolicLink(atPath: music + "/etc", withDestinationPath: "/etc")
        let access = MediaAccess(allowedDirectories: [music + "/"])

        let allowed = [music + "/a.flac", music + "/not-yet.flac", "http://radio.example/stream", "HTTPS://radio.example/a.m3u8", "-"]
        for item in allowed { #expect(access.refusal(for: item) == nil, "\(item)") }
        let forbidden = [directory.file("secret.txt"), music + "/link.flac", music + "/../secret.txt", music + "/etc/passwd", "/etc/shadow",
                         "/etc/no-such-file", "pipe:/etc/passwd", "file:///etc/passwd", "concat:/etc/passwd|/etc/hosts", "ftp://example/a.mp3",
                         "data:audio/wav;base64,AAAA", music + "x/a.flac"]
        for item in forbidden {
            let refusal = access.refusal(for: item)
            #expect(refusal?.kind == .forbidden, "\(item): \(refusal?.error ?? "allowed")")
            #expect(refusal?.error.hasPrefix(item) ?? false)
        }
        #expect(access.refusal(for: "a.flac")?.kind == .invalid)
        // No directories given: any file (a house in a test), but still no other scheme.
        let open = MediaAccess(allowedDirectories: nil)
        #expect(open.refusal(for: "/etc/hosts") == nil)
        #expect(open.refusal(for: "file:///etc/hosts")?.kind == .forbidden)
    }
}
