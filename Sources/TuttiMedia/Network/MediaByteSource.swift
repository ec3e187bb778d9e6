import TuttiCore

/// Random-access bytes of one input that arrive over time: what FFmpeg demuxes when the input is
/// not a local file (HTTP progressive download, HLS segments).
///
/// Thread-safety: `read` is called by one reading thread (the decoder's) and may block it until
/// the bytes arrive; every other member may be called from any thread.
public protocol MediaByteSource: AnyObject, Sendable {
    /// The input as the user named it (a URL), for messages.
    var name: String { get }
    /// Total bytes, once known.
    var length: Int64? { get }
    /// Whether reading at an arbitrary offset is possible (a range request, say).
    var isSeekable: Bool { get }

    /// Copies bytes starting at `offset` into `buffer`, blocking until at least one is available.
    /// Returns 0 at the end of the input; throws when the input failed for good (after retries)
    /// or the source was cancelled.
    func read(into buffer: UnsafeMutableRawBufferPointer, at offset: Int64) throws(MediaError) -> Int

    /// What is buffered from `offset` on, for buffering decisions.
    func bufferingState(from offset: Int64) -> ByteBufferingState

    /// Ends all transfers; a blocked `read` throws.
    func cancel()
}

/// How much of an input is here, ahead of a read position, and how fast more arrives.
public struct ByteBufferingState: Sendable, Equatable {
    /// Contiguous bytes available from the position on.
    public var bytesAhead: Int64
    /// True when everything from the position to the end of the input is here.
    public var isComplete: Bool
    /// Recent arrival rate, bytes per second of wall time; nil until measurable.
    public var arrivalBytesPerSecond: Double?
    /// The byte ranges held, in order.
    public var loadedRanges: [Range<Int64>]

    public init(bytesAhead: Int64, isComplete: Bool, arrivalBytesPerSecond: Double?, loadedRanges: [Range<Int64>]) {
        self.bytesAhead = bytesAhead
        self.isComplete = isComplete
        self.arrivalBytesPerSecond = arrivalBytesPerSecond
        self.loadedRanges = loadedRanges
    }
}

/// A byte source that plays a playlist of segments (HLS): it must be opened (playlists loaded,
/// a variant chosen) before its bytes are demuxed, and it knows the stream's duration and
/// bandwidth better than the first bytes do.
public protocol PlaylistByteSource: MediaByteSource {
    /// Loads the playlists and waits until the first segment can be read; calling it again
    /// only waits. Throws a one-line error naming the URL.
    func open() throws(MediaError)
    /// Sum of the segment durations of a VOD playlist; nil for live streams.
    var duration: MediaTime? { get }
    /// The advertised bandwidth of the variant being played, bits per second.
    var currentBandwidth: Int? { get }
}
