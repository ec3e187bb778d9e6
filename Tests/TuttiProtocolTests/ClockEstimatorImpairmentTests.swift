import Foundation
import Testing
import TuttiCore
@testable import TuttiProtocol
import TuttiSimulation

/// The estimator under the home-network models of `NetworkModel`, exchange by exchange, against
/// the truth: a speaker clock offset and drifting, a server clock that is true time.
@Suite struct ClockEstimatorImpairmentTests {
    struct Path {
        var model: NetworkModel
        var offset: Int64 = 123_456_789
        var driftPPM = 80.0
        var random: SplitMix64
        func local(_ t: Int64) -> Int64 { t + offset + Int64((Double(t) * driftPPM / 1e6).rounded()) }
        mutating func exchange(at t: Int64) -> ClockSample {
            let up = model.toHouse.delay(elapsed: t, phase: 0, random: &random)
            let serverReceive = t + up
            let serverSend = serverReceive + 20_000
            let down = model.toRoom.delay(elapsed: serverSend, phase: 777_777, random: &random)
            return ClockSample(clientSend: local(t), serverReceive: serverReceive, serverSend: serverSend, clientReceive: local(serverSend + down))
        }
    }

    /// Worst true error after `settle` seconds, and the fraction of exchanges whose error
    /// exceeded the reported bound.
    func run(_ model: NetworkModel, seconds: Int = 90, seed: UInt64 = 1) -> (worst: Double, overBound: Double, trace: [String]) {
        // A LAN's floor, 50 µs each way, so that the bound (at least that) is a test of something.
        var path = Path(model: model.withBaseDelay(50_000), random: SplitMix64(seed: seed))
        let estimator = ClockEstimator()
        var t: Int64 = 1_000_000_000
        var worst = 0.0, over = 0, counted = 0
        var trace: [String] = []
        for index in 0..<(50 + seconds * 20) {
            estimator.add(path.exchange(at: t))
            t += index < 50 ? 20_000_000 : 50_000_000
            guard index >= 50 + 9 * 20, let mapping = estimator.mapping else { continue }
            let error = Double(mapping.serverTime(atLocal: path.local(t)) - t)
            worst = max(worst, abs(error))
            counted += 1
            if abs(error) > mapping.bound(atLocal: path.local(t)) { over += 1 }
            if index % 100 == 0 { trace.append("t \(t / 1_000_000_000) s: " + " error \(Int(error / 1000)) µs, bound \(Int(mapping.errorNanoseconds / 1000)) µs, skew \(String(format: "%.1f", mapping.skew * 1e6)) ppm") }
        }
        return (worst, Double(over) / Double(max(1, counted)), trace)
    }

    /// Heavy tails and power save reorder replies (one sent later arrives first), which once
    /// broke the hulls' time order and sent the rate to its ±1000 ppm clamp (errors of 90 ms);
    /// a route change once tilted the envelopes. After ten seconds, the estimate stays within
    /// 40 µs of the truth (55 µs on the asymmetric path, where the hull's chord across the
    /// window's middle half, ten seconds in, was 50.5 µs off and the single edge it replaced under
    /// 40: the chord is 1.5–3.5× closer on real paths, docs/MULTIROOM.md) and its bound covers it
    /// in 99 % of exchanges.
    @Test(arguments: ["pareto", "power-save", "asymmetric", "floor-step", "one-way-step", "burst-queueing"])
    func staysNearTheTruth(model name: String) {
        let (worst, over, trace) = run(NetworkModel.named(name)!)
        print("\(name): worst \(worst / 1000) µs, over bound \(over * 100) %")
        #expect(worst < (name == "asymmetric" ? 55_000 : 40_000), "\(trace.joined(separator: "\n"))")
        #expect(over < 0.01, "\(trace.joined(separator: "\n"))")
    }
}

/// A route change on one way only: monotonic clocks do not step, so the offset carries on and
/// the step is kept as the paths' asymmetry; when the route changes back, the asymmetry goes.
@Suite struct ClockEstimatorRouteChangeTests {
    @Test(arguments: [UInt64(1), 2, 3])
    func aOneWayStepIsAsymmetryNotAClockStep(seed: UInt64) {
        var model = NetworkModel.oneWayStep.withBaseDelay(50_000)
        // Out at 20 s, back at 60 s (the model itself steps once).
        model.toRoom.floorStep = nil
        var path = ClockEstimatorImpairmentTests.Path(model: model, random: SplitMix64(seed: seed))
        let estimator = ClockEstimator()
        var t: Int64 = 1_000_000_000
        var worst = 0.0, worstTwoWay = 0.0, over = 0, counted = 0
        var asymmetryDuring = 0.0
        for index in 0..<(100 * 20) {
            let stepped = t >= 20_000_000_000 && t < 60_000_000_000
            path.model.toRoom.baseDelayNanoseconds = stepped ? 4_050_000 : 50_000
            estimator.add(path.exchange(at: t))
            t += 50_000_000
            guard index >= 10 * 20, let mapping = estimator.mapping else { continue }
            let error = Double(mapping.serverTime(atLocal: path.local(t)) - t)
            worst = max(worst, abs(error))
            // What the lines alone (taking every step for an offset) would say.
            worstTwoWay = max(worstTwoWay, abs(error + estimator.asymmetryNanoseconds))
            counted += 1
            if abs(error) > mapping.bound(atLocal: path.local(t)) { over += 1 }
            if t > 50_000_000_000 && t < 60_000_000_000 { asymmetryDuring = estimator.asymmetryNanoseconds }
        }
        print("seed \(seed): worst \(worst / 1000) µs, taking steps for offsets \(worstTwoWay / 1000) µs, asymmetry while stepped \(asymmetryDuring / 1000) µs, after \(estimator.asymmetryNanoseconds / 1000) µs, floor steps \(estimator.floorSteps)")
        #expect(estimator.floorSteps == 2)
        // The way to the room 4 ms longer: t4 − t3 reads 4 ms more, the lines' offset 2 ms less.
        #expect(abs(asymmetryDuring + 2_000_000) < 50_000)
        #expect(abs(estimator.asymmetryNanoseconds) < 50_000)
        #expect(worstTwoWay > 1_900_000, "the test's step did not show in the lines")
        #expect(worst < 40_000)
        #expect(over == 0, "\(over) of \(counted) estimates outside their bound")
    }
}
