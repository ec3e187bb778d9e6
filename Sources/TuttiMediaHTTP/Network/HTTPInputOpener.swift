import AsyncHTTPClient
import TuttiCore
import TuttiMedia

/// Opens http(s) URLs as progressive downloads (`HTTPByteSource`) and HLS playlists as segment
/// streams (`HLSByteSource`), with one HTTP client and one clock given by the process.
public struct HTTPInputOpener: NetworkInputOpener {
    public var client: HTTPClient
    public var clock: any HostClock
    public var http: HTTPByteSource.Configuration
    public var hls: HLSByteSource.Configuration

    public init(client: HTTPClient, clock: any HostClock, http: HTTPByteSource.Configuration = .init(),
                hls: HLSByteSource.Configuration = .init()) {
        self.client = client
        self.clock = clock
        self.http = http
        self.hls = hls
    }

    /// An opener whose every fetch (URL, redirect, playlist entry) passes `policy`.
    public init(client: HTTPClient, clock: any HostClock, policy: URLPolicy) {
        var http = HTTPByteSource.Configuration()
        http.urlPolicy = policy
        var hls = HLSByteSource.Configuration()
        hls.urlPolicy = policy
        self.init(client: client, clock: clock, http: http, hls: hls)
    }

    public func open(_ url: String, isPlaylist: Bool, cancellation: InputCancellation?,
                     events: (@Sendable (NetworkInputEvent) -> Void)?) throws(MediaError) -> any MediaByteSource {
        if !isPlaylist {
            let source = HTTPByteSource(url: url, configuration: http, client: client, clock: clock)
            source.onEvent = events
            cancellation?.register(source)
            try source.open()
            // An HLS playlist at a URL that does not say so is recognized by its first bytes.
            guard HLSByteSource.isPlaylist(source) else { return source }
            source.cancel()
        }
        let playlist = HLSByteSource(url: url, configuration: hls, client: client, clock: clock)
        // The player knows retries; variant changes are on the source's own events.
        if let events {
            playlist.onEvent = { event in
                if case .retrying(let attempt, let delay, let reason) = event { events(.retrying(attempt: attempt, delay: delay, reason: reason)) }
            }
        }
        cancellation?.register(playlist)
        try playlist.open()
        return playlist
    }
}
