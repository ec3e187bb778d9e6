#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A source of host time in nanoseconds.
///
/// Every clock in Tutti is one of these and is passed in, never read globally, so tests can
/// substitute a skewed or manually driven clock. Implementations are thread-safe.
public protocol HostClock: Sendable {
    /// The current reading, in nanoseconds of this clock.
    func now() -> Int64
}

/// A clock a thread can wait on: the pacing clock of a device or a scheduler.
public protocol SleepingClock: HostClock {
    /// Returns once `now() >= deadline` (or at once if it already is).
    func sleep(until deadline: Int64)
    /// Whether sleeping on it takes real time (CLOCK_MONOTONIC), so a thread paced by it
    /// deserves real-time priority; a simulated clock returns at once.
    var isRealTime: Bool { get }
}

extension SleepingClock {
    public var isRealTime: Bool { false }
}

/// The machine's CLOCK_MONOTONIC.
public struct MonotonicClock: SleepingClock {
    public init() {}

    public var isRealTime: Bool { true }

    @inlinable
    public func now() -> Int64 {
        var ts = timespec()
        clock_gettime(CLOCK_MONOTONIC, &ts)
        return Int64(ts.tv_sec) * 1_000_000_000 + Int64(ts.tv_nsec)
    }

    /// Absolute-deadline sleep: no drift from repeated relative sleeps, and no allocation.
    public func sleep(until deadline: Int64) {
        var ts = timespec(tv_sec: Int(deadline / 1_000_000_000), tv_nsec: Int(deadline % 1_000_000_000))
        while clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, nil) == EINTR {}
    }
}
