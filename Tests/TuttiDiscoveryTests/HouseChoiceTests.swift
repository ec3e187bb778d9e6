import Testing
import TuttiDiscovery

/// What a house announces in TXT, and how a speaker or `ctl` picks among the houses found: no
/// daemon needed.
@Suite struct HouseChoiceTests {
    func house(_ name: String, _ host: String = "10.0.0.2", port: Int = 7700, protocolVersion: Int = 5) -> DiscoveredHouse {
        DiscoveredHouse(name: name, host: host, port: port, httpPort: 7780, protocolVersion: protocolVersion, isLocal: false)
    }

    @Test func textRecordCarriesProtocolAndHTTPPort() {
        let announcement = HouseAnnouncement(name: "Living room", port: 7700, httpPort: 7781, protocolVersion: 5)
        #expect(announcement.textRecord == ["txtvers=1", "proto=5", "http=7781"])
        let fields = HouseAnnouncement.fields(ofTextRecord: announcement.textRecord)
        #expect(fields.protocolVersion == 5 && fields.httpPort == 7781)
        let withoutHTTP = HouseAnnouncement(name: "x", port: 1, httpPort: nil, protocolVersion: 4)
        #expect(HouseAnnouncement.fields(ofTextRecord: withoutHTTP.textRecord).httpPort == nil)
    }

    @Test func foreignOrBrokenTextRecordsReadAsUnknown() {
        for entries in [[], ["proto"], ["proto=five"], ["http=99999", "proto="], ["=", "junk", "http=-1"]] {
            let fields = HouseAnnouncement.fields(ofTextRecord: entries)
            #expect(fields.protocolVersion == 0 && fields.httpPort == nil, "\(entries)")
        }
    }

    @Test func theOnlyHouseIsChosen() throws {
        #expect(try HouseChoice.choose(among: [house("Home")], named: nil, protocolVersion: 5).address == "10.0.0.2:7700")
        let v6 = house("Home", "fe80::1")
        #expect(v6.address == "[fe80::1]:7700")
    }

    @Test func severalHousesAreListedWithHowToChoose() throws {
        let houses = [house("Attic", "10.0.0.3"), house("Living room")]
        #expect(throws: DiscoveryError("2 houses on this network: 'Attic' at 10.0.0.3:7700, 'Living room' at 10.0.0.2:7700; choose one with --house NAME or --server HOST:PORT")) {
            try HouseChoice.choose(among: houses, named: nil, protocolVersion: 5)
        }
        #expect(try HouseChoice.choose(among: houses, named: "Attic", protocolVersion: 5).host == "10.0.0.3")
        #expect(throws: DiscoveryError("no house named 'Cellar' on this network; found 'Attic' at 10.0.0.3:7700, 'Living room' at 10.0.0.2:7700; choose one with --house NAME or --server HOST:PORT")) {
            try HouseChoice.choose(among: houses, named: "Cellar", protocolVersion: 5)
        }
    }

    @Test func noHouseAndAnotherProtocolSayWhatToDo() {
        #expect(throws: DiscoveryError("no house announced on this network (_tutti._tcp through Avahi); start `tutti server`, or give its address with --server HOST:PORT")) {
            try HouseChoice.choose(among: [], named: nil, protocolVersion: 5)
        }
        #expect(throws: DiscoveryError("house 'Old' at 10.0.0.2:7700 speaks protocol 3, this tutti 5: run the same version on both")) {
            try HouseChoice.choose(among: [house("Old", protocolVersion: 3)], named: nil, protocolVersion: 5)
        }
    }
}
