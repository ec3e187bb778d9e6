import AsyncHTTPClient
import NIOCore
import Testing
import TuttiSimulation
import TuttiTestSupport
@testable import TuttiMediaHTTP

/// What a house fetches for its controllers (`URLPolicy.house`), and what a player the user
/// runs themselves fetches (`URLPolicy.open`).
@Suite struct URLPolicyTests {
    func refusal(_ policy: URLPolicy, _ url: String) async -> String? {
        do throws(URLPolicy.Refusal) {
            try await policy.check(url)
            return nil
        } catch {
            return error.reason
        }
    }

    @Test func aHouseRefusesLocalTargetsAndOtherSchemes() async {
        let house = URLPolicy.house()
        for (url, why) in [
            ("http://127.0.0.1:8000/a.flac", "127.0.0.1 is a loopback address"),
            ("http://127.1.2.3/a.flac", "127.1.2.3 is a loopback address"),
            ("http://localhost:6600/", "localhost is a loopback address"),
            ("http://[::1]:7780/api/status", "::1 is a loopback address"),
            ("http://169.254.169.254/latest/meta-data/", "169.254.169.254 is a link-local address"),
            ("http://[fe80::1]/", "fe80::1 is a link-local address"),
            ("http://0.0.0.0:7780/", "0.0.0.0 is the unspecified address"),
            ("http://224.0.0.251/", "224.0.0.251 is a multicast address"),
            ("http://[::ffff:169.254.169.254]/", "is a link-local address"),
            ("http://[64:ff9b::7f00:1]/", "is a loopback address"),
            ("http+unix://%2Frun%2Fdocker.sock/info", "only http and https URLs are fetched, not http+unix"),
            ("file:///etc/shadow", "only http and https URLs are fetched, not file"),
            ("ftp://example.com/a.mp3", "only http and https URLs are fetched, not ftp"),
        ] {
            let reason = await refusal(house, url)
            #expect(reason?.contains(why) == true, "\(url): \(reason ?? "allowed")")
        }
    }

    @Test func aHouseFetchesFromTheLANAndAllowedHosts() async {
        let house = URLPolicy.house(allowing: ["127.0.0.1", "Radio.Local"])
        for url in ["http://192.168.1.20:8000/stream.mp3", "https://10.0.0.5/a.flac", "http://[fd00::5]/a.flac", "http://100.64.1.1/",
                    "http://127.0.0.1:8000/a.flac", "http://radio.local/stream"] {
            #expect(await refusal(house, url) == nil, "\(url)")
        }
    }

    @Test func aPlayerOnTheUsersMachineFetchesAnyHTTPURL() async {
        #expect(await refusal(.open, "http://127.0.0.1:8000/a.flac") == nil)
        #expect(await refusal(.open, "http://169.254.169.254/") == nil)
        #expect(await refusal(.open, "http+unix://%2Frun%2Fx.sock/") != nil)
    }

    @Test func addressesAreClassified() throws {
        func kind(_ text: String) throws -> String? { URLPolicy.localKind(of: try SocketAddress(ipAddress: text, port: 0)) }
        #expect(try kind("8.8.8.8") == nil)
        #expect(try kind("192.168.0.1") == nil)
        #expect(try kind("169.254.0.1") == "a link-local address")
        #expect(try kind("169.253.255.255") == nil)
        #expect(try kind("255.255.255.255") == "the broadcast address")
        #expect(try kind("::") == "the unspecified address")
        #expect(try kind("2001:db8::1") == nil)
        #expect(try kind("ff02::fb") == "a multicast address")
        #expect(try kind("::ffff:10.0.0.1") == nil)
    }

    /// Redirects are followed by the policy, not the client (which must not follow them, or
    /// their targets would go unchecked): every status that redirects, a relative target, and
    /// a loop cut at the limit, on a real server.
    @Test func redirectsAreFollowedHereAndCut() async throws {
        let server = try await MediaHTTPServer.start(files: ["/end.wav": [1, 2, 3]])
        defer { try? server.shutdownBlocking() }
        for (index, status) in [301, 302, 303, 307, 308].enumerated() {
            server.setRedirect("/hop\(index).wav", to: index == 4 ? "/end.wav" : server.url(for: "/hop\(index + 1).wav"), status: status)
        }
        let response = try await URLPolicy.open.execute(HTTPClientRequest(url: server.url(for: "/hop0.wav")), client: TestNetwork.client, timeout: .seconds(10))
        #expect(response.status.code == 200)
        #expect(Array(try await response.body.collect(upTo: 1024).readableBytesView) == [1, 2, 3])
        server.setRedirect("/loop.wav", to: "/loop.wav")
        await #expect(throws: URLPolicy.Refusal.self) {
            _ = try await URLPolicy.open.execute(HTTPClientRequest(url: server.url(for: "/loop.wav")), client: TestNetwork.client, timeout: .seconds(10))
        }
        #expect(server.requests(for: "/loop.wav").count == 11)
    }
}
