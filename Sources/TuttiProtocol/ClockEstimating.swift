/// What a room's clock sync feeds its exchanges to: an estimate of the server clock against the
/// local one, with an error bound. `ClockEstimator` (lower envelopes) is what rooms use; the
/// others exist to be compared with it on the same exchanges (`tutti-bench sweep`).
/// Implementations are not thread-safe.
public protocol ClockEstimating: AnyObject {
    /// Adds an exchange; returns false for one rejected as implausible.
    @discardableResult
    func add(_ sample: ClockSample) -> Bool
    /// The current estimate; `errorNanoseconds` is the bound the room reports.
    var mapping: ClockMapping? { get }
    /// The two ways' floors as last fitted, for aiming exchanges at a timer grid
    /// (`AimedExchanges`); nil where the estimator fits none.
    var floors: ClockFloors? { get }
}

extension ClockEstimating {
    public var floors: ClockFloors? { nil }
}

extension ClockEstimator: ClockEstimating {}

/// The clock estimators a room can run.
public enum ClockEstimatorKind: String, Sendable, CaseIterable, Equatable {
    /// `ClockEstimator`: the lower envelopes of both ways, offset and rate (what ships).
    case envelope
    /// `ClockFilterEstimator`: NTP's clock filter (RFC 5905 §10), the offset of the exchange
    /// with the least delay among the last eight, and a rate from those offsets.
    case ntpFilter = "ntp-filter"
    /// `MedianOffsetEstimator`: Snapcast's method, the median offset of the last 200
    /// exchanges, no rate.
    case median

    public func make() -> any ClockEstimating {
        switch self {
        case .envelope: ClockEstimator()
        case .ntpFilter: ClockFilterEstimator()
        case .median: MedianOffsetEstimator()
        }
    }
}
