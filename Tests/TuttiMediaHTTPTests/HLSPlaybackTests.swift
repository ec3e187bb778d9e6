import Foundation
import Synchronization
import Testing
import TuttiCore
import TuttiMedia
@_spi(Testing) @testable import TuttiMediaHTTP
import TuttiSimulation
import TuttiTestSupport

/// HLS input end to end: real HLS made by the ffmpeg CLI (AAC in MPEG-TS and in fMP4), served
/// by `MediaHTTPServer`, decoded by `AudioFileDecoder` through `HLSByteSource`.
@Suite struct HLSPlaybackTests {
    // MARK: Media

    /// 24 s of stereo 48 kHz, a slow sweep plus a steady tone per channel: never silent, and
    /// every 100 ms has one clear best alignment against the original. Encoded by ffmpeg's AAC
    /// encoder (its fast coder, which keeps this signal within 1e-2 even at 48 kb/s), so the
    /// decoded stream starts with 1024 frames of encoder priming that HLS does not signal.
    struct Fixture: Sendable {
        static let sampleRate = 48000
        static let frames = 24 * 48000
        static let priming = 1024

        let source: [Float]
        /// Request path → bytes: "/ts/master.m3u8", "/ts/v0/index.m3u8", "/ts/v0/seg0.ts", …
        /// (48, 96, 192 kb/s), "/fmp4/…" (64, 192 kb/s), "/fmp4-44k/…" (one 44.1 kHz variant).
        let files: [String: [UInt8]]

        struct Failure: Error, Sendable, CustomStringConvertible { let description: String }
        static let shared: Result<Fixture, Failure> = Result { () throws(Failure) in
            do { return try make() } catch { throw Failure(description: "\(error)") }
        }

        static func signal() -> [Float] {
            var samples = [Float]()
            samples.reserveCapacity(frames * 2)
            for i in 0..<frames {
                let t = Double(i) / Double(sampleRate)
                samples.append(Float(0.3 * sin(2 * .pi * (300 * t + 20 * t * t)) + 0.2 * sin(2 * .pi * 1234.5 * t)))
                samples.append(Float(0.3 * sin(2 * .pi * (500 * t + 15 * t * t) + 1) + 0.2 * sin(2 * .pi * 777.7 * t)))
            }
            return samples
        }

        static func make() throws -> Fixture {
            let directory = try TemporaryDirectory("hls-fixture")
            defer { directory.remove() }
            let source = signal()
            let raw = directory.file("source.f32")
            try source.withUnsafeBytes { try Data($0).write(to: URL(fileURLWithPath: raw)) }
            let input = ["-f", "f32le", "-ar", "\(sampleRate)", "-ac", "2", "-i", raw]
            let hls = ["-f", "hls", "-hls_time", "2", "-hls_playlist_type", "vod", "-master_pl_name", "master.m3u8"]
            try TestMedia.ffmpeg(input + ["-map", "0:a", "-map", "0:a", "-map", "0:a", "-c:a", "aac", "-aac_coder", "fast",
                                          "-b:a:0", "48k", "-b:a:1", "96k", "-b:a:2", "192k"] + hls
                                 + ["-var_stream_map", "a:0 a:1 a:2", "-hls_segment_filename", directory.file("ts/v%v/seg%d.ts"),
                                    directory.file("ts/v%v/index.m3u8")])
            try TestMedia.ffmpeg(input + ["-map", "0:a", "-map", "0:a", "-c:a", "aac", "-aac_coder", "fast",
                                          "-b:a:0", "64k", "-b:a:1", "192k"] + hls
                                 + ["-hls_segment_type", "fmp4", "-hls_fmp4_init_filename", "init.mp4", "-var_stream_map", "a:0 a:1",
                                    "-hls_segment_filename", directory.file("fmp4/v%v/seg%d.m4s"), directory.file("fmp4/v%v/index.m3u8")])
            try TestMedia.ffmpeg(input + ["-t", "2", "-map", "0:a", "-ar", "44100", "-c:a", "aac", "-b:a", "64k"] + hls
                                 + ["-hls_segment_type", "fmp4", "-hls_fmp4_init_filename", "init.mp4", "-var_stream_map", "a:0",
                                    "-hls_segment_filename", directory.file("fmp4-44k/v%v/seg%d.m4s"), directory.file("fmp4-44k/v%v/index.m3u8")])
            var files: [String: [UInt8]] = [:]
            for case let name as String in FileManager.default.enumerator(atPath: directory.path)! where name.contains("/") {
                var isDirectory: ObjCBool = false
                guard FileManager.default.fileExists(atPath: directory.file(name), isDirectory: &isDirectory), !isDirectory.boolValue else { continue }
                files["/" + name] = Array(try Data(contentsOf: URL(fileURLWithPath: directory.file(name))))
            }
            return Fixture(source: source, files: files)
        }
    }

