import NIOCore
import Synchronization

/// How many connections one port of the house holds, and which give way.
///
/// A connection is *unproven* from its accept until it shows it belongs to the household (on the
/// wire port: a speaker's hello or a controller's proof of the token; on HTTP: a request with the
/// token or a session cookie), *trusted* after. Unproven ones are few and short-lived:
/// - at most `maximumUnproven` at once: one more closes the oldest unproven, so a flood of
///   idle sockets can never lock out a controller that proves itself at once (a cap that
///   refused the newcomer would);
/// - each is closed `unprovenTimeoutNanoseconds` after its accept if it has not proved itself.
///
/// Trusted connections are capped at `maximumTrusted`; `trust` refuses one beyond, and the port
/// says so in its protocol's convention.
///
/// Thread-safety: all members may be called from any thread (HTTP's connections live on
/// several event loops).
public final class ConnectionBudget: Sendable {
    public struct Limits: Sendable {
        public var maximumUnproven = 64
        public var maximumTrusted = 256
        public var unprovenTimeoutNanoseconds: Int64 = 10_000_000_000
        public init() {}
    }

    public enum Outcome: Equatable, Sendable {
        /// Trusted now (or already).
        case trusted
        /// Over `maximumTrusted`: refuse it.
        case full
        /// Closed meanwhile (given way to newer ones, or timed out).
        case gone
    }

    public let limits: Limits
    /// The port's log: at most one line per 10 s about the unproven connections it closed.
    private let log: @Sendable (String) -> Void
    private let what: String

    private struct State {
        /// Unproven connections in accept order, each with how to close it. Holding the channel
        /// keeps its identifier from being reused by a newer one while it is listed.
        var unproven: [(channel: any Channel, close: @Sendable (String) -> Void)] = []
        var trusted: Set<ObjectIdentifier> = []
        var closedForTime = 0
        var closedForRoom = 0
        /// Closed since the last line in the log, and when that was.
        var unlogged = 0
        var loggedAt: NIODeadline = .distantPast
    }
    private let state = Mutex(State())

    /// `what` names the port in the log ("the house's port", "HTTP").
    public init(limits: Limits = Limits(), what: String = "this port", log: @escaping @Sendable (String) -> Void = { _ in }) {
        self.limits = limits
        self.what = what
        self.log = log
    }

    /// Counts one unproven connection closed; says so in the log at most every 10 s. Under the
    /// state's lock.
    private func noteClosed(_ state: inout State) -> String? {
        state.unlogged += 1
        let now = NIODeadline.now()
        guard now - state.loggedAt >= .seconds(10) else { return nil }
        defer { state.unlogged = 0; state.loggedAt = now }
        return "\(what): closed \(state.unlogged) connection\(state.unlogged == 1 ? "" : "s") that did not prove they belong to the household "
            + "(\(state.closedForTime + state.closedForRoom) so far; none are served before they prove it)"
    }

    /// A connection was accepted: it is unproven, and closes itself (`close`, given the reason)
    /// when it gives way to a newer one or runs out of time. Call `leave` when it closes.
    public func enter(_ channel: any Channel, close: @escaping @Sendable (String) -> Void) {
        let (evicted, line) = state.withLock { state -> ((@Sendable (String) -> Void)?, String?) in
            state.unproven.append((channel, close))
            guard state.unproven.count > limits.maximumUnproven else { return (nil, nil) }
            state.closedForRoom += 1
            return (state.unproven.removeFirst().close, noteClosed(&state))
        }
        evicted?("more than \(limits.maximumUnproven) connections waiting to prove they belong to the household; the oldest gives way")
        if let line { log(line) }
        channel.eventLoop.scheduleTask(in: .nanoseconds(limits.unprovenTimeoutNanoseconds)) { [self] in
            let (expired, line) = state.withLock { state -> ((@Sendable (String) -> Void)?, String?) in
                guard let index = state.unproven.firstIndex(where: { $0.channel === channel }) else { return (nil, nil) }
                state.closedForTime += 1
                return (state.unproven.remove(at: index).close, noteClosed(&state))
            }
            expired?("not proved to belong to the household within \(limits.unprovenTimeoutNanoseconds / 1_000_000_000) s")
            if let line { log(line) }
        }
    }

    /// The connection proved itself. `evenIfFull`: it proved it is the household's (a
    /// controller's token, an admitted speaker's key), and is let in past the cap, so that a
    /// stranger's speakers waiting to be admitted cannot lock the household out.
    public func trust(_ channel: any Channel, evenIfFull: Bool = false) -> Outcome {
        let id = ObjectIdentifier(channel)
        return state.withLock { state in
            if state.trusted.contains(id) { return .trusted }
            guard let index = state.unproven.firstIndex(where: { $0.channel === channel }) else { return .gone }
            guard evenIfFull || state.trusted.count < limits.maximumTrusted else { return .full }
            state.unproven.remove(at: index)
            state.trusted.insert(id)
            return .trusted
        }
    }

    public func isTrusted(_ channel: any Channel) -> Bool {
        state.withLock { $0.trusted.contains(ObjectIdentifier(channel)) }
    }

    /// The connection closed.
    public func leave(_ channel: any Channel) {
        let id = ObjectIdentifier(channel)
        state.withLock { state in
            state.trusted.remove(id)
            state.unproven.removeAll { $0.channel === channel }
        }
    }

    /// Unproven and trusted connections now, and how many unproven ones were closed so far for
    /// time and to make room (for tests and the metrics).
    public var counts: (unproven: Int, trusted: Int, closedForTime: Int, closedForRoom: Int) {
        state.withLock { ($0.unproven.count, $0.trusted.count, $0.closedForTime, $0.closedForRoom) }
    }
}
