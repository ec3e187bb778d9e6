import Testing
import TuttiMedia
@testable import TuttiPlayer

/// "Likely to keep up", decided from numbers alone: the rule the player's automatic waiting
/// follows, tested without a network or a clock (the network tests check that the player acts
/// on it).
@Suite struct BufferingEvaluationTests {
    /// 176,400 bytes per second of media: 44.1 kHz stereo 16-bit.
    static let byteRate = 176_400.0

    /// A network item with `ahead` seconds downloaded past the decoder, `rest` seconds still to
    /// come, arriving at `rate` media seconds per second of wall time.
    static func network(ahead: Double, rest: Double?, rate: Double?, ring: Double = 0) -> BufferingEvaluation {
        BufferingEvaluation(
            ringSeconds: ring, ringIsFull: false, producerFinished: false,
            network: ByteBufferingState(bytesAhead: Int64(ahead * byteRate), isComplete: rest == 0,
                                        arrivalBytesPerSecond: rate.map { $0 * byteRate }, loadedRanges: []),
            bytesPerMediaSecond: byteRate, bytesToDownload: rest.map { Int64($0 * byteRate) })
    }

    /// A link slower than the music: with `a` ahead and `d` to come at `r`, playing through
    /// needs `a ≥ d (1/r' − 1)` where `r' = r / 1.2`.
    @Test func aSlowLinkWaitsUntilTheBufferCoversTheRest() {
        // r = 0.75 → r' = 0.625 → 1/r' − 1 = 0.6; d = 3 s → needs 1.8 s ahead.
        let short = Self.network(ahead: 1.7, rest: 3, rate: 0.75).evaluate(minimumAhead: 1)
        #expect(!short.state.isPlaybackLikelyToKeepUp)
        #expect(short.waitingReason == .toMinimizeStalls)
        let enough = Self.network(ahead: 1.9, rest: 3, rate: 0.75).evaluate(minimumAhead: 1)
        #expect(enough.state.isPlaybackLikelyToKeepUp)
        #expect(enough.waitingReason == nil)
        // Decoded audio in the ring counts as ahead too.
        #expect(Self.network(ahead: 0.9, rest: 3, rate: 0.75, ring: 1.0).evaluate(minimumAhead: 1).state.isPlaybackLikelyToKeepUp)
    }

    /// A link faster than the music (after the margin) only needs the minimum ahead.
    @Test func aFastLinkNeedsOnlyTheMinimum() {
        #expect(!Self.network(ahead: 0.5, rest: 20, rate: 2).evaluate(minimumAhead: 1).state.isPlaybackLikelyToKeepUp)
        #expect(Self.network(ahead: 1.0, rest: 20, rate: 2).evaluate(minimumAhead: 1).state.isPlaybackLikelyToKeepUp)
        // 1.1× is under the 1.2 margin: it is treated as slower than the music.
        #expect(!Self.network(ahead: 1.0, rest: 20, rate: 1.1).evaluate(minimumAhead: 1).state.isPlaybackLikelyToKeepUp)
    }

    /// Nothing arriving (a stalled server) is never likely to keep up short of plenty ahead;
    /// no rate yet means the player is still evaluating.
    @Test func aStalledOrUnmeasuredLinkWaits() {
        let stalled = Self.network(ahead: 0.5, rest: 2, rate: 0).evaluate(minimumAhead: 1)
        #expect(!stalled.state.isPlaybackLikelyToKeepUp)
        #expect(stalled.waitingReason == .toMinimizeStalls)
        let unmeasured = Self.network(ahead: 0.5, rest: 2, rate: nil).evaluate(minimumAhead: 1)
        #expect(unmeasured.waitingReason == .evaluatingBufferingRate)
        #expect(Self.network(ahead: BufferingEvaluation.plentyAhead, rest: 600, rate: 0).evaluate(minimumAhead: 1).state.isPlaybackLikelyToKeepUp)
    }

    /// Everything downloaded: likely as soon as the minimum is ahead (or it is all there is).
    @Test func aCompleteDownloadOnlyNeedsTheMinimum() {
        let complete = Self.network(ahead: 1.2, rest: 0, rate: 0.1).evaluate(minimumAhead: 1)
        #expect(complete.state.isPlaybackLikelyToKeepUp)
        #expect(complete.state.isPlaybackBufferFull == false)
        #expect(!Self.network(ahead: 0.5, rest: 0, rate: 0.1).evaluate(minimumAhead: 1).state.isPlaybackLikelyToKeepUp)
    }

    /// A local input needs only its preroll decoded.
    @Test func aLocalInputNeedsThePreroll() {
        let local = BufferingEvaluation(ringSeconds: 0.05, ringIsFull: false, producerFinished: false,
                                        network: nil, bytesPerMediaSecond: nil, bytesToDownload: nil)
        #expect(!local.evaluate(minimumAhead: 0.1).state.isPlaybackLikelyToKeepUp)
        var ready = local
        ready.ringSeconds = 0.1
        #expect(ready.evaluate(minimumAhead: 0.1).state.isPlaybackLikelyToKeepUp)
        var finished = local
        finished.producerFinished = true
        #expect(finished.evaluate(minimumAhead: 0.1).state.isPlaybackLikelyToKeepUp)
    }
}
