/// Why a `RenderSynchronizer` refused a request.
public enum RenderSynchronizerError: Error, Sendable, Equatable, CustomStringConvertible {
    /// Only rates 0 (paused) and 1 (playing) are supported: the renderers do not time-stretch.
    case unsupportedRate(Double)
    /// The synchronizer has been stopped.
    case stopped

    public var description: String {
        switch self {
        case .unsupportedRate(let rate): "rate \(rate) is not supported: use 0 (paused) or 1 (playing)"
        case .stopped: "the synchronizer has been stopped"
        }
    }
}
