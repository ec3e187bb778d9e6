import Dispatch
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// SIGINT and SIGTERM, whichever thread the kernel hands them to.
///
/// Not `DispatchSource.makeSignalSource` with the signal ignored, as before: on Linux that source
/// reads the signal through a signalfd, which sees a signal only while it stays pending, and a
/// thread that does not block it (NIO's, started before the source) may be handed it, where the
/// ignored disposition drops it. A process spawned with every signal blocked (as Foundation's
/// `Process` spawns from a Dispatch thread) always stopped; `tutti server` started with nothing
/// blocked (a shell, systemd) ignored its SIGINT in about one start of two, until the SIGKILL.
/// Here a handler runs in whichever thread receives the signal and writes its number to a pipe
/// (`write` is async-signal-safe); a queue of its own reads the pipe.
///
/// The first signal is the polite one: `first()` returns and the command stops in order. One a
/// second or more later ends the process at once (exit status 128 + the signal), for a stop
/// that hangs.
public enum TerminationSignals {
    /// The signals' pipe: made, and the handlers installed, on first use.
    private static let pipe: (read: Int32, write: Int32) = {
        var ends: [Int32] = [-1, -1]
        // Fails only when the process is out of descriptors at its start: nothing could run.
        precondition(Glibc.pipe(&ends) == 0, "cannot make the signal pipe: \(String(cString: strerror(errno)))")
        // Not inherited by what the process spawns; and a handler never waits on a full pipe
        // (a flood of signals unread is as good as one).
        for end in ends { _ = fcntl(end, F_SETFD, FD_CLOEXEC) }
        _ = fcntl(ends[1], F_SETFL, fcntl(ends[1], F_GETFL) | O_NONBLOCK)
        return (ends[0], ends[1])
    }()

    private struct State {
        /// The first signal, and when it came (CLOCK_MONOTONIC, ns).
        var first: Int32?
        var firstAt: Int64 = 0
        var waiting: [CheckedContinuation<Int32, Never>] = []
        var handlers: [@Sendable (Int32) -> Void] = []
    }
    private static let state = Mutex(State())

    /// Installs the handlers (once; later calls do nothing). From then on SIGINT and SIGTERM no
    /// longer end the process by themselves.
    public static func install() {
        _ = installed
    }

    private static let installed: Bool = {
        // The pipe exists before a handler can write to it.
        _ = pipe
        // A queue of its own, so its blocking read holds no thread another task waits for (and
        // no Foundation: `tutti-speaker` maps none).
        DispatchQueue(label: "tutti.signals").async {
            // This thread takes the signals whatever the others block: Dispatch's workers
            // block them, and `tutti-speaker` starts with the mask of the worker that exec'd it.
            var signals = sigset_t()
            sigemptyset(&signals)
            sigaddset(&signals, SIGINT)
            sigaddset(&signals, SIGTERM)
            pthread_sigmask(SIG_UNBLOCK, &signals, nil)
            var number: UInt8 = 0
            while true {
                let count = read(pipe.read, &number, 1)
                if count == 1 { deliver(Int32(number)); continue }
                if count < 0 && errno == EINTR { continue }
                // The pipe is gone (never closed, so never seen): the signals go back to their
                // default action rather than into a pipe nobody reads.
                signal(SIGINT, SIG_DFL)
                signal(SIGTERM, SIG_DFL)
                return
            }
        }
        for number in [SIGINT, SIGTERM] {
            var action = sigaction()
            action.__sigaction_handler.sa_handler = { number in
                // Async-signal-safe only: one write of the number, errno kept for the thread it interrupted.
                let saved = errno
                var byte = UInt8(truncatingIfNeeded: number)
                _ = write(TerminationSignals.pipe.write, &byte, 1)
                errno = saved
            }
            sigemptyset(&action.sa_mask)
            action.sa_flags = SA_RESTART
            sigaction(number, &action, nil)
        }
        return true
    }()

    private static func deliver(_ number: Int32) {
        let now = monotonicNanoseconds()
        let (waiting, handlers, isFirst, sinceFirst) = state.withLock { state -> ([CheckedContinuation<Int32, Never>], [@Sendable (Int32) -> Void], Bool, Int64) in
            let isFirst = state.first == nil
            if isFirst { (state.first, state.firstAt) = (number, now) }
            let waiting = state.waiting
            state.waiting = []
            return (waiting, state.handlers, isFirst, now - state.firstAt)
        }
        guard isFirst else {
            // One keypress can bring two (a terminal signals the whole process group, and a
            // wrapper may pass it on): only one a second or more after the first means "now".
            guard sinceFirst >= 1_000_000_000 else { return }
            let command = CommandLine.arguments.first?.split(separator: "/").last.map(String.init) ?? "tutti"
            Terminal.standardError("\(command): \(name(number)) again: stopping at once\n")
            _exit(128 + number)
        }
        for continuation in waiting { continuation.resume(returning: number) }
        for handler in handlers { handler(number) }
    }

    /// The first SIGINT or SIGTERM, once it has come (at once if it already has).
    public static func first() async -> Int32 {
        install()
        return await withCheckedContinuation { continuation in
            let already = state.withLock { state -> Int32? in
                if let first = state.first { return first }
                state.waiting.append(continuation)
                return nil
            }
            if let already { continuation.resume(returning: already) }
        }
    }

    /// Calls `handler` (on the signals' thread) when the first SIGINT or SIGTERM comes.
    public static func onFirst(_ handler: @escaping @Sendable (Int32) -> Void) {
        install()
        let already = state.withLock { state -> Int32? in
            if let first = state.first { return first }
            state.handlers.append(handler)
            return nil
        }
        if let already { handler(already) }
    }

    /// The first SIGINT or SIGTERM, if one has come.
    public static var received: Int32? { state.withLock { $0.first } }

    private static func monotonicNanoseconds() -> Int64 {
        var now = timespec()
        clock_gettime(CLOCK_MONOTONIC, &now)
        return Int64(now.tv_sec) * 1_000_000_000 + Int64(now.tv_nsec)
    }

    /// "SIGINT" or "SIGTERM".
    public static func name(_ number: Int32) -> String { number == SIGINT ? "SIGINT" : number == SIGTERM ? "SIGTERM" : "signal \(number)" }
}

/// Returns when the process gets SIGINT or SIGTERM; returns the signal's name.
@discardableResult
public func waitForTermination() async -> String {
    TerminationSignals.name(await TerminationSignals.first())
}
