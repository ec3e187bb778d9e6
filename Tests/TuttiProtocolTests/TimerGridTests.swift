import Testing
import TuttiCore
import TuttiProtocol

/// Finding and following the timer grid a path delivers on, from arrival stamps alone.
@Suite struct TimerGridTests {
    /// Arrivals on a lattice of `period` (phase `phase`), in a clock `drift` off the relay's, each
    /// stamped up to `lateness` late, one every 3–7 ms (a random tick each time).
    func latticeStamps(period: Int64, phase: Int64, drift: Double, lateness: Int64, count: Int, seed: UInt64) -> [Int64] {
        var random = SplitMix64(seed: seed)
        var relayTime: Int64 = 1_000_000_000
        var stamps: [Int64] = []
        for _ in 0..<count {
            relayTime += 3_000_000 + Int64(random.next() % 4_000_000)
            let tick = (relayTime / period + 1) * period + phase
            let late = lateness > 0 ? Int64(random.next() % UInt64(lateness)) : 0
            stamps.append(Int64((Double(tick) * (1 + drift)).rounded()) + 7_777_777 + late)
        }
        return stamps
    }

    @Test func aFourMillisecondGridIsFoundAndFollowedThroughDrift() {
        var grid = TimerGrid()
        let stamps = latticeStamps(period: 4_000_000, phase: 1_234_567, drift: 100e-6, lateness: 30_000, count: 3_000, seed: 3)
        var worst: Int64 = 0
        for (index, stamp) in stamps.enumerated() {
            if index >= 200 {
                // Before it is added: where the tracked lattice expects it (≤ 30 µs late).
                let point = try! #require(grid.nearestPoint(to: stamp))
                worst = max(worst, abs(stamp - point))
            }
            grid.add(stamp)
        }
        #expect(grid.period == 4_000_000)
        // 15 s at 100 ppm moved the lattice 1.5 ms against the nominal period: followed.
        #expect(worst < 60_000, "a stamp \(worst / 1000) µs from the tracked lattice")
        let last = stamps.last!
        let next = try! #require(grid.point(atOrAfter: last + 1))
        #expect(next > last && next - last <= 4_000_000 + 1_000)
    }

    @Test func theShortestGridIsNotTakenForALongerOne() {
        var grid = TimerGrid()
        for stamp in latticeStamps(period: 1_000_000, phase: 300_000, drift: -50e-6, lateness: 20_000, count: 500, seed: 4) { grid.add(stamp) }
        #expect(grid.period == 1_000_000, "a 1 ms grid taken for \(grid.period.map(String.init) ?? "none")")
        var five = TimerGrid()
        for stamp in latticeStamps(period: 5_000_000, phase: 0, drift: 20e-6, lateness: 20_000, count: 500, seed: 5) { five.add(stamp) }
        #expect(five.period == 5_000_000)
    }

    @Test func arrivalsAtRandomShowNoGridAndAGridLostIsDropped() {
        var grid = TimerGrid()
        var random = SplitMix64(seed: 9)
        var time: Int64 = 0
        for _ in 0..<2_000 {
            time += 1_000_000 + Int64(random.next() % 9_000_000)
            grid.add(time)
            #expect(grid.period == nil)
        }
        for stamp in latticeStamps(period: 4_000_000, phase: 0, drift: 0, lateness: 10_000, count: 200, seed: 6) { grid.add(stamp + time) }
        #expect(grid.period == 4_000_000)
        let base = time + 10_000_000_000
        for index in 0..<200 { grid.add(base + Int64(index) * 4_000_000 + Int64(random.next() % 4_000_000)) }
        #expect(grid.period == nil, "a grid kept after its arrivals stopped lying on it")
    }
}
