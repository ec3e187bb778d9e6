import Dispatch
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// Returns when the process gets SIGINT or SIGTERM.
public func waitForTermination() async {
    signal(SIGINT, SIG_IGN)
    signal(SIGTERM, SIG_IGN)
    await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
        let once = OnceFlag()
        let sources = [SIGINT, SIGTERM].map { DispatchSource.makeSignalSource(signal: $0, queue: .global()) }
        for source in sources {
            source.setEventHandler {
                if once.claim() {
                    for s in sources { s.cancel() }
                    continuation.resume()
                }
            }
            source.resume()
        }
    }
}

/// True for the first caller only.
final class OnceFlag: Sendable {
    private let done = Atomic<Bool>(false)
    func claim() -> Bool { !done.exchange(true, ordering: .acquiringAndReleasing) }
}
