import Testing
import TuttiCore
@testable import TuttiProtocol
import TuttiSimulation

@Suite struct LowerEnvelopeTests {
    /// The hull's chord from a quarter of its span before the mean time to a quarter after it
    /// (within the span's middle three quarters), under every point, found the plain way: a monotone chain over every point.
    func referenceEdge(_ points: [(Double, Double)]) -> (slope: Double, intercept: Double) {
        var hull: [(Double, Double)] = []
        for p in points {
            while hull.count >= 2 {
                let a = hull[hull.count - 2], b = hull[hull.count - 1]
                if (b.0 - a.0) * (p.1 - a.1) - (b.1 - a.1) * (p.0 - a.0) <= 0 { hull.removeLast() } else { break }
            }
            hull.append(p)
        }
        let meanX = points.reduce(0) { $0 + $1.0 } / Double(points.count)
        let quarter = (hull[hull.count - 1].0 - hull[0].0) / 4
        let from = max(meanX - quarter, hull[0].0 + quarter / 2), to = min(meanX + quarter, hull[hull.count - 1].0 - quarter / 2)
        var first = 0
        while first < hull.count - 2 && hull[first + 1].0 <= from { first += 1 }
        var last = first + 1
        while last < hull.count - 1 && hull[last].0 < to { last += 1 }
        let a = hull[first], b = hull[last]
        let slope = (b.1 - a.1) / (b.0 - a.0)
        return (slope, points.map { $0.1 - slope * $0.0 }.min()!)
    }

    /// A window sliding over jittered delays, refitted as exchanges come and go: the hull built
    /// from the kept block hulls is the hull of all the points, window after window.
    @Test(arguments: [UInt64(1), 2, 3])
    func blockHullsGiveTheHullOfEveryPoint(seed: UInt64) {
        var random = SplitMix64(seed: seed)
        var all: [(Double, Double)] = []
        for index in 0..<3000 {
            // A slope of 40 ppm, a base delay of 300 µs and up to 2 ms of jitter; some repeats.
            let jitter = index % 17 == 0 ? 0 : Double(random.next() % 2_000_000)
            all.append((Double(index) * 50e6, 300_000 + Double(index) * 50e6 * 40e-6 + jitter))
        }
        var envelope = LowerEnvelope()
        var start = 0
        var end = 1
        var windows = 0
        while end <= all.count {
            let window = Array(all[start..<end])
            envelope.startWindow(firstNumber: start)
            for point in window { envelope.append(x: point.0, y: point.1) }
            if window.count >= 2 {
                let fit = envelope.fit()
                let reference = referenceEdge(window)
                #expect(fit.slope == reference.slope, "window \(start)..<\(end)")
                #expect(abs(fit.intercept - reference.intercept) < 1e-6, "window \(start)..<\(end)")
                windows += 1
            }
            end += Int(random.next() % 9) + 1
            if end - start > 2400 { start += Int(random.next() % 40) }
        }
        #expect(windows > 300)
    }

    /// A young estimate's history: exchanges ten times as dense in its first fiftieth, so the
    /// mean time falls in the span's first eighth. The chord still runs from the vertex at the
    /// end of that eighth (not the one before the mean) to the one a quarter span after the
    /// mean. The floor is a parabola, every point of it a vertex, so each choice has its slope.
    @Test func aDenseStartDoesNotSetTheChordsStart() {
        func floor(_ x: Double) -> Double { 1e-4 * (x - 300) * (x - 300) }
        var points: [(Double, Double)] = (0...1000).map { (Double($0), floor(Double($0))) }
        for index in 0..<9000 { points.append((Double(index) / 450, floor(Double(index) / 450) + 100)) }
        points.sort { $0.0 < $1.0 }
        var envelope = LowerEnvelope()
        envelope.startWindow(firstNumber: 0)
        for point in points { envelope.append(x: point.0, y: point.1) }
        let meanX = points.reduce(0) { $0 + $1.0 } / Double(points.count)
        #expect(meanX < 125, "the mean time \(meanX) s is in the first eighth")
        // From the vertex at the first eighth's end (125 s) to the first at or past the mean
        // plus a quarter span (250 s).
        let to = (meanX + 250).rounded(.up)
        let slope = (floor(to) - floor(125)) / (to - 125)
        let fit = envelope.fit()
        #expect(abs(fit.slope - slope) < 1e-9, "slope \(fit.slope), the chord from 125 s to \(to) s has \(slope); from the mean's vertex it would be \((floor(to) - floor(meanX.rounded(.down))) / (to - meanX.rounded(.down)))")
        #expect(fit.slope == referenceEdge(points).slope)
    }

