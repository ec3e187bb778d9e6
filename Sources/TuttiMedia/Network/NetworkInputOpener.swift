/// Opens the bytes of a network input for a decoder: an http(s) URL or an HLS playlist.
///
/// Injected by whoever owns the process (the executables, the tests), so that no library code
/// makes an HTTP client or reads a clock of its own. A decoder given none refuses URLs with a
/// one-line error.
public protocol NetworkInputOpener: Sendable {
    /// Opens `url` and waits until its first bytes can be read. `isPlaylist` is true when the
    /// URL names an HLS playlist; otherwise a playlist is still recognized by its first bytes.
    /// The source is registered with `cancellation` before anything blocks, so a stopping
    /// player can abort the open.
    /// - Throws: a one-line `MediaError` naming the URL.
    func open(_ url: String, isPlaylist: Bool, cancellation: InputCancellation?,
              events: (@Sendable (NetworkInputEvent) -> Void)?) throws(MediaError) -> any MediaByteSource
}

/// What a network input's transfer does, for events.
public enum NetworkInputEvent: Sendable, Equatable {
    /// A transfer failed and is retried after `delay` (attempt counts from 1).
    case retrying(attempt: Int, delay: Duration, reason: String)
    /// An internet radio stream announced a new title.
    case title(String)
}
