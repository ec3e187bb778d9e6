import Foundation
import Testing
import TuttiMedia
@testable import TuttiMediaHTTP
import TuttiSimulation
import TuttiTestSupport

/// Decoding over HTTP through `HTTPByteSource`, against a real server on loopback that
/// throttles, cuts connections and fails on purpose.
@Suite struct HTTPSourceTests {
    /// Every frame of an input, decoded by Tutti.
    struct Decoded: Sendable {
        var samples: [Float]
        var info: TrackInfo
        var readError: String?
        var retryCount: Int?
    }

    static func decodeAll(_ path: String, seek: Int64? = nil) throws -> Decoded {
        let decoder = try AudioFileDecoder(path: path, outputChannelCount: 2, network: TestNetwork.opener)
        if let seek { try decoder.seek(toFrame: seek) }
        var all: [Float] = []
        var block: [Float] = []
        while try decoder.read(into: &block) > 0 { all += block }
        return Decoded(samples: all, info: decoder.info, readError: decoder.readError,
                       retryCount: (decoder.byteSource as? HTTPByteSource)?.retryCount)
    }

    @Test(arguments: ["flac", "mp3", "m4a", "ogg"])
    func aURLDecodesLikeTheFile(format: String) async throws {
        let directory = try TemporaryDirectory("http-\(format)")
        defer { directory.remove() }
        let file = directory.file("tone.\(format)")
        let codec: [String] = switch format {
        case "mp3": ["-c:a", "libmp3lame"]
        case "m4a": ["-c:a", "aac"]
        case "ogg": ["-c:a", "libvorbis"]
        default: []
        }
        try TestMedia.generateTone(file, seconds: 3, sampleRate: 44100, codecArguments: codec)
        let server = try await MediaHTTPServer.start(files: ["/tone.\(format)": try Data(contentsOf: URL(fileURLWithPath: file))])
        let local = try Self.decodeAll(file).samples
        let remote = try await onOwnThread { try Self.decodeAll(server.url(for: "/tone.\(format)")) }
        try await server.shutdown()
        #expect(remote.info.input == server.url(for: "/tone.\(format)"))
        #expect(remote.info.duration != nil)
        #expect(remote.samples.count == local.count)
        #expect(SignalCheck.maxDifference(remote.samples, local) == 0)
    }

    /// A seek far ahead becomes a range request: the output from there is exact, and the bytes
    /// before it are never downloaded.
    @Test func seekingUsesARangeRequest() async throws {
        let tone = ToneWAV(seconds: 30)
        let server = try await MediaHTTPServer.start(files: ["/long.wav": tone.bytes])
        // Slow enough that the first transfer is far from the seek target when it happens.
        server.bandwidth = 400_000
        let target: Int64 = 20 * 48000
        let samples = try await onOwnThread { try Self.decodeAll(server.url(for: "/long.wav"), seek: target) }.samples
        try await server.shutdown()
        let expected = Array(tone.samples[(Int(target) * 2)...])
        #expect(samples.count == expected.count)
        #expect(SignalCheck.maxDifference(samples, expected) == 0)
        let ranged = server.requests(for: "/long.wav").compactMap(\.range)
        #expect(ranged.contains { $0.hasPrefix("bytes=") && (Int($0.dropFirst(6).prefix { $0 != "-" }) ?? 0) >= Int(target) * 4 }, "\(ranged)")
        #expect(server.totalBodyBytesSent < tone.bytes.count * 6 / 10)
    }

    /// A transfer cut mid-body resumes with a range request where it stopped: nothing lost or
    /// repeated.
    @Test func aCutConnectionIsResumedExactly() async throws {
        let tone = ToneWAV(seconds: 4)
        let server = try await MediaHTTPServer.start(files: ["/cut.wav": tone.bytes])
        server.cutConnection(path: "/cut.wav", afterByte: 300_001)
        let decoded = try await onOwnThread { try Self.decodeAll(server.url(for: "/cut.wav")) }
        try await server.shutdown()
        #expect(decoded.readError == nil)
        #expect(decoded.samples.count == tone.samples.count)
        #expect(decoded.samples.elementsEqual(tone.samples))
        // Resumed from the last byte that reached the client: the cut's reset may discard the
        // last bytes the server wrote, so that is at most where the server stopped.
        let resumedAt = server.requests(for: "/cut.wav").compactMap { $0.range }.compactMap { range -> Int? in
            guard range.hasPrefix("bytes="), range.hasSuffix("-") else { return nil }
            return Int(range.dropFirst(6).dropLast())
        }
        #expect(resumedAt.count == 1 && (1...300_001).contains(resumedAt[0]), "\(server.requests)")
        #expect(decoded.retryCount == 1)
    }

