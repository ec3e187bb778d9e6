import Testing
import TuttiCore
@testable import TuttiProtocol

/// The clock bound against the truth: it must hold whatever the paths' asymmetry, which no
/// two-way exchange can see, and it must widen where the estimate is carried without
/// exchanges.
@Suite struct ClockBoundTests {
    /// A path whose two ways differ: `out` and `back` base delays, uniform jitter each way.
    struct Path {
        var offset: Int64 = 734_000_000
        var driftPPM = 60.0
        var out: Int64
        var back: Int64
        var jitter: Int64
        var random = SplitMix64(seed: 3)
        func local(_ t: Int64) -> Int64 { t + offset + Int64((Double(t) * driftPPM / 1e6).rounded()) }
        mutating func exchange(at t: Int64) -> ClockSample {
            let up = out + Int64(random.next() % UInt64(jitter))
            let down = back + Int64(random.next() % UInt64(jitter))
            return ClockSample(clientSend: local(t), serverReceive: t + up, serverSend: t + up + 20_000, clientReceive: local(t + up + 20_000 + down))
        }
    }

    /// Runs exchanges as a speaker makes them (100 a second for 15 s, then 20) for `seconds`,
    /// and checks the bound at every exchange once the estimate can be played by.
    func run(_ path: inout Path, seconds: Int64) -> (estimator: ClockEstimator, worst: Double, uncovered: Int, checked: Int, t: Int64) {
        let estimator = ClockEstimator()
        var t: Int64 = 5_000_000_000
        let end = t + seconds * 1_000_000_000
        var worst = 0.0, uncovered = 0, checked = 0
        let start = t
        while t < end {
            estimator.add(path.exchange(at: t))
            t += t - start < 15_000_000_000 ? 10_000_000 : 50_000_000
            guard let mapping = estimator.mapping, mapping.spanNanoseconds >= 1_000_000_000 else { continue }
            let error = Double(mapping.serverTime(atLocal: path.local(t)) - t)
            worst = max(worst, abs(error))
            checked += 1
            if abs(error) > mapping.bound(atLocal: path.local(t)) { uncovered += 1 }
        }
        return (estimator, worst, uncovered, checked, t)
    }

    /// 400 µs out, 100 µs back: the estimate, which must assume the ways equal, is 150 µs off,
    /// steadily, so its spread says nothing of it. The bound covers it at every exchange, and
    /// is not much more than half the round-trip floor (250 µs).
    @Test func coversTheErrorOfAnAsymmetricPath() {
        var path = Path(out: 400_000, back: 100_000, jitter: 200_000)
        let (estimator, worst, uncovered, checked, _) = run(&path, seconds: 60)
        let mapping = estimator.mapping!
        #expect(checked > 2000)
        #expect(worst > 140_000, "the asymmetry should put the estimate ~150 µs off; worst \(worst)")
        #expect(uncovered == 0, "\(uncovered) of \(checked) exchanges outside the bound")
        #expect(mapping.spreadNanoseconds < 50_000, "spread \(mapping.spreadNanoseconds): a statistic of the fit cannot see the asymmetry")
        #expect(mapping.errorNanoseconds > 250_000 && mapping.errorNanoseconds < 300_000, "bound \(mapping.errorNanoseconds)")
    }

    /// On a symmetric path the estimate is close, and the bound is still half the round-trip
    /// floor: no exchange can tell this path from one whose ways differ.
    @Test func isHalfTheRoundTripFloorOnASymmetricPath() {
        var path = Path(out: 250_000, back: 250_000, jitter: 500_000)
        let (estimator, worst, uncovered, _, _) = run(&path, seconds: 60)
        let bound = estimator.mapping!.errorNanoseconds
        #expect(worst < 20_000, "worst \(worst)")
        #expect(uncovered == 0)
        #expect(bound > 250_000 && bound < 290_000, "bound \(bound)")
    }

    /// Without exchanges (an outage) the estimate is carried at the fitted rate, and the bound
    /// widens by the rate's uncertainty, which holds the true rate: five minutes on, with a
    /// floor of a few microseconds each way, the rate's error is what the bound must cover.
    @Test func widensThroughAnOutage() {
        let driftPPM = -95.0
        var path = Path(driftPPM: driftPPM, out: 3_000, back: 3_000, jitter: 300_000)
        let (estimator, _, uncovered, _, t) = run(&path, seconds: 40)
        let mapping = estimator.mapping!
        #expect(uncovered == 0)
        // server = local + offset + skew (local − reference): the true skew makes up for the drift.
        let trueSkew = (1 / (1 + driftPPM / 1e6)) - 1
        #expect(abs(mapping.skew - trueSkew) <= mapping.rateUncertainty, "rate off by \((mapping.skew - trueSkew) * 1e6) ppm, uncertainty \(mapping.rateUncertainty * 1e6) ppm")
        #expect(mapping.rateUncertainty >= 2e-6 && mapping.rateUncertainty < 20e-6, "rate uncertainty \(mapping.rateUncertainty)")
        for minutes in [1, 5] {
            let later = t + Int64(minutes) * 60_000_000_000
            let error = Double(mapping.serverTime(atLocal: path.local(later)) - later)
            let bound = mapping.bound(atLocal: path.local(later))
            #expect(abs(error) <= bound, "\(minutes) min on: error \(error), bound \(bound)")
            #expect(bound >= mapping.errorNanoseconds + Double(minutes) * 60e9 * 2e-6)
        }
    }

    /// The first fit rests on a second of exchanges and may be tens of ppm off: the bound
    /// allows for it (a bound that trusted it was seen to miss the truth by 15 µs).
    @Test(arguments: [UInt64(1), 2, 3, 4, 5, 6, 7, 8])
    func coversTheFirstSeconds(seed: UInt64) {
        var path = Path(driftPPM: seed % 2 == 0 ? 100 : -100, out: 300_000, back: 300_000, jitter: 1_000_000, random: SplitMix64(seed: seed))
        let (_, _, uncovered, checked, _) = run(&path, seconds: 5)
        #expect(checked > 300)
        #expect(uncovered == 0, "\(uncovered) of \(checked)")
    }
}