    // MARK: Helpers

    struct Decoded: Sendable {
        var samples: [Float]
        var info: TrackInfo
        var readError: String?
        var events: [HLSByteSource.Event]
        var source: HLSByteSource
        var frameCount: Int { samples.count / 2 }
        var variantChanges: [(from: Int, to: Int, at: Int)] {
            events.compactMap { if case .variantChanged(let from, let to, let at) = $0 { (from.bandwidth, to.bandwidth, at) } else { nil } }
        }
    }

    final class EventLog: Sendable {
        private let list = Mutex<[HLSByteSource.Event]>([])
        func append(_ event: HLSByteSource.Event) { list.withLock { $0.append(event) } }
        var events: [HLSByteSource.Event] { list.withLock { $0 } }
    }

    static func configuration(history: BitrateHistory?) -> HLSByteSource.Configuration {
        var configuration = HLSByteSource.Configuration()
        configuration.history = history
        configuration.retryDelays = [.milliseconds(20), .milliseconds(40)]
        return configuration
    }

    /// Decodes `url` to the end on a thread of its own; `progress` sees the frames decoded so far.
    /// On a timeout it prints what the download and the buffer were doing, the events so far and
    /// `server`'s last requests, then cancels the read the thread is blocked in.
    static func decode(_ url: String, configuration: HLSByteSource.Configuration, server: MediaHTTPServer? = nil,
                       onEvent: (@Sendable (HLSByteSource.Event) -> Void)? = nil,
                       progress: (@Sendable (Int) -> Void)? = nil) async throws -> Decoded {
        let cancellation = InputCancellation()
        let log = EventLog()
        let current = Mutex<(source: HLSByteSource?, frames: Int)>((nil, 0))
        let diagnose: @Sendable () -> Void = {
            let (source, frames) = current.withLock { $0 }
            let requests = server.map { $0.requests.suffix(6).map { "\($0)" } } ?? []
            print("HLS timeout diagnosis: \(url): decoded \(frames) frames; \(source?.diagnosis ?? "no source yet"); "
                  + "events \(log.events); last requests \(requests)")
        }
        return try await onOwnThread("decoding \(url) to its end", timeout: .seconds(180), onTimeout: {
            diagnose()
            cancellation.cancel()
        }) {
            let source = HLSByteSource(url: url, configuration: configuration, client: TestNetwork.client, clock: TestNetwork.clock)
            current.withLock { $0.source = source }
            source.onEvent = { event in
                log.append(event)
                onEvent?(event)
            }
            let decoder = try AudioFileDecoder(path: url, outputChannelCount: 2, byteSource: source, cancellation: cancellation)
            var all: [Float] = []
            var block: [Float] = []
            while try decoder.read(into: &block) > 0 {
                all += block
                current.withLock { $0.frames = all.count / 2 }
                progress?(all.count / 2)
            }
            return Decoded(samples: all, info: decoder.info, readError: decoder.readError, events: log.events, source: source)
        }
    }

