import Foundation
import Testing
import TuttiProtocol
import TuttiSimulation
import TuttiTestSupport

/// `tutti ctl` against a real house: it proves the house's controller token, read from
/// `--token-file`, `TUTTI_TOKEN` or the default state directory, and is refused with one line
/// saying where the token is when it has none or a wrong one. The token is made once, 0600, and
/// kept across restarts.
@Suite(.serialized) struct ControllerTokenTests {
    /// An environment with only what a user's shell has, and the state directories of this test.
    static func environment(xdg: String, token: String? = nil) -> [String: String] {
        var environment = ["PATH": ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin", "HOME": xdg + "/home", "XDG_STATE_HOME": xdg]
        environment["TUTTI_TOKEN"] = token
        return environment
    }

    static func ctl(_ arguments: [String], environment: [String: String]) throws -> TuttiProcess.Result {
        let result = try TestMedia.execute(TuttiProcess.executable, ["ctl"] + arguments, environment: environment, timeout: 60)
        return TuttiProcess.Result(status: result.status, standardOutput: String(decoding: result.standardOutput, as: UTF8.self),
                                   standardError: String(decoding: result.standardError, as: UTF8.self))
    }

    static func server(_ arguments: [String], in directory: TemporaryDirectory, log: String, environment: [String: String]) throws -> (ChildProcess, Int) {
        let server = try ChildProcess(name: "server", arguments: ["server", "--listen", "127.0.0.1:0", "--http", "off", "--mpd", "off", "--snapcast", "off",
                                                                  "--snapcast-control", "off", "--announce", "off"] + arguments,
                                      standardError: directory.file(log), environment: environment)
        let port = Int(try server.waitForLine(containing: "listening on").split(separator: ":").last!.split(separator: " ").first!)!
        return (server, port)
    }

    @Test(.timeLimit(.minutes(2)))
    func ctlProvesTheHousesToken() throws {
        let directory = try TemporaryDirectory("controller-token")
        defer { directory.preserveLogs(as: "controller-token"); directory.remove() }
        let state = directory.file("state"), xdg = directory.file("xdg")
        let environment = Self.environment(xdg: xdg)
        var (server, port) = try Self.server(["--state-dir", state], in: directory, log: "server.log", environment: environment)
        defer { server.interrupt() }
        let file = state + "/controller-token"
        let attributes = try FileManager.default.attributesOfItem(atPath: file)
        #expect((attributes[.posixPermissions] as? Int) == 0o600, "\(attributes)")
        let token = try ControllerTokenFile.read(file)
        let log = try String(contentsOfFile: directory.file("server.log"), encoding: .utf8)
        #expect(log.contains("made the controller token \(file) (readable by you alone)"), "\(log)")
        #expect(!log.contains(token.text), "the server's log shows the token")

        let address = ["--server", "127.0.0.1:\(port)"]
        // From the file, and from the environment.
        let byFile = try Self.ctl(address + ["--token-file", file, "status", "--json"], environment: environment)
        #expect(byFile.status == 0 && byFile.standardOutput.contains("\"state\""), "\(byFile)")
        let byVariable = try Self.ctl(address + ["status"], environment: Self.environment(xdg: xdg, token: token.text))
        #expect(byVariable.status == 0, "\(byVariable)")
        // A wrong token: refused by the house, which says where its token is kept (not its
        // path: the refusal goes to a stranger too).
        let wrong = try Self.ctl(address + ["status"], environment: Self.environment(xdg: xdg, token: ControllerToken.random().text))
        #expect(wrong.status == 2, "\(wrong)")
        #expect(wrong.standardError == "tutti ctl: the server refused: the controller token does not match this house's (it is the file controller-token "
                + "in the house's state directory; give it to tutti ctl with --token-file FILE or TUTTI_TOKEN)\n", "\(wrong.standardError)")
        // None at all (this house keeps its token in its state directory, not the default one).
        let none = try Self.ctl(address + ["status"], environment: environment)
        #expect(none.status == 2 && none.standardError.hasPrefix("tutti ctl: no controller token: give --token-file FILE or TUTTI_TOKEN"), "\(none)")
        let garbage = try Self.ctl(address + ["status"], environment: Self.environment(xdg: xdg, token: "hunter2"))
        #expect(garbage.status == 2 && garbage.standardError == "tutti ctl: TUTTI_TOKEN is not a controller token (43 characters of base64url)\n", "\(garbage)")
        // An empty TUTTI_TOKEN is no token given: ctl looks on, as for none.
        let empty = try Self.ctl(address + ["status"], environment: Self.environment(xdg: xdg, token: ""))
        #expect(empty.status == 2 && empty.standardError.hasPrefix("tutti ctl: no controller token: give --token-file FILE or TUTTI_TOKEN"), "\(empty)")
        // The refusals are in the house's log, without the token.
        let refusals = try String(contentsOfFile: directory.file("server.log"), encoding: .utf8)
        #expect(refusals.contains("the controller token does not match this house's"), "\(refusals)")

        // Restarted, the house keeps its token: the same file still controls it.
        #expect(server.interrupt() == 0)
        (server, port) = try Self.server(["--state-dir", state], in: directory, log: "server-again.log", environment: environment)
        #expect(try ControllerTokenFile.read(file) == token)
        let again = try Self.ctl(["--server", "127.0.0.1:\(port)", "--token-file", file, "status"], environment: environment)
        #expect(again.status == 0, "\(again)")
        #expect(!(try String(contentsOfFile: directory.file("server-again.log"), encoding: .utf8)).contains("made the controller token"))
    }

    /// A house started with no state directory keeps its token in the default one
    /// (`$XDG_STATE_HOME/tutti/house`), where `tutti ctl` on the same machine finds it with no
    /// flag: a new user's two commands need no token handling.
    @Test(.timeLimit(.minutes(1)))
    func theDefaultHouseNeedsNoFlag() throws {
        let directory = try TemporaryDirectory("controller-token-default")
        defer { directory.preserveLogs(as: "controller-token-default"); directory.remove() }
        let xdg = directory.file("xdg")
        let environment = Self.environment(xdg: xdg)
        let (server, port) = try Self.server([], in: directory, log: "server.log", environment: environment)
        defer { server.interrupt() }
        let file = xdg + "/tutti/house/controller-token"
        #expect(FileManager.default.fileExists(atPath: file))
        let status = try Self.ctl(["--server", "127.0.0.1:\(port)", "status"], environment: environment)
        #expect(status.status == 0, "\(status)")
        // A pairing code for the web UI: six digits on stdout, the instructions on stderr.
        let code = try Self.ctl(["--server", "127.0.0.1:\(port)", "pair-controller"], environment: environment)
        #expect(code.status == 0 && code.standardOutput.count == 7 && code.standardOutput.dropLast().allSatisfy(\.isNumber), "\(code)")
        #expect(code.standardError.contains("open the house's web UI and enter"), "\(code)")
    }
}
