import TuttiCore

/// Single-use 6-digit codes that sign a browser or phone in without typing the 43-character
/// controller token: `tutti ctl pair-controller` or the web UI's "Pair a phone" asks for one,
/// the phone's login page takes it (`House.redeemPairingCode`).
///
/// A code is worth little to a stranger: it lasts 5 minutes, is used once, and ten wrong
/// attempts void every code outstanding, so a guesser has ten tries in a million per code
/// issued. Times come from the house's injected clock.
///
/// Thread-safety: a value, kept by `HouseCore` on the house's loop.
struct ControllerPairing {
    static let validityNanoseconds: Int64 = 300_000_000_000
    /// Codes outstanding at once; asking for another drops the oldest.
    static let maximumOutstanding = 4
    /// Wrong codes tried while any is outstanding before all of them are voided.
    static let maximumFailures = 10

    enum Redemption: Equatable {
        case accepted
        case refused
        /// This attempt was the last one allowed: every outstanding code is void.
        case voided
    }

    private var codes: [(code: String, expires: Int64)] = []
    private var failures = 0

    /// A new code, valid until `now` plus `validityNanoseconds`.
    mutating func issue(now: Int64, using generator: inout some RandomNumberGenerator) -> String {
        prune(now: now)
        var code: String
        repeat {
            code = String(UInt32.random(in: 0..<1_000_000, using: &generator))
            code = String(repeating: "0", count: 6 - code.count) + code
        } while codes.contains(where: { $0.code == code })
        if codes.count == Self.maximumOutstanding { codes.removeFirst() }
        codes.append((code, now + Self.validityNanoseconds))
        return code
    }

    /// Takes `code` if it is outstanding and unexpired; a code is taken once.
    mutating func redeem(_ code: String, now: Int64) -> Redemption {
        prune(now: now)
        let given = code.filter { !$0.isWhitespace && $0 != "-" }
        if let index = codes.firstIndex(where: { $0.code == given }) {
            codes.remove(at: index)
            return .accepted
        }
        guard !codes.isEmpty else { return .refused }
        failures += 1
        guard failures >= Self.maximumFailures else { return .refused }
        codes.removeAll()
        failures = 0
        return .voided
    }

    private mutating func prune(now: Int64) {
        codes.removeAll { $0.expires <= now }
        if codes.isEmpty { failures = 0 }
    }
}
