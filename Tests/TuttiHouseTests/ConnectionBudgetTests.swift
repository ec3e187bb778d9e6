import NIOCore
import NIOEmbedded
import Synchronization
import Testing
import TuttiHouse

/// A port's connections: the unproven give way oldest first and time out, the trusted are
/// capped, and a closed one frees its place.
@Suite struct ConnectionBudgetTests {
    final class Closes: Sendable {
        let reasons = Mutex<[String: String]>([:])
        func closer(_ name: String) -> @Sendable (String) -> Void { { reason in self.reasons.withLock { $0[name] = reason } } }
        var all: [String: String] { reasons.withLock { $0 } }
    }

    @Test func theOldestUnprovenGivesWayAndTheTrustedAreCapped() throws {
        var limits = ConnectionBudget.Limits()
        limits.maximumUnproven = 2
        limits.maximumTrusted = 1
        let lines = Mutex<[String]>([])
        let budget = ConnectionBudget(limits: limits, what: "test port") { line in lines.withLock { $0.append(line) } }
        let loop = EmbeddedEventLoop()
        let (a, b, c, d) = (EmbeddedChannel(loop: loop), EmbeddedChannel(loop: loop), EmbeddedChannel(loop: loop), EmbeddedChannel(loop: loop))
        let closes = Closes()
        budget.enter(a, close: closes.closer("a"))
        budget.enter(b, close: closes.closer("b"))
        #expect(closes.all.isEmpty)
        budget.enter(c, close: closes.closer("c"))
        // A third unproven one: the oldest, a, gives way, and the log says so once.
        #expect(closes.all.keys.sorted() == ["a"] && closes.all["a"]?.contains("the oldest gives way") == true)
        #expect(budget.trust(a) == .gone)
        #expect(lines.withLock { $0 } == ["test port: closed 1 connection that did not prove they belong to the household (1 so far; none are served before they prove it)"])
        // b proves itself; c would be a second trusted one.
        #expect(budget.trust(b) == .trusted && budget.trust(b) == .trusted)
        #expect(budget.trust(c) == .full)
        #expect(budget.counts.unproven == 1 && budget.counts.trusted == 1)
        // b leaves: c may be trusted now; a newcomer d is unproven.
        budget.leave(b)
        #expect(budget.trust(c) == .trusted)
        budget.enter(d, close: closes.closer("d"))
        #expect(budget.isTrusted(c) && !budget.isTrusted(d))
        // Ten seconds on: d, still unproven, is closed; c, trusted, is not.
        loop.advanceTime(by: .seconds(10))
        #expect(closes.all["d"]?.contains("not proved to belong to the household within 10 s") == true)
        #expect(closes.all["c"] == nil)
        #expect(budget.counts.closedForTime == 1 && budget.counts.closedForRoom == 1)
    }

    @Test func aConnectionThatProvesItselfInTimeIsNotClosed() throws {
        let budget = ConnectionBudget()
        let loop = EmbeddedEventLoop()
        let channel = EmbeddedChannel(loop: loop)
        let closes = Closes()
        budget.enter(channel, close: closes.closer("x"))
        loop.advanceTime(by: .seconds(9))
        #expect(budget.trust(channel) == .trusted)
        loop.advanceTime(by: .seconds(5))
        #expect(closes.all.isEmpty)
    }
}
