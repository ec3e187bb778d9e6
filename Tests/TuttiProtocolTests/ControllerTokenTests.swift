import Foundation
import Testing
import TuttiTestSupport
@testable import TuttiProtocol

/// The controller token: its text form, the wire's challenge proof, HTTP's comparisons and
/// session cookies, and its file.
@Suite struct ControllerTokenTests {
    @Test func textRoundTripsAndRejectsWhatIsNotAToken() {
        let token = ControllerToken.random()
        #expect(token.text.utf8.count == 43 && token.text.allSatisfy { $0.isLetter || $0.isNumber || $0 == "-" || $0 == "_" })
        #expect(ControllerToken(text: token.text) == token)
        #expect(ControllerToken(text: "  \(token.text)\n") == token)
        #expect(ControllerToken.random() != token)
        for bad in ["", "hunter2", String(token.text.dropLast()), token.text + "A", String(token.text.dropLast()) + "=", String(token.text.dropLast()) + "+"] {
            #expect(ControllerToken(text: bad) == nil, "\(bad)")
        }
        // Interpolated into a log line, it says what it is, never the secret.
        #expect("\(token)" == "controller token")
    }

    @Test func aProofAnswersOnlyItsChallengeOnItsChannelUnderItsToken() {
        let token = ControllerToken.random(), other = ControllerToken.random()
        let challenge = ControllerToken.challenge(), another = ControllerToken.challenge()
        let binding = Array(repeating: UInt8(7), count: 32), relayed = Array(repeating: UInt8(8), count: 32)
        #expect(challenge.count == 32 && challenge != another)
        let proof = token.proof(for: challenge, binding: binding)
        #expect(proof.count == 32)
        #expect(token.accepts(proof: proof, for: challenge, binding: binding))
        #expect(!token.accepts(proof: proof, for: another, binding: binding), "a proof replayed on another connection")
        #expect(!token.accepts(proof: proof, for: challenge, binding: relayed), "a proof relayed onto another secure channel")
        #expect(!other.accepts(proof: proof, for: challenge, binding: binding))
        var flipped = proof
        flipped[7] ^= 1
        #expect(!token.accepts(proof: flipped, for: challenge, binding: binding))
        #expect(!token.accepts(proof: Array(proof.prefix(16)), for: challenge, binding: binding))
        #expect(!token.accepts(proof: [], for: challenge, binding: binding))
    }

    @Test func bearerAndSessionCookiesAreCheckedAgainstTheToken() {
        let token = ControllerToken.random(), other = ControllerToken.random()
        #expect(token.matches(text: token.text) && !token.matches(text: other.text) && !token.matches(text: "") && !token.matches(text: "x"))
        let cookie = token.sessionCookie()
        #expect(cookie != token.sessionCookie(), "each sign-in has its own id")
        #expect(token.acceptsSessionCookie(cookie))
        #expect(!other.acceptsSessionCookie(cookie), "a cookie outlives no change of token")
        // A cookie is not the token, nor a proof, and a changed id or MAC is refused.
        #expect(!cookie.contains(token.text))
        let (id, mac) = (cookie.split(separator: ".")[0], cookie.split(separator: ".")[1])
        let forged = String(id.dropLast()) + (id.last == "A" ? "B" : "A") + "." + mac
        #expect(!token.acceptsSessionCookie(forged))
        #expect(!token.acceptsSessionCookie(String(id) + "." + token.text))
        for bad in ["", ".", "a.b", cookie + ".", String(id)] { #expect(!token.acceptsSessionCookie(bad), "\(bad)") }
        // A year after it was issued it is refused; a clock set back a little is forgiven.
        let issued: Int64 = 1_800_000_000
        let dated = token.sessionCookie(issuedAt: issued)
        #expect(token.acceptsSessionCookie(dated, now: issued + ControllerToken.sessionLifetimeSeconds - 1))
        #expect(!token.acceptsSessionCookie(dated, now: issued + ControllerToken.sessionLifetimeSeconds))
        #expect(token.acceptsSessionCookie(dated, now: issued - 60))
        #expect(!token.acceptsSessionCookie(dated, now: issued - 3600), "a cookie from the future")
    }

    @Test func theFileIsMadeOnceReadableByItsOwnerAlone() throws {
        let directory = try TemporaryDirectory("token-file")
        defer { directory.remove() }
        let state = directory.file("a/b/state")
        let (token, created) = try ControllerTokenFile.readOrCreate(in: state)
        #expect(created)
        let path = ControllerTokenFile.path(in: state)
        #expect((try FileManager.default.attributesOfItem(atPath: path)[.posixPermissions] as? Int) == 0o600)
        #expect((try FileManager.default.attributesOfItem(atPath: state)[.posixPermissions] as? Int) == 0o700)
        #expect(!ControllerTokenFile.isExposed(path))
        let again = try ControllerTokenFile.readOrCreate(in: state)
        #expect(again.token == token && !again.created)
        #expect(try ControllerTokenFile.read(path) == token)
        // No file left behind but the token itself.
        #expect(try FileManager.default.contentsOfDirectory(atPath: state) == ["controller-token"])
        try FileManager.default.setAttributes([.posixPermissions: 0o644], ofItemAtPath: path)
        #expect(ControllerTokenFile.isExposed(path))
        try "not a token\n".write(toFile: path, atomically: true, encoding: .utf8)
        #expect(throws: ControllerTokenFile.Failure.self) { try ControllerTokenFile.read(path) }
        let missing = #expect(throws: ControllerTokenFile.Failure.self) { try ControllerTokenFile.read(directory.file("none")) }
        #expect(missing?.description == "cannot read the controller token \(directory.file("none")): No such file or directory")
    }

    /// Houses starting together on one default directory end with one token, whole.
    @Test func housesStartingTogetherAgreeOnOneToken() async throws {
        let directory = try TemporaryDirectory("token-race")
        defer { directory.remove() }
        let state = directory.file("state")
        let tokens = try await withThrowingTaskGroup(of: ControllerToken.self) { group in
            for _ in 0..<16 { group.addTask { try ControllerTokenFile.readOrCreate(in: state).token } }
            return try await group.reduce(into: []) { $0.append($1) }
        }
        #expect(Set(tokens.map(\.text)).count == 1)
        #expect(try ControllerTokenFile.read(ControllerTokenFile.path(in: state)) == tokens[0])
    }

    @Test func theDefaultDirectoryFollowsXDG() {
        #expect(ControllerTokenFile.defaultDirectory(environment: ["HOME": "/home/ann"]) == "/home/ann/.local/state/tutti/house")
        #expect(ControllerTokenFile.defaultDirectory(environment: ["HOME": "/home/ann", "XDG_STATE_HOME": "/var/ann"]) == "/var/ann/tutti/house")
        // XDG says a relative value is to be ignored.
        #expect(ControllerTokenFile.defaultDirectory(environment: ["HOME": "/home/ann", "XDG_STATE_HOME": "rel"]) == "/home/ann/.local/state/tutti/house")
        #expect(ControllerTokenFile.defaultDirectory(environment: [:]) == nil)
    }
}