    /// Server errors are retried with backoff; a 404 is final and named.
    @Test func serverErrorsAreRetriedAndNotFoundIsNot() async throws {
        let tone = ToneWAV(seconds: 1)
        let server = try await MediaHTTPServer.start(files: ["/busy.wav": tone.bytes])
        server.failNext(path: "/busy.wav", count: 2, status: 503)
        let decoded = try await onOwnThread { try Self.decodeAll(server.url(for: "/busy.wav")) }
        #expect(decoded.samples.elementsEqual(tone.samples))
        #expect(decoded.retryCount == 2)

        let missing = server.url(for: "/missing.wav")
        let error = try await onOwnThread { () -> MediaError? in
            do { _ = try AudioFileDecoder(path: missing, network: TestNetwork.opener); return nil } catch let error as MediaError { return error }
        }
        try await server.shutdown()
        #expect(error?.kind == .notFound)
        #expect(error?.description == "\(missing): HTTP 404 Not Found")
    }

    /// An unreachable host gives up after the retry budget, with one line naming the URL.
    @Test func anUnreachableURLFailsAfterRetries() async throws {
        // A port nobody listens on: bind, note the port, close.
        let server = try await MediaHTTPServer.start(files: [:])
        let url = server.url(for: "/gone.mp3")
        try await server.shutdown()
        var configuration = HTTPByteSource.Configuration()
        configuration.retryDelays = [.milliseconds(10), .milliseconds(20)]
        let source = HTTPByteSource(url: url, configuration: configuration, client: TestNetwork.client, clock: TestNetwork.clock)
        let events = EventLog()
        source.onEvent = { events.append($0) }
        let error = try await onOwnThread { () -> MediaError? in
            do { try source.open(); return nil } catch let error as MediaError { return error }
        }
        #expect(error?.kind == .network)
        #expect(error?.description.hasPrefix(url + ": ") == true)
        #expect(error?.description.hasSuffix("(after 2 retries)") == true, "\(String(describing: error))")
        #expect(events.events.count == 2)
    }

    @Test func icyTitlesAreSeparatedFromTheAudio() {
        var filter = ICYMetadataFilter(interval: 4)
        let title = Array("StreamTitle='Artist - It's Here';StreamUrl='';".utf8)
        let padded = title + [UInt8](repeating: 0, count: (16 - title.count % 16) % 16)
        let stream: [UInt8] = [1, 2, 3, 4, UInt8(padded.count / 16)] + padded + [5, 6, 7, 8, 0, 9, 10]
        var audio: [UInt8] = []
        var titles: [String] = []
        // Fed one byte at a time: the filter keeps its place across chunk boundaries.
        for byte in stream {
            titles += [byte].withUnsafeBytes { filter.feed($0, audio: &audio) }
        }
        #expect(audio == [1, 2, 3, 4, 5, 6, 7, 8, 9, 10])
        #expect(titles == ["Artist - It's Here"])
    }

    @Test func theCacheMergesSpans() {
        var cache = ByteSpanCache()
        [UInt8](0..<10).withUnsafeBytes { cache.store($0, at: 0) }
        [UInt8](20..<30).withUnsafeBytes { cache.store($0, at: 20) }
        #expect(cache.ranges == [0..<10, 20..<30])
        [UInt8](5..<25).withUnsafeBytes { cache.store($0, at: 5) }
        #expect(cache.ranges == [0..<30])
        var out = [UInt8](repeating: 0, count: 30)
        #expect(out.withUnsafeMutableBytes { cache.copy(from: 0, into: $0) } == 30)
        #expect(out == [UInt8](0..<30))
        #expect(cache.contiguousEnd(from: 12) == 30)
    }
}

final class EventLog: @unchecked Sendable {
    private let lock = NSLock()
    private var list: [HTTPByteSource.Event] = []
    func append(_ event: HTTPByteSource.Event) { lock.withLock { list.append(event) } }
    var events: [HTTPByteSource.Event] { lock.withLock { list } }
}