    /// The media segments requested, in order: variant index and media sequence number.
    static func segmentRequests(_ server: MediaHTTPServer, under prefix: String) -> [(variant: Int, sequence: Int)] {
        server.requests.compactMap { request in
            guard request.path.hasPrefix(prefix + "/v"), let slash = request.path.lastIndex(of: "/") else { return nil }
            let variant = Int(request.path[request.path.index(request.path.startIndex, offsetBy: prefix.count + 2)..<slash])
            let name = request.path[request.path.index(after: slash)...]
            guard name.hasPrefix("seg"), let dot = name.firstIndex(of: "."), let sequence = Int(name[name.index(name.startIndex, offsetBy: 3)..<dot]),
                  let variant else { return nil }
            return (variant, sequence)
        }
    }

    struct Window {
        var frame: Int
        var lag: Int
        var error: Double
        var level: Double
    }

    /// For windows every 100 ms across the source: the lag (decoded frame − source frame)
    /// within `expectedLag` ± 24 at which the decoded audio matches the source best, the RMS
    /// difference there, and the decoded level. A gap or repeat moves the lag; silence drops the level.
    static func alignment(_ decoded: [Float], _ source: [Float], expectedLag: Int) -> [Window] {
        let window = 1024, step = 4800, search = 24
        var result: [Window] = []
        decoded.withUnsafeBufferPointer { d in
            source.withUnsafeBufferPointer { s in
                var frame = search
                while frame + window + search < source.count / 2 {
                    var best = Window(frame: frame, lag: 0, error: .infinity, level: 0)
                    for lag in (expectedLag - search)...(expectedLag + search) {
                        guard (frame + lag + window) * 2 <= d.count, frame + lag >= 0 else { continue }
                        var sum = 0.0
                        for i in 0..<(window * 2) {
                            let e = Double(d[(frame + lag) * 2 + i] - s[frame * 2 + i])
                            sum += e * e
                        }
                        if sum < best.error { best.lag = lag; best.error = sum }
                    }
                    best.error = (best.error / Double(window * 2)).squareRoot()
                    var level = 0.0
                    let start = (frame + expectedLag) * 2
                    if start + window * 2 <= d.count {
                        for i in 0..<(window * 2) { level += Double(d[start + i] * d[start + i]) }
                    }
                    best.level = (level / Double(window * 2)).squareRoot()
                    result.append(best)
                    frame += step
                }
            }
        }
        return result
    }

    /// Checks that `decoded` is the whole source, continuous, behind its encoder priming.
    static func expectWholeAndContinuous(_ decoded: Decoded, _ fixture: Fixture, sourceLocation: SourceLocation = #_sourceLocation) {
        #expect(decoded.readError == nil, sourceLocation: sourceLocation)
        #expect(abs(decoded.frameCount - (Fixture.frames + Fixture.priming)) < 1024, "\(decoded.frameCount) frames", sourceLocation: sourceLocation)
        let windows = alignment(decoded.samples, fixture.source, expectedLag: Fixture.priming)
        #expect(windows.count > 200, sourceLocation: sourceLocation)
        let misaligned = windows.filter { $0.lag != Fixture.priming }
        #expect(misaligned.count == 0, "lag off at \(misaligned.prefix(5).map { "\(Double($0.frame) / 48000) s: \($0.lag)" })", sourceLocation: sourceLocation)
        let worst = windows.max { $0.error < $1.error }
        #expect((worst?.error ?? 1) < 0.03, "worst match \(String(describing: worst))", sourceLocation: sourceLocation)
        let quiet = windows.filter { $0.level < 0.1 }
        #expect(quiet.count == 0, "silent at \(quiet.prefix(5).map { Double($0.frame) / 48000 }) s", sourceLocation: sourceLocation)
    }

