import Synchronization
import TuttiCore

/// A clock that moves only when told to, like swift-nio's EmbeddedEventLoop: tests drive time.
public final class ManualClock: HostClock {
    private let time: Atomic<Int64>

    public init(startingAt start: Int64 = 0) { time = Atomic(start) }

    public func now() -> Int64 { time.load(ordering: .acquiring) }

    public func advance(by nanoseconds: Int64) {
        precondition(nanoseconds >= 0, "a ManualClock never goes backwards")
        time.add(nanoseconds, ordering: .releasing)
    }

    public func set(to reading: Int64) {
        precondition(reading >= now(), "a ManualClock never goes backwards")
        time.store(reading, ordering: .releasing)
    }
}

/// A sleeping clock in simulated time: `sleep(until:)` jumps straight to the deadline.
///
/// A device paced by it runs through minutes of simulated time as fast as the CPU allows,
/// with every computed emission time exactly what the real clock would have produced.
/// Meant for a single pacing thread; other threads may read `now()`.
public final class FreeRunningClock: SleepingClock {
    private let time: Atomic<Int64>

    public init(startingAt start: Int64 = 0) { time = Atomic(start) }

    public func now() -> Int64 { time.load(ordering: .acquiring) }

    public func sleep(until deadline: Int64) {
        var current = time.load(ordering: .relaxed)
        while current < deadline {
            let (exchanged, original) = time.compareExchange(expected: current, desired: deadline, ordering: .acquiringAndReleasing)
            if exchanged { return }
            current = original
        }
    }
}
