import Foundation
import Testing
import TuttiSimulation
import TuttiTestSupport

/// What a client can hold of the house, on real sockets against a real `tutti server`
/// (Tests/Python/front_end_limits.py): a cap on connections per port, answered in each
/// protocol's convention; MPD's idle timeout, which spares a client in `idle`; caps on MPD
/// command lists and JSON-RPC batches, each refusal naming its limit; and a client that sends
/// without reading the replies, closed when its unread commands pass their bound while another
/// client is answered.
@Suite(.serialized) struct FrontEndLimitsTests {
    @Test(.timeLimit(.minutes(2)))
    func eachLimitHoldsAndSaysWhichItIs() async throws {
        let directory = try TemporaryDirectory("front-end-limits")
        defer { directory.preserveLogs(as: "front-end-limits"); directory.remove() }
        let server = try ChildProcess(name: "server", arguments: ["server", "--listen", "127.0.0.1:0", "--http", "off", "--mpd", "127.0.0.1:0",
                                                                  "--snapcast", "off", "--snapcast-control", "127.0.0.1:0", "--announce", "off",
                                                                  "--max-connections", "3", "--mpd-timeout", "2", "--mpd-max-command-list", "100"],
                                      standardError: directory.file("server.log"))
        defer { server.interrupt() }
        let mpdPort = Int(try server.waitForLine(containing: "MPD clients on").split(separator: ":")[2].prefix { $0.isNumber })!
        let snapcastPort = Int(try server.waitForLine(containing: "Snapcast controllers on").split(separator: ":")[2].prefix { $0.isNumber })!
        let (status, steps) = try await PythonScript.run("front_end_limits.py", ["\(mpdPort)", "\(snapcastPort)"], log: directory.file("limits.log"), within: 90)
        for step in steps { print("front-end limits: \(step)") }
        #expect(status == 0, "see out/test-logs/front-end-limits/limits.log")
        func step(_ name: String) throws -> [String: Any] { try #require(steps.first { $0["step"] as? String == name }, "no step \(name)") }

        let cap = try step("cap")
        #expect((cap["greetings"] as? [String])?.allSatisfy { $0.hasPrefix("OK MPD ") } == true, "\(cap)")
        #expect(cap["fourth"] as? String == "ACK [52@0] {} too many connections (3, the --max-connections limit); try again later\n", "\(cap)")
        #expect(cap["fourth_then"] as? String == "", "the refused connection stayed open: \(cap)")
        #expect(try step("cap-freed")["reply"] as? [String] == ["OK"])

        let list = try step("command-list")
        #expect(list["refusal"] as? String == "ACK [2@0] {command_list_begin} command list too long: over 100 commands (the --mpd-max-command-list limit)", "\(list)")
        #expect(list["after"] as? [String] == ["OK"], "\(list)")
        #expect(list["within"] as? [String] == ["OK"], "\(list)")

        let timeout = try step("timeout")
        let silentFor = try #require(timeout["silent_for"] as? Double)
        // Counted by the server from before its greeting, by the client from after it.
        #expect(timeout["silent_closed"] as? Bool == true && silentFor > 1.5, "\(timeout)")
        #expect(timeout["idle_after"] as? [String] == ["OK"], "the client in idle was closed too: \(timeout)")

        let flood = try step("flood")
        #expect(["BrokenPipeError", "ConnectionResetError"].contains(flood["outcome"] as? String ?? ""), "\(flood)")
        #expect((flood["other_answered_in"] as? Double ?? -1) >= 0, "another client was not answered during the flood: \(flood)")

        let snapcast = try step("snapcast")
        let big = try #require(snapcast["big_batch"] as? [String: Any])
        let error = try #require(big["error"] as? [String: Any])
        #expect(error["code"] as? Int == -32600 && (error["message"] as? String ?? "").contains("a batch of 1001 requests, over the limit of 1000"), "\(big)")
        #expect(snapcast["small_batch_ids"] as? [Int] == [0, 1, 2], "\(snapcast)")
        #expect((snapcast["refused"] as? String ?? "").contains("too many connections (3, the --max-connections limit)"), "\(snapcast)")
        #expect(snapcast["refused_closed"] as? Bool == true)

        let log = (try? String(contentsOfFile: directory.file("server.log"), encoding: .utf8)) ?? ""
        #expect(log.contains("MPD clients: a connection from") && log.contains("refused: too many connections"), "\(log)")
        #expect(log.contains("closed: silent for over 2 s (the --mpd-timeout limit)"), "\(log)")
        #expect(log.contains("closed: it sent over 4 MB of commands without reading the replies"), "\(log)")
        // Still serving.
        #expect(try MPDServerTests.converse(port: mpdPort, ["ping"], replies: 1) == "OK\n")
    }
}
