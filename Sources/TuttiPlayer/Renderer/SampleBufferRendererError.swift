import TuttiCore
import TuttiMedia

/// Why a `SampleBufferRenderer` refused media.
public enum SampleBufferRendererError: Error, Sendable, CustomStringConvertible, Equatable {
    /// The media starts before the end of media enqueued earlier (since the last flush).
    /// Media must be enqueued in presentation order; to replace media, flush it first.
    case overlapsEnqueuedMedia(presentationTime: MediaTime, enqueuedEnd: MediaTime)
    /// The media could not be converted or decoded.
    case media(MediaError)

    public var description: String {
        switch self {
        case .overlapsEnqueuedMedia(let time, let end):
            "media at \(time.seconds) s overlaps media already enqueued up to \(end.seconds) s; flush before replacing media"
        case .media(let error): error.description
        }
    }
}