    static func playlistSum(_ fixture: Fixture, _ path: String) throws -> MediaTime {
        guard case .media(let playlist) = try HLSPlaylist.parse(String(decoding: fixture.files[path]!, as: UTF8.self), url: "http://h" + path) else {
            throw Fixture.Failure(description: "\(path) is not a media playlist")
        }
        return playlist.totalDuration
    }

    // MARK: Start

    /// The first media segment comes from the highest variant that fits the throughput
    /// persisted by an earlier session; without one (or with a corrupt file), from the lowest.
    @Test func theStartUsesThePersistedThroughput() async throws {
        let fixture = try Fixture.shared.get()
        let directory = try TemporaryDirectory("hls-start")
        defer { directory.remove() }
        for (label, stored, expected) in [("fast", "10000000", 2), ("none", nil, 0), ("medium", "150000", 1), ("corrupt", "{oops", 0)] {
            let history = BitrateHistory(path: directory.file("\(label)/network.json"))
            if let stored {
                try FileManager.default.createDirectory(atPath: directory.file(label), withIntermediateDirectories: true)
                let json = stored.hasPrefix("{") ? stored : "{\"throughputBitsPerSecond\":\(stored)}"
                try Data(json.utf8).write(to: URL(fileURLWithPath: history.path))
            }
            let server = try await MediaHTTPServer.start(files: fixture.files)
            let url = server.url(for: "/ts/master.m3u8")
            let configuration = Self.configuration(history: history)
            let chosen = try await onOwnThread { () -> Int? in
                let source = HLSByteSource(url: url, configuration: configuration, client: TestNetwork.client, clock: TestNetwork.clock)
                _ = try AudioFileDecoder(path: url, outputChannelCount: 2, byteSource: source)
                return source.currentBandwidth
            }
            try await server.shutdown()
            let first = Self.segmentRequests(server, under: "/ts").first
            #expect(first?.variant == expected && first?.sequence == 0, "\(label): \(server.requests)")
            #expect(chosen != nil, "\(label)")
        }
    }

    // MARK: Switching

