import Foundation
import NIOCore
import Testing
@testable import TuttiHouseMPD
import TuttiSimulation
import TuttiTestSupport

/// MPD's permissions, as MPD 0.23 has them: passwords that grant read, add, control and admin,
/// default permissions before one, and with neither, everything for clients on this machine
/// and reading for the rest.
@Suite(.serialized) struct MPDPermissionsTests {
    @Test func aClientElsewhereMayOnlyReadUnlessTheHouseSaysOtherwise() throws {
        let house = try SocketAddress(ipAddress: "192.0.2.1", port: 6600)
        func initial(_ peer: String, local: SocketAddress? = nil, _ defaults: MPDPermissions? = nil) throws -> MPDPermissions {
            MPDPermissions.initial(for: try SocketAddress(ipAddress: peer, port: 50000), local: local ?? house, defaultPermissions: defaults)
        }
        for peer in ["127.0.0.1", "127.0.0.53", "::1", "::ffff:127.0.0.1"] { #expect(try initial(peer) == .all, "\(peer)") }
        for peer in ["192.0.2.5", "10.0.0.7", "fd00::5", "fe80::1", "64:ff9b::7f00:1", "::ffff:192.0.2.1"] { #expect(try initial(peer) == .read, "\(peer)") }
        // A client here that connects to this machine's LAN address comes from that address.
        #expect(try initial("192.0.2.1") == .all)
        #expect(try initial("::ffff:192.0.2.1", local: try SocketAddress(ipAddress: "::ffff:192.0.2.1", port: 6600)) == .all)
        #expect(try initial("127.0.0.1", [.read, .add]) == [.read, .add])
        #expect(MPDPermissions.initial(for: nil, local: house, defaultPermissions: nil) == .read)
        #expect(MPDPermissions.initial(for: try SocketAddress(unixDomainSocketPath: "/tmp/mpd.sock"), local: nil, defaultPermissions: nil) == .all)
        let granted = try #require(MPDPermissions.password("pa@ss@read,admin"))
        #expect(granted.password == "pa@ss" && granted.permissions == [.read, .admin])
        for bad in ["secret", "@read", "secret@", "secret@write", "secret@read,,", "secret@read, control,dance"] {
            #expect(MPDPermissions.password(bad) == nil, "\(bad)")
        }
        #expect(MPDPermissions.required(for: "status") == .read && MPDPermissions.required(for: "ping") == [])
        #expect(MPDPermissions.required(for: "add") == .add && MPDPermissions.required(for: "setvol") == .control)
        #expect(MPDPermissions.required(for: "newpartition") == .admin)
    }

    /// python-mpd2 against a real house: before the password, reading works and the rest is
    /// refused with MPD's `[4@0]` ACK saying what it needs and how to get it; a wrong password
    /// is `[3@0]`; the right one grants what it lists, and no more.
    @Test(.timeLimit(.minutes(1)))
    func aPasswordGrantsWhatItListsAndNoMore() async throws {
        let directory = try TemporaryDirectory("mpd-permissions")
        defer { directory.preserveLogs(as: "mpd-permissions"); directory.remove() }
        let server = try ChildProcess(name: "server", arguments: ["server", "--listen", "127.0.0.1:0", "--http", "off", "--mpd", "127.0.0.1:0",
                                                                  "--snapcast", "off", "--snapcast-control", "off", "--announce", "off",
                                                                  "--mpd-password", "secret@read,add,control", "--mpd-default-permissions", "read"],
                                      standardError: directory.file("server.log"))
        defer { server.interrupt() }
        let port = Int(try server.waitForLine(containing: "MPD clients on").split(separator: ":")[2].prefix { $0.isNumber })!
        let (status, steps) = try await PythonScript.run("mpd_permissions.py", ["\(port)"], log: directory.file("mpd2.log"), within: 30)
        #expect(status == 0, "see out/test-logs/mpd-permissions/mpd2.log")
        for step in steps { print("MPD permissions: \(step)") }
        func step(_ name: String) throws -> [String: Any] { try #require(steps.first { $0["step"] as? String == name }, "no step \(name)") }
        func ack(_ value: Any?) -> String { (value as? [String: Any])?["ack"] as? String ?? "" }

        let before = try step("before")
        #expect((before["status"] as? [String: Any])?["ok"] as? String == "stop", "\(before)")
        #expect(ack(before["clear"]) == "[4@0] {clear} you don't have permission for \"clear\" (it needs control; send the password that grants control)", "\(before)")
        #expect(ack(before["setvol"]).hasPrefix("[4@0] {setvol}"), "\(before)")
        let commands = before["commands"] as? [String] ?? [], forbidden = before["notcommands"] as? [String] ?? []
        #expect(commands.contains("status") && commands.contains("password") && !commands.contains("clear") && !commands.contains("add"), "\(commands)")
        #expect(forbidden.contains("clear") && forbidden.contains("add") && forbidden.contains("newpartition") && !forbidden.contains("status"), "\(forbidden)")

        let wrong = try step("wrong")
        #expect(ack(wrong["password"]) == "[3@0] {password} incorrect password", "\(wrong)")
        #expect(ack(wrong["clear"]).hasPrefix("[4@0] {clear}"), "\(wrong)")

        let right = try step("right")
        #expect(ack(right["password"]).isEmpty && ack(right["clear"]).isEmpty, "\(right)")
        #expect(ack(right["newpartition"]) == "[4@0] {newpartition} you don't have permission for \"newpartition\" (it needs admin; send the password that grants admin)", "\(right)")
        #expect((right["commands"] as? [String] ?? []).contains("clear"), "\(right)")
    }
}
