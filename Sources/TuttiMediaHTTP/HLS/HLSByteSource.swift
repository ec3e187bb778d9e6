import AsyncHTTPClient
import Synchronization
import TuttiCore
import TuttiMedia

/// An HLS stream (audio in MPEG-TS or fragmented MP4, VOD or live) presented to FFmpeg as ONE
/// continuous byte stream: the MPEG-TS segments one after another, or the fMP4 init section
/// followed by the media segments. Tutti fetches the playlists and segments itself and picks
/// the variant; FFmpeg only demuxes and decodes what it is given.
///
/// - Variants: the start is the highest variant that fits the throughput measured in an earlier
///   session (`BitrateHistory`), the lowest without one; every segment download is measured and
///   `HLSVariantSelector` switches down at once when one arrived too slowly and up after
///   sustained headroom. Only variants with the start variant's `CODECS` are candidates.
/// - Switching is at a segment boundary and exact: the next media sequence number comes from
///   the new variant, so nothing is skipped or repeated. Aligned variants of one encode share
///   the AAC timeline, so MPEG-TS concatenates as one stream. For fMP4, libavformat keeps the
///   first `moov` and skips later ones, so the new variant's media segments follow directly,
///   which is correct only when its init section describes the track identically (codec
///   configuration, timescale, track ID; bit rates may differ). Tutti checks that before
///   switching and drops a variant that does not match (see `HLSSegmentFormat`).
/// - Live playlists (no `EXT-X-ENDLIST`) start three segments from the end and are reloaded
///   about every target duration (half of it when unchanged) while the reader waits.
/// - Downloads run ahead of the reader up to `forwardBufferDuration` of media.
/// - Failures name the resource: a playlist line that is broken, a segment that is missing
///   (HTTP 404), failed after retries, or is not MPEG-TS/fMP4. Retries use `HTTPByteSource`'s
///   policy and are reported as events.
/// - Not seekable.
///
/// Thread-safety: `read` is called by one reading thread and blocks it; all other members may
/// be called from any thread. Callbacks run on the download task; keep them quick. Releasing
/// the source cancels its downloads.
public final class HLSByteSource: PlaylistByteSource, @unchecked Sendable {
    public struct Configuration: Sendable {
        /// Waits before each retry of a failed fetch; their count is the retry budget.
        public var retryDelays: [Duration] = [.milliseconds(250), .milliseconds(500), .seconds(1), .seconds(2), .seconds(4)]
        /// Time allowed from request to response head.
        public var responseTimeout: Duration = .seconds(10)
        /// Media downloaded ahead of the reader before downloading pauses.
        public var forwardBufferDuration: Duration = .seconds(30)
        /// Where the last throughput is read at the start and written after each segment;
        /// nil starts at the lowest variant and remembers nothing.
        public var history: BitrateHistory? = .standard
        public var policy = HLSVariantSelector.Policy()
        /// Downloads smaller than this give no throughput sample: latency, not bandwidth, dominates them.
        public var minimumSampleBytes = 4096
        /// Bytes kept behind the reader, which libavformat may re-read while probing.
        public var behindWindowBytes: Int64 = 1 << 20
        /// Which URLs are fetched: the playlist, its redirects, and every entry it names (`URLPolicy`).
        public var urlPolicy = URLPolicy.open
        public init() {}
    }

    public enum Event: Sendable, Equatable {
        /// A fetch failed and is retried after `delay` (attempt counts from 1); the reason names the resource.
        case retrying(attempt: Int, delay: Duration, reason: String)
        /// Segments from media sequence number `atSequence` on come from `to`.
        case variantChanged(from: HLSVariant, to: HLSVariant, atSequence: Int)
        /// A variant the selector chose cannot continue the stream (its playlist failed, it is not
        /// aligned, or its fMP4 init section differs); it is no longer a candidate.
        case variantRejected(HLSVariant, reason: String)
        /// A live playlist moved past segments before they were fetched (the reader fell behind).
        case skipped(segments: Int)
    }

    public let name: String
    public let url: String
    public let configuration: Configuration
    /// Called on the download task for retries, variant changes and skips; set before `open`.
    public var onEvent: (@Sendable (Event) -> Void)?

    private let buffer: HLSSegmentBuffer
    private let client: HTTPClient
    /// Times segment downloads, for the throughput.
    private let clock: any HostClock
    private let downloader = Mutex<HLSDownloader?>(nil)

