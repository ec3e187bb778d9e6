import Foundation
import Testing
import TuttiCore
@testable import TuttiMedia
@testable import TuttiMediaHTTP
import TuttiTestSupport

/// The pure parts of HLS input: playlist parsing, variant selection, the bit-rate history.
@Suite struct HLSPlaylistTests {
    static let masterURL = "http://example.com/radio/hls/master.m3u8?token=abc"

    @Test func aMasterPlaylistListsVariantsWithAbsoluteURIs() throws {
        let text = """
        #EXTM3U
        #EXT-X-VERSION:3
        #EXT-X-STREAM-INF:BANDWIDTH=52800,AVERAGE-BANDWIDTH=48000,CODECS="mp4a.40.2"
        v0/index.m3u8

        #EXT-X-STREAM-INF:CODECS="mp4a.40.5,mp4a.40.2",BANDWIDTH=105600,NAME="a, b"
        ../other/index.m3u8
        #EXT-X-STREAM-INF:BANDWIDTH=211200
        /absolute/index.m3u8
        #EXT-X-STREAM-INF:BANDWIDTH=400000
        https://cdn.example.net/x/index.m3u8
        """
        guard case .master(let master) = try HLSPlaylist.parse(text, url: Self.masterURL) else {
            Issue.record("not a master playlist")
            return
        }
        #expect(master.variants == [
            HLSVariant(url: "http://example.com/radio/hls/v0/index.m3u8", bandwidth: 52800, averageBandwidth: 48000, codecs: ["mp4a.40.2"]),
            HLSVariant(url: "http://example.com/radio/other/index.m3u8", bandwidth: 105600, codecs: ["mp4a.40.5", "mp4a.40.2"]),
            HLSVariant(url: "http://example.com/absolute/index.m3u8", bandwidth: 211200),
            HLSVariant(url: "https://cdn.example.net/x/index.m3u8", bandwidth: 400000),
        ])
    }

    @Test func aMediaPlaylistListsSegmentsWithSequenceNumbersAndDurations() throws {
        let text = """
        #EXTM3U
        #EXT-X-VERSION:7
        #EXT-X-TARGETDURATION:2
        #EXT-X-MEDIA-SEQUENCE:41
        #EXT-X-MAP:URI="init.mp4",BYTERANGE="700@0"
        #EXTINF:2.005333,
        seg41.m4s
        #EXTINF:1.984,title
        #EXT-X-BYTERANGE:1000@700
        all.m4s
        #EXTINF:1.5,
        #EXT-X-BYTERANGE:500
        all.m4s
        #EXTINF:0.021333,
        #EXT-X-DISCONTINUITY
        #EXT-X-MAP:URI="init2.mp4"
        https://cdn.example.net/seg44.m4s
        #EXT-X-ENDLIST
        """
        guard case .media(let playlist) = try HLSPlaylist.parse(text, url: "http://example.com/a/b/index.m3u8") else {
            Issue.record("not a media playlist")
            return
        }
        #expect(playlist.targetDuration == 2)
        #expect(playlist.mediaSequence == 41)
        #expect(playlist.isEnded)
        #expect(playlist.segments.map(\.sequence) == [41, 42, 43, 44])
        #expect(playlist.segments.map(\.url) == ["http://example.com/a/b/seg41.m4s", "http://example.com/a/b/all.m4s",
                                                 "http://example.com/a/b/all.m4s", "https://cdn.example.net/seg44.m4s"])
        #expect(playlist.segments.map(\.resource.byteRange) == [nil, 700..<1700, 1700..<2200, nil])
        #expect(playlist.segments[0].initSection == HLSResource(url: "http://example.com/a/b/init.mp4", byteRange: 0..<700))
        #expect(playlist.segments[3].initSection == HLSResource(url: "http://example.com/a/b/init2.mp4"))
        #expect(playlist.segments.map(\.isDiscontinuity) == [false, false, false, true])
        #expect(playlist.segments[0].duration == MediaTime(value: 2_005_333, timescale: 1_000_000))
        // Exact: 2.005333 + 1.984 + 1.5 + 0.021333.
        #expect(playlist.totalDuration == MediaTime(value: 5_510_666, timescale: 1_000_000))
    }

    @Test func aLivePlaylistHasNoEndAndDefaultsItsTargetDuration() throws {
        let text = "#EXTM3U\n#EXTINF:6.2,\na.ts\n#EXTINF:6,\nb.ts\n"
        guard case .media(let playlist) = try HLSPlaylist.parse(text, url: "http://h/live.m3u8") else {
            Issue.record("not a media playlist")
            return
        }
        #expect(!playlist.isEnded)
        #expect(playlist.targetDuration == 7)
        #expect(playlist.segments.map(\.sequence) == [0, 1])
    }

    /// A broken playlist gives one line naming its URL and the line.
    @Test(arguments: [
        ("#EXT-X-VERSION:3\n", "line 1: not an HLS playlist (the first line is not #EXTM3U)"),
        ("#EXTM3U\n#EXT-X-TARGETDURATION:2\n#EXTINF:two,\na.ts\n", "line 3: #EXTINF duration \"two\" is not a number of seconds"),
        ("#EXTM3U\n#EXT-X-STREAM-INF:CODECS=\"mp4a.40.2\"\nv.m3u8\n", "line 2: #EXT-X-STREAM-INF without BANDWIDTH"),
        ("#EXTM3U\n#EXT-X-STREAM-INF:BANDWIDTH=fast\nv.m3u8\n", "line 2: BANDWIDTH \"fast\" is not a non-negative integer"),
        ("#EXTM3U\n#EXT-X-TARGETDURATION:2\n#EXTINF:2,\na.ts\nb.ts\n", "line 5: URI \"b.ts\" without #EXTINF or #EXT-X-STREAM-INF before it"),
        ("#EXTM3U\n#EXT-X-TARGETDURATION:2\n#EXTINF:2,\n", "line 3: #EXTINF without a segment URI after it"),
        ("#EXTM3U\n#EXT-X-STREAM-INF:BANDWIDTH=1\nv.m3u8\n#EXTINF:2,\na.ts\n", "line 5: mixes master playlist tags (#EXT-X-STREAM-INF) with media playlist tags"),
        ("#EXTM3U\n#EXT-X-MAP:URI=\"init.mp4\n", "line 2: attribute URI has an unterminated quoted value"),
        ("#EXTM3U\n", "line 1: lists neither variants (#EXT-X-STREAM-INF) nor segments (#EXTINF)"),
        // Numbers that would overflow (found by fuzz-hls; Fuzz/FailCases/fuzz-hls).
        ("#EXTM3U\n#EXT-X-MEDIA-SEQUENCE:9223372036854775807\n#EXTINF:1,\na.ts\n", "line 4: media sequence numbers run past 9223372036854775807"),
        ("#EXTM3U\n#EXTINF:1,\n#EXT-X-BYTERANGE:9223372036854775807@1\na.ts\n", "line 4: #EXT-X-BYTERANGE ends past byte 9223372036854775807"),
        ("#EXTM3U\n#EXT-X-MAP:URI=\"i.mp4\",BYTERANGE=\"2@9223372036854775807\"\n",
         "line 2: #EXT-X-MAP BYTERANGE \"2@9223372036854775807\" ends past byte 9223372036854775807"),
        ("#EXTM3U\n" + String(repeating: "#EXTINF:1099511627775,\na.ts\n", count: 9), "line 19: the segments last longer than 9223372036854775807 µs"),
    ])
    func aBrokenPlaylistNamesItsLine(text: String, reason: String) {
        let url = "http://h/p.m3u8"
        #expect(throws: MediaError(.corrupt, input: url, reason: "broken playlist, \(reason)")) {
            try HLSPlaylist.parse(text, url: url)
        }
    }

    @Test func encryptedSegmentsAreRefusedClearly() {
        let text = "#EXTM3U\n#EXT-X-TARGETDURATION:2\n#EXT-X-KEY:METHOD=AES-128,URI=\"k\"\n#EXTINF:2,\na.ts\n"
        #expect(throws: MediaError(.unsupported, input: "http://h/p.m3u8", reason: "line 3: encrypted segments (METHOD=AES-128) are not supported")) {
            try HLSPlaylist.parse(text, url: "http://h/p.m3u8")
        }
    }

    @Test func extinfDurationsAreExactDecimals() {
        #expect(HLSPlaylistParser.microseconds("2.005333") == 2_005_333)
        #expect(HLSPlaylistParser.microseconds("10") == 10_000_000)
        #expect(HLSPlaylistParser.microseconds("0.0000005") == 1)
        #expect(HLSPlaylistParser.microseconds(".5") == 500_000)
        #expect(HLSPlaylistParser.microseconds("-1") == nil)
        #expect(HLSPlaylistParser.microseconds("1e3") == nil)
        #expect(HLSPlaylistParser.microseconds("") == nil)
    }

    @Test func hlsURLsAreRecognizedByTheirPath() throws {
        #expect(try InputLocation("http://h/live/master.m3u8").kind == .hls)
        #expect(try InputLocation("https://h/a/INDEX.M3U8?token=x.mp3").kind == .hls)
        #expect(try InputLocation("https://h/a/stream.mp3?list=x.m3u8").kind == .network)
        #expect(try InputLocation("http://h/radio.m3u").kind == .network)
        #expect(try InputLocation("/music/list.m3u8").kind == .file)
    }

    // MARK: Variant selection

    static let ladder = [52_800, 105_600, 211_200]

    @Test func withoutHistoryTheLowestVariantStarts() {
        #expect(HLSVariantSelector(bandwidths: Self.ladder, lastThroughput: nil).current == 0)
    }

    @Test func historyStartsTheHighestVariantThatFitsInFourFifths() {
        #expect(HLSVariantSelector(bandwidths: Self.ladder, lastThroughput: 10_000_000).current == 2)
        // 0.8 × 264 000 = 211 200: fits exactly.
        #expect(HLSVariantSelector(bandwidths: Self.ladder, lastThroughput: 264_000).current == 2)
        #expect(HLSVariantSelector(bandwidths: Self.ladder, lastThroughput: 263_999).current == 1)
        #expect(HLSVariantSelector(bandwidths: Self.ladder, lastThroughput: 40_000).current == 0)
    }

    @Test func aSlowSegmentSwitchesDownAtOnce() {
        var selector = HLSVariantSelector(bandwidths: Self.ladder, lastThroughput: 10_000_000)
        // 1.2 × 211 200 = 253 440 is still enough.
        #expect(selector.record(throughput: 253_440) == nil)
        // Below it: the highest variant fitting in 0.8 × 200 000 = 160 000.
        #expect(selector.record(throughput: 200_000) == 1)
        #expect(selector.current == 1)
        // Nothing fits: the lowest.
        #expect(selector.record(throughput: 20_000) == 0)
        #expect(selector.record(throughput: 20_000) == nil)
    }

    @Test func switchingUpNeedsSustainedHeadroom() {
        var selector = HLSVariantSelector(bandwidths: Self.ladder, lastThroughput: nil)
        // 1.5 × 105 600 = 158 400 for the next variant up.
        #expect(selector.record(throughput: 158_400) == nil)
        #expect(selector.record(throughput: 150_000) == nil)  // the run is broken
        #expect(selector.record(throughput: 200_000) == nil)
        #expect(selector.record(throughput: 200_000) == 1)
        // Two segments with room for the top variant (1.5 × 211 200 = 316 800): straight there.
        var fast = HLSVariantSelector(bandwidths: Self.ladder, lastThroughput: nil)
        #expect(fast.record(throughput: 5_000_000) == nil)
        #expect(fast.record(throughput: 400_000) == 2)
        #expect(fast.record(throughput: 5_000_000) == nil)
    }

    // MARK: History

    @Test func theLastThroughputIsKeptAcrossRunsAndACorruptFileIsIgnored() throws {
        let directory = try TemporaryDirectory("hls-history")
        defer { directory.remove() }
        let history = BitrateHistory(path: directory.file("state/tutti/network.json"))
        #expect(history.load() == nil)
        #expect(history.save(1_234_567.8))
        #expect(history.load() == 1_234_568)
        try Data("{\"throughputBitsPerSecond\": ".utf8).write(to: URL(fileURLWithPath: history.path))
        #expect(history.load() == nil)
        try Data("{\"throughputBitsPerSecond\": -5}".utf8).write(to: URL(fileURLWithPath: history.path))
        #expect(history.load() == nil)
        #expect(BitrateHistory.defaultPath.hasSuffix("/tutti/network.json"))
    }

    // MARK: Segment checks

    @Test func segmentsThatAreNotMPEGTSOrFMP4AreNamed() {
        let ts = [UInt8](repeating: 0x47, count: 1) + [UInt8](repeating: 0, count: 187)
        #expect(HLSSegmentFormat.problem(inMediaSegment: ts + ts, isFragmentedMP4: false) == nil)
        #expect(HLSSegmentFormat.problem(inMediaSegment: ts + [0x00] + ts, isFragmentedMP4: false) == "broken MPEG-TS segment (lost packet sync at byte 188)")
        #expect(HLSSegmentFormat.problem(inMediaSegment: Array("<html>oops</html>".utf8), isFragmentedMP4: false) == "not an MPEG-TS or packed audio segment")
        #expect(HLSSegmentFormat.problem(inMediaSegment: [], isFragmentedMP4: false) == "empty segment")
        let moof: [UInt8] = [0, 0, 0, 8] + Array("moof".utf8), mdat: [UInt8] = [0, 0, 0, 9] + Array("mdat".utf8) + [1]
        #expect(HLSSegmentFormat.problem(inMediaSegment: moof + mdat, isFragmentedMP4: true) == nil)
        #expect(HLSSegmentFormat.problem(inMediaSegment: moof + [0, 0, 0, 99] + Array("mdat".utf8), isFragmentedMP4: true) == "not an fMP4 segment (broken box structure)")
    }
}
