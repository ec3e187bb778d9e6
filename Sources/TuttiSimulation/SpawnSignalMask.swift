import Foundation

/// What a child process starts with: the signal mask of the thread that spawned it, which
/// Foundation's `Process` passes on. Spawned from a test's task, on a Dispatch worker that blocks
/// nearly every signal, a peer (Python, mpd, snapserver) never saw the SIGINT a test sent it and
/// held one of the cooperative pool's two threads for the 10 s to its SIGKILL (three such stops
/// in the real-time phase starved an ncmpcpp test into a timeout), and `tutti` itself was only
/// ever stopped the one way its signal handling then worked, never as a shell starts it.
public enum SpawnSignalMask {
    /// Runs `body` (a spawn) with this thread's signal mask empty, then restores the mask: the
    /// child starts as one started from a shell does. (A thread the spawn starts keeps the empty
    /// mask: Foundation's process manager, on the first `Process.run`. Harmless in the test
    /// runner and the bench, which handle no signal.)
    public static func withNoneBlocked<T>(_ body: () throws -> T) rethrows -> T {
        var none = sigset_t(), previous = sigset_t()
        sigemptyset(&none)
        pthread_sigmask(SIG_SETMASK, &none, &previous)
        defer { pthread_sigmask(SIG_SETMASK, &previous, nil) }
        return try body()
    }
}
