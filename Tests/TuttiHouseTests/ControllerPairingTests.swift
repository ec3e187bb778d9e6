import Testing
import TuttiCore
@testable import TuttiHouse

/// Pairing codes on the house's clock: six digits, single use, five minutes, and ten wrong
/// tries void every code outstanding.
@Suite struct ControllerPairingTests {
    static let minute: Int64 = 60_000_000_000

    @Test func aCodeIsTakenOnceWithinFiveMinutes() {
        var pairing = ControllerPairing()
        var random = SplitMix64(seed: 1)
        let code = pairing.issue(now: 0, using: &random)
        #expect(code.count == 6 && code.allSatisfy(\.isNumber))
        #expect(pairing.redeem(code, now: 4 * Self.minute) == .accepted)
        #expect(pairing.redeem(code, now: 4 * Self.minute) == .refused, "taken twice")
        let late = pairing.issue(now: 0, using: &random)
        #expect(pairing.redeem(late, now: 5 * Self.minute) == .refused, "taken after five minutes")
        // As a phone's keyboard may type it.
        let spaced = pairing.issue(now: 0, using: &random)
        #expect(pairing.redeem(spaced.prefix(3) + " " + spaced.dropFirst(3), now: 1) == .accepted)
    }

    @Test func tenWrongCodesVoidEveryOutstandingOne() {
        var pairing = ControllerPairing()
        var random = SplitMix64(seed: 2)
        let code = pairing.issue(now: 0, using: &random)
        let wrong = code == "000000" ? "000001" : "000000"
        for _ in 1..<ControllerPairing.maximumFailures { #expect(pairing.redeem(wrong, now: 1) == .refused) }
        #expect(pairing.redeem(wrong, now: 1) == .voided)
        #expect(pairing.redeem(code, now: 2) == .refused, "a code survived ten wrong tries")
        // A new code afterwards works, with a fresh count.
        let next = pairing.issue(now: 3, using: &random)
        for _ in 1..<ControllerPairing.maximumFailures { #expect(pairing.redeem(wrong == next ? "999999" : wrong, now: 4) == .refused) }
        #expect(pairing.redeem(next, now: 5) == .accepted)
        // With no code outstanding, a guess is refused and counts for nothing.
        #expect(pairing.redeem(next, now: 6) == .refused)
    }

    @Test func atMostFourAreOutstandingTheOldestDropped() {
        var pairing = ControllerPairing()
        var random = SplitMix64(seed: 3)
        let codes = (0..<5).map { pairing.issue(now: Int64($0), using: &random) }
        #expect(Set(codes).count == 5)
        #expect(pairing.redeem(codes[0], now: 10) == .refused)
        for code in codes.dropFirst() { #expect(pairing.redeem(code, now: 10) == .accepted) }
    }
}
