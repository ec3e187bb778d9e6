import Testing
import TuttiCore
import TuttiProtocol

/// Exchanges aimed at a relay's timer grid, on a path simulated exactly: each way a floor of
/// 1 ms, up to 0.2 ms of jitter, then held to the relay's next 4 ms tick; the room's clock 3 ms
/// ahead of the house's; the house holding a reply to the time asked (within its limit).
@Suite struct AimedExchangesTests {
    struct Outcome {
        var nearFloorBoth = 0
        var nearFloorOutward = 0
        var nearFloorBackward = 0
        var lowestExcess: Int64 = .max
        /// Where in the grid's period the unaimed requests left.
        var unaimedPhases: [Int64] = []
        var aims: AimedExchanges
    }

    /// `gridUntil`: from this exchange on, the relay delivers at once, after up to 2 ms of jitter.
    func run(aimed: Bool, exchanges: Int = 3_000, gridUntil: Int = .max, seed: UInt64) -> Outcome {
        var configuration = AimedExchanges.Configuration()
        if !aimed { configuration.unaimedEvery = 1 }
        var aims = AimedExchanges(configuration: configuration)
        var random = SplitMix64(seed: seed), path = SplitMix64(seed: seed ^ 0x55)
        let period: Int64 = 4_000_000, gridPhase: Int64 = 1_111_111, base: Int64 = 1_000_000, offset: Int64 = 3_000_000
        var gridOn = true
        func tick(after time: Int64) -> Int64 {
            gridOn ? ((time - gridPhase + period - 1) / period) * period + gridPhase : time + Int64(path.next() % 2_000_000)
        }
        // Local = house + offset: t2 − t1 ≥ base − offset, t4 − t3 ≥ base + offset.
        let floors = ClockFloors(reference: 0, outwardIntercept: Double(base - offset), outwardSlope: 0,
                                 backwardIntercept: Double(base + offset), backwardSlope: 0)
        var outcome = Outcome(aims: aims)
        var now: Int64 = 10_000_000_000
        for sequence in 0..<UInt32(exchanges) {
            gridOn = Int(sequence) < gridUntil
            let earliest = now + 4_000_000 + Int64(random.next() % 2_000_000)
            let plan = aims.plan(sequence: sequence, earliest: earliest, floors: floors, random: &random)
            #expect(plan.send >= earliest && plan.send < earliest + period + 100_000)
            if plan.outwardTick == nil && aims.outwardGrid.period != nil { outcome.unaimedPhases.append((plan.send - gridPhase) % period) }
            let t1 = plan.send
            let t2 = tick(after: t1 - offset + base + Int64(path.next() % 200_000))
            let t3 = plan.replyAt > t2 && plan.replyAt - t2 <= 25_000_000 ? plan.replyAt : t2 + Int64(path.next() % 20_000_000)
            let t4 = tick(after: t3 + base + Int64(path.next() % 200_000)) + offset
            aims.observe(sequence: sequence, sample: ClockSample(clientSend: t1, serverReceive: t2, serverSend: t3, clientReceive: t4))
            let outward = (t2 - t1) - (base - offset), backward = (t4 - t3) - (base + offset)
            outcome.lowestExcess = min(outcome.lowestExcess, outward, backward)
            if outward < 40_000 { outcome.nearFloorOutward += 1 }
            if backward < 40_000 { outcome.nearFloorBackward += 1 }
            if outward < 40_000 && backward < 40_000 { outcome.nearFloorBoth += 1 }
            now = plan.send
        }
        outcome.aims = aims
        return outcome
    }

    @Test func aimedExchangesMeetTheFloorFarMoreOftenThanRandomOnes() {
        let aimed = run(aimed: true, seed: 11), random = run(aimed: false, seed: 11)
        print("within 40 µs of the floor, of 3000: aimed out \(aimed.nearFloorOutward) back \(aimed.nearFloorBackward) both \(aimed.nearFloorBoth); random out \(random.nearFloorOutward) back \(random.nearFloorBackward) both \(random.nearFloorBoth)")
        #expect(aimed.aims.outwardGrid.period == 4_000_000 && aimed.aims.backwardGrid.period == 4_000_000)
        #expect(aimed.lowestExcess >= 0, "a delay under the path's floor: the simulation is wrong")
        // Random: about 3000 × 0.04² / (2 × 0.2 × 4) ≈ 3 each way.
        #expect(aimed.nearFloorOutward >= 100 && aimed.nearFloorBackward >= 100)
        #expect(aimed.nearFloorOutward >= 10 * max(1, random.nearFloorOutward) && aimed.nearFloorBackward >= 10 * max(1, random.nearFloorBackward))
        // The unaimed requests leave at every phase of the grid (each quarter of the period).
        let quarters = Set(aimed.unaimedPhases.map { $0 * 4 / 4_000_000 })
        #expect(aimed.unaimedPhases.count > 500 && quarters == [0, 1, 2, 3], "unaimed requests in quarters \(quarters.sorted())")
        // Steered to about one aim in ten making its tick, each way.
        for (made, sent) in [(aimed.aims.outwardMade, aimed.aims.outwardAimed), (aimed.aims.backwardMade, aimed.aims.backwardAimed)] {
            #expect(sent > 1_500)
            let share = Double(made) / Double(sent)
            #expect(share > 0.04 && share < 0.25, "\(made) of \(sent) aims made their tick")
        }
    }

    /// A relay whose grid goes away (its timers made exact): the aims must not keep the
    /// lattice alive by arriving on it themselves.
    @Test func aGridThatGoesAwayIsDropped() {
        let outcome = run(aimed: true, exchanges: 3_000, gridUntil: 1_500, seed: 12)
        #expect(outcome.aims.outwardGrid.period == nil && outcome.aims.backwardGrid.period == nil,
                "a grid kept: \(outcome.aims.outwardGrid.period.map(String.init) ?? "none") / \(outcome.aims.backwardGrid.period.map(String.init) ?? "none")")
        #expect(!outcome.aims.isAiming)
    }

    @Test func withoutFloorsOrAGridNothingIsAimed() {
        var aims = AimedExchanges()
        var random = SplitMix64(seed: 1)
        let plan = aims.plan(sequence: 0, earliest: 5_000, floors: nil, random: &random)
        #expect(plan == AimedExchanges.Plan(send: 5_000))
        let floors = ClockFloors(reference: 0, outwardIntercept: 1e6, outwardSlope: 0, backwardIntercept: 1e6, backwardSlope: 0)
        let noGrid = aims.plan(sequence: 1, earliest: 6_000, floors: floors, random: &random)
        #expect(noGrid == AimedExchanges.Plan(send: 6_000), "aimed with no grid found")
    }
}
