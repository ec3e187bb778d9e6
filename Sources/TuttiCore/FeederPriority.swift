#if canImport(Glibc)
import Glibc
#endif

/// The CPU share of the threads that keep a sound card's ring filled: a decoder ahead of a
/// device, a renderer's feeder.
///
/// A device thread runs at real-time priority when it may, but what it plays was decoded by an
/// ordinary thread, and on a busy machine (a build, a browser, a backup) that thread can wait
/// its turn longer than the few hundred milliseconds a player holds right after it starts.
/// Raising its nice value to −10 gives it about nine times the share of a normal thread when it
/// has work, without real-time scheduling: a decode burst can never starve the rest of the
/// machine, it just goes first.
///
/// Needs CAP_SYS_NICE or an RLIMIT_NICE that allows it; without them the thread keeps its
/// normal priority and playback works as before.
public enum FeederPriority {
    /// The nice value asked for.
    public static let niceValue: Int32 = -10

    /// Raises the calling thread's priority (Linux nice values are per thread). Returns whether
    /// it was raised.
    @discardableResult
    public static func raiseCurrentThread() -> Bool {
        #if os(Linux)
        // `who` 0 is the calling thread, not the whole process.
        return setpriority(__priority_which_t(PRIO_PROCESS.rawValue), 0, niceValue) == 0
        #else
        return false
        #endif
    }

    /// Puts the calling thread back to the normal nice value 0 (always permitted).
    public static func restoreCurrentThread() {
        #if os(Linux)
        _ = setpriority(__priority_which_t(PRIO_PROCESS.rawValue), 0, 0)
        #endif
    }
}
