import TuttiMedia

/// Decides whether playback is likely to keep up, AVPlayer-style: an item is likely to keep up
/// when everything it needs is here, or when what is buffered ahead covers the time it will
/// take the rest to arrive at the measured rate, with a margin.
///
/// With `a` seconds buffered ahead, `d` seconds still to download and media arriving at `r`
/// seconds per second, the download ends after `d / r` s while playback needs `a + d` s of it:
/// no stall if `a ≥ d (1/r − 1)`. The rate is discounted by `rateMargin` for its noise.
struct BufferingEvaluation {
    /// Decoded audio ahead of the playhead, in seconds.
    var ringSeconds: Double
    var ringIsFull: Bool
    /// The producer has decoded the whole queue into the ring.
    var producerFinished: Bool
    /// The current item's bytes from the decoder's read position; nil for a local input.
    var network: ByteBufferingState?
    /// Bytes per second of media of the current item (its bit rate), when known.
    var bytesPerMediaSecond: Double?
    /// Bytes of the current item not yet downloaded beyond the contiguous bytes ahead; nil when
    /// unknown (a live stream).
    var bytesToDownload: Int64?

    static let rateMargin = 1.2
    /// Seconds buffered ahead that make playback likely to keep up whatever the arrival rate.
    static let plentyAhead = 10.0

    /// - Parameter minimumAhead: seconds that must be buffered before (re)starting.
    func evaluate(minimumAhead: Double) -> (state: ItemBufferingState, waitingReason: WaitingReason?) {
        guard let network else {
            // Local input: decoding is far faster than real time; the preroll is all it needs.
            let likely = producerFinished || ringIsFull || ringSeconds >= minimumAhead
            return (ItemBufferingState(isPlaybackLikelyToKeepUp: likely, isPlaybackBufferFull: producerFinished || ringIsFull,
                                       isPlaybackBufferEmpty: ringSeconds == 0 && !producerFinished, bufferedAheadSeconds: ringSeconds),
                    likely ? nil : .evaluatingBufferingRate)
        }
        let byteRate = bytesPerMediaSecond ?? 0
        let networkSeconds = byteRate > 0 ? Double(network.bytesAhead) / byteRate : 0
        let ahead = ringSeconds + networkSeconds
        let arrival = network.arrivalBytesPerSecond.flatMap { byteRate > 0 ? $0 / byteRate : nil }
        let complete = producerFinished || network.isComplete
        var likely: Bool
        var reason: WaitingReason?
        if complete {
            likely = producerFinished || ringIsFull || ahead >= minimumAhead
            reason = likely ? nil : .evaluatingBufferingRate
        } else if ahead >= Self.plentyAhead {
            // Far more than a stall could eat before the rate is even known.
            likely = true
        } else if let arrival, arrival > 0 {
            let toDownload = bytesToDownload.map { Double($0) / byteRate } ?? .infinity
            let effective = arrival / Self.rateMargin
            let needed = effective >= 1 ? 0 : toDownload * (1 / effective - 1)
            likely = ahead >= minimumAhead && ahead >= needed
            reason = likely ? nil : .toMinimizeStalls
        } else {
            likely = false
            reason = network.arrivalBytesPerSecond == nil ? .evaluatingBufferingRate : .toMinimizeStalls
        }
        let state = ItemBufferingState(
            isPlaybackLikelyToKeepUp: likely,
            isPlaybackBufferFull: complete && (ringIsFull || producerFinished),
            isPlaybackBufferEmpty: ahead == 0,
            bufferedAheadSeconds: ahead,
            arrivalRate: arrival,
            loadedTimeRanges: byteRate > 0 ? network.loadedRanges.map { Double($0.lowerBound) / byteRate...Double($0.upperBound) / byteRate } : [])
        return (state, likely ? nil : reason)
    }
}