    /// Starting on the top variant, a throughput drop after a few segments switches down at
    /// once; when the network recovers it switches up again. The request log shows every
    /// segment once, from the variants the events name, and the decoded audio is the whole
    /// source with one constant offset: no gap, no repeat, no silence.
    @Test func aThroughputDropSwitchesDownWithoutGapOrRepeat() async throws {
        let fixture = try Fixture.shared.get()
        let directory = try TemporaryDirectory("hls-drop")
        defer { directory.remove() }
        let history = BitrateHistory(path: directory.file("network.json"))
        history.save(10_000_000)
        let server = try await MediaHTTPServer.start(files: fixture.files)
        var configuration = Self.configuration(history: history)
        // Little read-ahead, so the drop set by the reader's progress hits segments not yet fetched.
        configuration.forwardBufferDuration = .seconds(4)
        let throttled = Atomic<Bool>(false)
        let decoded = try await Self.decode(server.url(for: "/ts/master.m3u8"), configuration: configuration, server: server, onEvent: { event in
            if case .variantChanged(let from, let to, _) = event, to.bandwidth < from.bandwidth { server.bandwidth = nil }
        }, progress: { frames in
            // 200 kb/s, below 1.2 × the top variant's 211.2 kb/s.
            if frames >= 3 * Fixture.sampleRate, !throttled.exchange(true, ordering: .relaxed) { server.bandwidth = 25_000 }
        })
        try await server.shutdown()

        let changes = decoded.variantChanges
        #expect(changes.count >= 1 && changes.count <= 2, "\(decoded.events)")
        guard let down = changes.first else { return }
        // 0.8 × ~200 kb/s fits the middle variant; a slower measure (a loaded machine) the lowest.
        #expect(down.from == 211_200 && [52_800, 105_600].contains(down.to) && down.at >= 2, "\(changes)")
        if changes.count == 2 { #expect(changes[1].from == down.to && changes[1].to == 211_200, "\(changes)") }
        // Every segment requested once, in order, from the variant in effect.
        let requests = Self.segmentRequests(server, under: "/ts")
        #expect(requests.map(\.sequence) == Array(0...12), "\(requests)")
        let bandwidths = [52_800, 105_600, 211_200]
        for request in requests {
            let inEffect = changes.last { $0.at <= request.sequence }?.to ?? 211_200
            #expect(bandwidths[request.variant] == inEffect, "segment \(request.sequence) from v\(request.variant); \(changes)")
        }
        #expect(decoded.info.duration == (try Self.playlistSum(fixture, "/ts/v2/index.m3u8")))
        #expect(decoded.info.durationIsEstimate == false)
        #expect(decoded.info.bitRate == 211_200)
        Self.expectWholeAndContinuous(decoded, fixture)
        #expect(decoded.source.switchCount == changes.count)
    }

    /// fMP4 VOD decodes to the source; starting low without history, fast segments switch it up,
    /// and the new variant's segments follow under the first init section (they describe the
    /// track alike). The measured throughput is persisted.
    @Test func fragmentedMP4DecodesAndSwitchesUp() async throws {
        let fixture = try Fixture.shared.get()
        let directory = try TemporaryDirectory("hls-fmp4")
        defer { directory.remove() }
        let history = BitrateHistory(path: directory.file("state/network.json"))
        let server = try await MediaHTTPServer.start(files: fixture.files)
        let decoded = try await Self.decode(server.url(for: "/fmp4/master.m3u8"), configuration: Self.configuration(history: history))
        try await server.shutdown()

        #expect(decoded.info.codec == "aac")
        #expect(decoded.info.duration == (try Self.playlistSum(fixture, "/fmp4/v0/index.m3u8")))
        let changes = decoded.variantChanges
        #expect(changes.count == 1 && changes.first?.from == 70_400 && changes.first?.to == 211_200, "\(decoded.events)")
        let requests = Self.segmentRequests(server, under: "/fmp4")
        #expect(requests.map(\.sequence) == Array(0...12), "\(requests)")
        #expect(requests.first?.variant == 0 && requests.last?.variant == 1)
        Self.expectWholeAndContinuous(decoded, fixture)
        #expect((history.load() ?? 0) > 211_200 * 1.5)
    }

    @Test func initSectionsOfOneEncodeMatchAndAnotherSampleRateDoesNot() throws {
        let fixture = try Fixture.shared.get()
        let low = HLSSegmentFormat.signature(ofInitSection: fixture.files["/fmp4/v0/init_0.mp4"]!)
        let high = HLSSegmentFormat.signature(ofInitSection: fixture.files["/fmp4/v1/init_1.mp4"]!)
        let other = HLSSegmentFormat.signature(ofInitSection: fixture.files["/fmp4-44k/v0/init.mp4"]!)
        #expect(low != nil && other != nil)
        #expect(low == high)
        #expect(low != other)
        // The init sections themselves differ (bit rates), so a byte comparison would refuse the switch.
        #expect(fixture.files["/fmp4/v0/init_0.mp4"] != fixture.files["/fmp4/v1/init_1.mp4"])
    }

    // MARK: Live

    /// A live playlist (no ENDLIST) that slides forward is reloaded and followed, segment by
    /// segment, until ENDLIST appears: the result is exactly the VOD stream.
    @Test func aLivePlaylistIsFollowedToItsEnd() async throws {
        let fixture = try Fixture.shared.get()
        let server = try await MediaHTTPServer.start(files: fixture.files)
        guard case .media(let vod) = try HLSPlaylist.parse(String(decoding: fixture.files["/ts/v0/index.m3u8"]!, as: UTF8.self),
                                                            url: server.url(for: "/ts/v0/index.m3u8")) else { return }
        func live(_ sequences: ClosedRange<Int>, ended: Bool = false) -> String {
            var text = "#EXTM3U\n#EXT-X-VERSION:3\n#EXT-X-TARGETDURATION:2\n#EXT-X-MEDIA-SEQUENCE:\(sequences.lowerBound)\n"
            for sequence in sequences {
                text += "#EXTINF:\(Double(vod.segments[sequence].duration.value) / 1e6),\n../ts/v0/seg\(sequence).ts\n"
            }
            return text + (ended ? "#EXT-X-ENDLIST\n" : "")
        }
        server.setFile("/live/index.m3u8", Array(live(0...2).utf8))
        let url = server.url(for: "/live/index.m3u8")
        let configuration = Self.configuration(history: nil)
        async let decoding = Self.decode(url, configuration: configuration)
        func requested(_ sequence: Int) -> Bool { server.requests(for: "/ts/v0/seg\(sequence).ts").contains { $0.status == 200 } }
        do {
            try await waitUntil("segment 2") { requested(2) }
            server.setFile("/live/index.m3u8", Array(live(3...7).utf8))
            try await waitUntil("segment 7") { requested(7) }
        } catch {
            // Leaving the scope awaits `decoding`, which follows the live stream until it ends:
            // end it on this path too, or the test would wait for it forever.
            server.setFile("/live/index.m3u8", Array(live(0...12, ended: true).utf8))
            _ = try? await decoding
            throw error
        }
        server.setFile("/live/index.m3u8", Array(live(6...12, ended: true).utf8))
        let decoded = try await decoding
        let reference = try await Self.decode(server.url(for: "/ts/v0/index.m3u8"), configuration: configuration)
        try await server.shutdown()

        #expect(decoded.source.isLive)
        #expect(decoded.info.duration == nil)
        #expect(decoded.readError == nil)
        #expect(server.requests(for: "/live/index.m3u8").count >= 3)
        #expect(Self.segmentRequests(server, under: "/ts").prefix(13).map(\.sequence) == Array(0...12))
        #expect(decoded.frameCount == reference.frameCount)
        #expect(decoded.samples == reference.samples)
        Self.expectWholeAndContinuous(decoded, fixture)
    }

    // MARK: Failures

    /// A segment that is missing or is not MPEG-TS ends the stream there with an error naming it.
    @Test(arguments: ["missing", "corrupt"])
    func aBadSegmentIsNamed(kind: String) async throws {
        let fixture = try Fixture.shared.get()
        let server = try await MediaHTTPServer.start(files: fixture.files)
        if kind == "missing" {
            server.removeFile("/ts/v0/seg5.ts")
        } else {
            server.setFile("/ts/v0/seg5.ts", Array(String(repeating: "not audio ", count: 2000).utf8))
        }
        let decoded = try await Self.decode(server.url(for: "/ts/v0/index.m3u8"), configuration: Self.configuration(history: nil))
        try await server.shutdown()
        let segment = "segment 5 (\(server.url(for: "/ts/v0/seg5.ts")))"
        let expected = kind == "missing" ? "\(segment): HTTP 404 Not Found" : "\(segment): not an MPEG-TS or packed audio segment"
        #expect(decoded.readError == expected)
        // Everything before it was decoded.
        let five = 5 * 2 * Fixture.sampleRate
        #expect(decoded.frameCount >= five - 2048 && decoded.frameCount <= five + 2048, "\(decoded.frameCount)")
    }

    /// A segment the server fails twice (503) is retried with backoff, reported, and nothing is lost.
    @Test func aFailingSegmentIsRetried() async throws {
        let fixture = try Fixture.shared.get()
        let server = try await MediaHTTPServer.start(files: fixture.files)
        server.failNext(path: "/ts/v0/seg3.ts", count: 2, status: 503)
        let decoded = try await Self.decode(server.url(for: "/ts/v0/index.m3u8"), configuration: Self.configuration(history: nil))
        try await server.shutdown()
        let reason = "segment 3 (\(server.url(for: "/ts/v0/seg3.ts"))): HTTP 503 Service Unavailable"
        #expect(decoded.events == [.retrying(attempt: 1, delay: .milliseconds(20), reason: reason),
                                   .retrying(attempt: 2, delay: .milliseconds(40), reason: reason)])
        #expect(decoded.source.retryCount == 2)
        Self.expectWholeAndContinuous(decoded, fixture)
    }

    /// Cancelling a live stream that waits for its next playlist reload ends the blocked read.
    @Test func cancellingALiveStreamEndsTheRead() async throws {
        let fixture = try Fixture.shared.get()
        let server = try await MediaHTTPServer.start(files: fixture.files)
        var playlist = "#EXTM3U\n#EXT-X-TARGETDURATION:2\n#EXT-X-MEDIA-SEQUENCE:0\n"
        for sequence in 0...2 { playlist += "#EXTINF:2.0,\n/ts/v0/seg\(sequence).ts\n" }
        server.setFile("/live/index.m3u8", Array(playlist.utf8))
        let url = server.url(for: "/live/index.m3u8")
        let cancellation = InputCancellation()
        let decoding = Atomic<Bool>(false)
        let configuration = Self.configuration(history: nil)
        async let result = onOwnThread { () -> (frames: Int, error: String?) in
            let source = HLSByteSource(url: url, configuration: configuration, client: TestNetwork.client, clock: TestNetwork.clock)
            let decoder = try AudioFileDecoder(path: url, outputChannelCount: 2, byteSource: source, cancellation: cancellation)
            var block: [Float] = []
            var frames = 0
            while case let count = try decoder.read(into: &block), count > 0 {
                frames += count
                decoding.store(true, ordering: .relaxed)
            }
            return (frames, decoder.readError)
        }
        do {
            try await waitUntil("decoding the last segment") {
                decoding.load(ordering: .relaxed) && server.requests(for: "/ts/v0/seg2.ts").contains { $0.outcome == .completed }
            }
        } catch {
            // Leaving the scope awaits `result`, whose read of a live stream only ends when
            // cancelled: cancel it on this path too, or the test would wait forever.
            cancellation.cancel()
            _ = try? await result
            throw error
        }
        cancellation.cancel()
        let (frames, error) = try await result
        try await server.shutdown()
        #expect(error == "cancelled")
        #expect(frames <= 3 * 2 * Fixture.sampleRate + 2048)
    }

    /// A plain URL goes through `HLSByteSource`: by its `.m3u8` name, or by its first bytes.
    @Test func aPlainURLIsOpenedAsHLSAndBrokenPlaylistsAreNamed() async throws {
        let server = try await MediaHTTPServer.start(files: [
            "/broken.m3u8": Array("#EXTM3U\n#EXT-X-TARGETDURATION:2\n#EXTINF:soon,\na.ts\n".utf8),
            "/playlist": Array("#EXTM3U\n#EXT-X-STREAM-INF:BANDWIDTH=64000\n".utf8),
        ])
        func openError(_ path: String) async throws -> MediaError? {
            let url = server.url(for: path)
            return try await onOwnThread { () -> MediaError? in
                do { _ = try AudioFileDecoder(path: url, network: TestNetwork.opener); return nil } catch let error as MediaError { return error }
            }
        }
        let broken = try await openError("/broken.m3u8")
        let sniffed = try await openError("/playlist")
        let missing = try await openError("/missing.m3u8")
        try await server.shutdown()
        #expect(broken?.description == "\(server.url(for: "/broken.m3u8")): broken playlist, line 3: #EXTINF duration \"soon\" is not a number of seconds")
        #expect(sniffed?.description == "\(server.url(for: "/playlist")): broken playlist, line 2: #EXT-X-STREAM-INF without a URI after it")
        #expect(missing?.description == "\(server.url(for: "/missing.m3u8")): HTTP 404 Not Found")
        #expect(missing?.kind == .notFound)
    }
}
