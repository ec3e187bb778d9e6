import Testing
@testable import TuttiHouseHTTP

/// The names a `Host` header may give (`HostAllowList`): the house's own, never a page's.
@Suite struct HostAllowListTests {
    let hosts = HostAllowList(extraNames: ["Music.Home.Arpa."], hostName: "livingroom.lan")

    @Test func theHousesOwnNamesAreAllowed() {
        for authority in ["localhost", "localhost:7780", "LOCALHOST:7780", "app.localhost:7780", "127.0.0.1:7780", "127.8.9.1",
                          "[::1]:7780", "[::1]", "livingroom:7780", "livingroom.lan:7780", "livingroom.local:7780", "livingroom.local.:7780",
                          "music.home.arpa:7780", "MUSIC.home.arpa"] {
            #expect(hosts.allows(authority: authority), "\(authority)")
        }
    }

    @Test func anotherNameOrAnAddressNotOfThisMachineIsRefused() {
        // A rebound name, another machine's address, the wildcard, and what is not a host at all.
        for authority in ["attacker.example", "attacker.example:7780", "livingroom.attacker.example", "localhost.attacker.example",
                          "192.0.2.1:7780", "[2001:db8::1]:7780", "0.0.0.0:7780", "", ":7780", "user@localhost:7780",
                          "localhost:port", "[::1", "[::1]x", "a:b:c"] {
            #expect(!hosts.allows(authority: authority), "\(authority)")
        }
    }

    @Test func authoritiesAreTakenApart() {
        #expect(HostAllowList.host(ofAuthority: "[::1]:7780") == "::1")
        #expect(HostAllowList.host(ofAuthority: "Kitchen.Local.:80") == "kitchen.local")
        #expect(HostAllowList.port(ofAuthority: "[::1]:7780", defaultPort: 80) == 7780)
        #expect(HostAllowList.port(ofAuthority: "[::1]", defaultPort: 80) == 80)
        #expect(HostAllowList.port(ofAuthority: "kitchen.local", defaultPort: 443) == 443)
    }
}
