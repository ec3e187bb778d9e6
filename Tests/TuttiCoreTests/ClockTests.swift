import Testing
@testable import TuttiCore
import TuttiSimulation

@Suite struct ClockTests {
    @Test func skewedClockAppliesOffsetAndDriftExactly() {
        let base = ManualClock(startingAt: 1_000_000_000)
        let skewed = SkewedClock(base: base, offsetNanoseconds: -250_000_000, driftPPM: 100)
        #expect(skewed.now() == 750_000_000)
        base.advance(by: 10_000_000_000)  // 10 s later the clock has gained 1 ms
        #expect(skewed.now() == 1_000_000_000 + 10_000_000_000 - 250_000_000 + 1_000_000)
        // The inverse maps back within a nanosecond.
        for reading in [Int64(0), 123_456_789_012, -5_000_000_000] {
            #expect(abs(skewed.reading(atBase: skewed.baseTime(atReading: reading)) - reading) <= 1)
        }
    }

    @Test func negativeDriftRunsSlow() {
        let base = ManualClock()
        let skewed = SkewedClock(base: base, driftPPM: -37.5, anchor: 0)
        base.advance(by: 1_000_000_000_000)  // 1000 s
        #expect(skewed.now() == 1_000_000_000_000 - 37_500_000)
    }

    @Test func monotonicClockSleepsUntilDeadline() {
        let clock = MonotonicClock()
        let deadline = clock.now() + 5_000_000
        clock.sleep(until: deadline)
        #expect(clock.now() >= deadline)
    }

    @Test func freeRunningClockJumpsToDeadlines() {
        let clock = FreeRunningClock(startingAt: 100)
        clock.sleep(until: 60_000_000_000)
        #expect(clock.now() == 60_000_000_000)
        clock.sleep(until: 5)  // never backwards
        #expect(clock.now() == 60_000_000_000)
    }
}