    /// The line touches the lowest point (it is not raised towards the others), and the slack
    /// (how far the lowest 5 % reach above their mean) comes from one selection; both checked
    /// against sorting every height.
    @Test func interceptAndSlackMatchASort() {
        var random = SplitMix64(seed: 11)
        var envelope = LowerEnvelope()
        envelope.startWindow(firstNumber: 0)
        var points: [(Double, Double)] = []
        for index in 0..<1000 {
            points.append((Double(index) * 1e6, Double(random.next() % 1_000_000)))
            envelope.append(x: points[index].0, y: points[index].1)
        }
        let fit = envelope.fit()
        let edge = referenceEdge(points)
        let heights = points.map { $0.1 - (edge.intercept + edge.slope * $0.0) }.sorted()
        #expect(heights[0] == 0 || abs(heights[0]) < 1e-6, "a point lies on the line")
        let nearMean = heights.prefix(50).reduce(0, +) / 50
        #expect(abs(fit.intercept - edge.intercept) < 1e-6)
        #expect(abs(fit.slack - (heights[50] - nearMean)) < 1e-6)
    }

    /// The way back's points come in the order their requests left, so a reply a later one
    /// overtook is a point out of time order, and one put in late moves the numbers of the
    /// points after it: the hull is still the hull of every point, sorted by time.
    @Test(arguments: [UInt64(1), 2, 3])
    func pointsOutOfTimeOrderAndPutInLateGiveTheHullOfEveryPoint(seed: UInt64) {
        var random = SplitMix64(seed: seed)
        var all: [(Double, Double)] = []
        for index in 0..<3000 {
            // A reply every 2 ms, back after a hold of up to 20 ms: times out of order by up to 20 ms.
            let time = Double(index) * 2e6 + Double(random.next() % 20_000_000)
            all.append((time, 300_000 + time * 40e-6 + Double(random.next() % 2_000_000)))
        }
        var envelope = LowerEnvelope()
        var windows = 0
        // A window growing from the start, refitted after every few points; now and then a
        // point is put in a few places back (as `ClockEstimator.add` puts an overtaken reply).
        var window: [(Double, Double)] = []
        var next = 0
        while next < all.count {
            let count = Int(random.next() % 9) + 1
            for _ in 0..<count where next < all.count {
                if window.count > 10 && random.next() % 4 == 0 {
                    let position = window.count - Int(random.next() % 8) - 1
                    window.insert(all[next], at: position)
                    envelope.invalidate(fromNumber: position)
                } else {
                    window.append(all[next])
                }
                next += 1
            }
            envelope.startWindow(firstNumber: 0)
            for point in window { envelope.append(x: point.0, y: point.1) }
            if window.count >= 2 {
                let fit = envelope.fit()
                let reference = referenceEdge(window.sorted { $0.0 != $1.0 ? $0.0 < $1.0 : $0.1 < $1.1 })
                #expect(fit.slope == reference.slope, "\(window.count) points")
                #expect(abs(fit.intercept - reference.intercept) < 1e-6, "\(window.count) points")
                windows += 1
            }
        }
        #expect(windows > 300)
    }

    /// With few points (a room's first second of exchanges) the slack is never negative: it was
    /// measured at the 5 % rank, below the mean of the eight points that raised the line, and a
    /// room reported a clock error of −8 µs, which the house read as "clock still settling".
    @Test(arguments: [UInt64(1), 2, 3, 4, 5])
    func slackIsNeverNegativeWithFewPoints(seed: UInt64) {
        var random = SplitMix64(seed: seed)
        for count in 2..<160 {
            var envelope = LowerEnvelope()
            envelope.startWindow(firstNumber: 0)
            for index in 0..<count { envelope.append(x: Double(index) * 20e6, y: 100_000 + Double(random.next() % 50_000)) }
            let fit = envelope.fit()
            #expect(fit.slack >= 0, "\(count) points: slack \(fit.slack)")
        }
    }
}
