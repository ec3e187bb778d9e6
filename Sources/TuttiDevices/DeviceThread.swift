import CThreadName
#if canImport(Glibc)
import Glibc
#endif

/// A joinable OS thread for a device's render or writer loop, optionally at real-time priority.
///
/// Real-time (SCHED_FIFO) needs privileges; without them the thread runs at normal priority.
/// Devices pace themselves by blocking (absolute sleeps or blocking writes), never by spinning,
/// because a spinning FIFO thread starves a small machine.
public final class DeviceThread: @unchecked Sendable {
    private var thread: pthread_t
    private var joined = false
    public let isRealtime: Bool

    private final class Body {
        let name: String
        let run: () -> Void
        init(name: String, _ run: @escaping () -> Void) {
            self.name = name
            self.run = run
        }
    }

    public init(name: String, realtime: Bool, priority: Int32 = 40, _ body: @escaping @Sendable () -> Void) {
        let context = Unmanaged.passRetained(Body(name: name, body)).toOpaque()
        var created = pthread_t()
        var usedRealtime = false
        var status: Int32 = -1
        if realtime {
            var attributes = pthread_attr_t()
            pthread_attr_init(&attributes)
            pthread_attr_setinheritsched(&attributes, Int32(PTHREAD_EXPLICIT_SCHED))
            pthread_attr_setschedpolicy(&attributes, SCHED_FIFO)
            var parameters = sched_param()
            parameters.sched_priority = priority
            pthread_attr_setschedparam(&attributes, &parameters)
            status = pthread_create(&created, &attributes, DeviceThread.entry, context)
            pthread_attr_destroy(&attributes)
            usedRealtime = status == 0
        }
        if status != 0 {
            status = pthread_create(&created, nil, DeviceThread.entry, context)
        }
        precondition(status == 0, "cannot create thread \(name): error \(status)")
        thread = created
        isRealtime = usedRealtime
    }

    private static let entry: @convention(c) (UnsafeMutableRawPointer?) -> UnsafeMutableRawPointer? = { context in
        let body = Unmanaged<Body>.fromOpaque(context!).takeRetainedValue()
        tutti_name_current_thread(body.name)
        body.run()
        return nil
    }

    /// Lets the thread end on its own, never joined: its resources go when it returns. Call
    /// once, instead of `join`.
    public func detach() {
        guard !joined else { return }
        joined = true
        pthread_detach(thread)
    }

    /// Waits for the thread to end. Call once.
    public func join() {
        guard !joined else { return }
        joined = true
        pthread_join(thread, nil)
    }
}