    public init(url: String, configuration: Configuration = Configuration(), client: HTTPClient, clock: any HostClock) {
        self.name = url
        self.url = url
        self.configuration = configuration
        self.client = client
        self.clock = clock
        buffer = HLSSegmentBuffer(name: url, behindWindowBytes: configuration.behindWindowBytes)
    }

    deinit { cancel() }

    /// Starts downloading and waits until the playlists are loaded and a variant is chosen.
    /// Calling it again only waits (and throws) the same way. Throws a one-line error naming
    /// the URL: unreachable, HTTP status, broken playlist (with its line), or cancelled.
    public func open() throws(MediaError) {
        downloader.withLock { downloader in
            guard downloader == nil else { return }
            // Off the cooperative pool: the decoder thread blocks until this task brings its bytes.
            let executor = NetworkTaskExecutor(label: "hls")
            let fetcher = HLSFetcher(client: client, retryDelays: configuration.retryDelays, responseTimeout: configuration.responseTimeout,
                                     executor: executor, clock: clock, urlPolicy: configuration.urlPolicy)
            downloader = HLSDownloader(url: url, configuration: configuration, buffer: buffer, fetcher: fetcher, onEvent: onEvent)
            downloader!.start()
        }
        try buffer.waitUntilOpened()
    }

    // MARK: What was chosen

    private var status: HLSDownloader.Status { downloader.withLock { $0?.status.withLock { $0 } } ?? HLSDownloader.Status() }

    /// The variants switching chooses among, ascending by bandwidth; empty when the URL is a media playlist.
    public var variants: [HLSVariant] { status.candidates }
    /// The variant the next segment comes from; nil for a media playlist without a master.
    public var currentVariant: HLSVariant? { status.current }
    /// `BANDWIDTH` of `currentVariant`, bits per second.
    public var currentBandwidth: Int? { status.current?.bandwidth }
    /// Sum of the segment durations of a VOD playlist; nil for live streams.
    public var duration: MediaTime? { status.duration }
    /// Whether the playlist had no `EXT-X-ENDLIST` when opened.
    public var isLive: Bool { status.isLive }
    /// Smoothed throughput of the segment downloads so far, bits per second.
    public var throughput: Double? { status.throughput }
    /// Variant switches made so far.
    public var switchCount: Int { status.switches }
    /// Retries made so far.
    public var retryCount: Int { status.retries }

    // MARK: MediaByteSource

    /// Known once the last segment of a finished playlist is here.
    public var length: Int64? { buffer.length }
    public var isSeekable: Bool { false }

    public func read(into buffer: UnsafeMutableRawBufferPointer, at offset: Int64) throws(MediaError) -> Int {
        if downloader.withLock({ $0 == nil }) { try open() }
        return try self.buffer.read(into: buffer, at: offset)
    }

    /// Bytes ahead of `offset` and, as the arrival rate, the smoothed segment download throughput
    /// (the rate at which more arrives whenever downloading is not paused by a full buffer).
    public func bufferingState(from offset: Int64) -> ByteBufferingState {
        buffer.bufferingState(from: offset)
    }

    /// What the download and the buffer are doing, in one line: for a test that timed out.
    @_spi(Testing) public var diagnosis: String {
        let status = self.status
        return "downloader: \(status.phase), variant \(status.current.map { "\($0.bandwidth)" } ?? "none"), "
            + "\(status.switches) switches, \(status.retries) retries; buffer: \(buffer.diagnosis)"
    }

    public func cancel() {
        downloader.withLock { $0?.cancel() }
        buffer.cancel()
    }

    // MARK: Recognizing HLS

    /// Whether the bytes of `source` are an HLS playlist (`#EXTM3U` with `#EXT-X-` tags), for a
    /// URL whose name does not say so. Reads at most 4 KB from the start; never throws.
    public static func isPlaylist(_ source: any MediaByteSource) -> Bool {
        var prefix: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 4096)
        while prefix.count < 4096 {
            let wanted = prefix.count < 7 ? 7 - prefix.count : 4096 - prefix.count
            guard let got = try? chunk.withUnsafeMutableBytes({ raw throws(MediaError) in
                try source.read(into: UnsafeMutableRawBufferPointer(rebasing: raw[0..<wanted]), at: Int64(prefix.count))
            }), got > 0 else { break }
            prefix += chunk[0..<got]
            if prefix.count >= 7, !prefix.starts(with: Array("#EXTM3U".utf8)) { return false }
        }
        return prefix.starts(with: Array("#EXTM3U".utf8)) && String(decoding: prefix, as: UTF8.self).contains("#EXT-X-")
    }
}
