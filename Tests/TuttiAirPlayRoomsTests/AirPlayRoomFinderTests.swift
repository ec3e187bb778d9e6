import Foundation
import NIOPosix
import Synchronization
import Testing
import TuttiCore
import TuttiProtocol
import TuttiAirPlayRooms

/// What the finder makes rooms of, from what a lookup returns (the lookup injected: Avahi's
/// own is exercised in AirPlayRoomTests).
@Suite struct AirPlayRoomFinderTests {
    /// A new receiver becomes one room, named after its AirPlay name; a Tutti house's group, a
    /// receiver named on the command line and one seen again are left out; a failing lookup is
    /// said once and tried again.
    @Test func onlyNewReceiversThatAreNotTuttiGroupsBecomeRooms() async throws {
        let looks = Mutex(0)
        let lines = Mutex<[String]>([])
        var configuration = AirPlayRoomFinder.Configuration(houseHost: "127.0.0.1", housePort: 9, houseIdentity: IdentityKey.random())
        configuration.namedAddresses = ["10.0.0.5:5000"]
        configuration.interval = .milliseconds(50)
        let finder = AirPlayRoomFinder(configuration: configuration, clock: MonotonicClock(), browse: {
            let look = looks.withLock { $0 += 1; return $0 }
            if look == 2 || look == 3 { throw CancellationError() }
            return [
                .init(serviceName: "5255CBF29D85@Porch", host: "10.0.0.7", port: 5000, textRecord: ["txtvers=1", "cn=0,1"]),
                .init(serviceName: "0A1B2C3D4E5F@Living room", host: "10.0.0.2", port: 5000, textRecord: ["txtvers=1", "am=Tutti"]),
                .init(serviceName: "AABBCCDDEEFF@Kitchen", host: "10.0.0.5", port: 5000, textRecord: ["txtvers=1"]),
                .init(serviceName: "112233445566@Locked", host: "10.0.0.8", port: 5000, textRecord: ["pw=true", "cn=0,1"]),
                .init(serviceName: "112233445567@Encrypted", host: "10.0.0.9", port: 5000, textRecord: ["et=1", "cn=0,1,2,3"]),
            ] + (look >= 4 ? [.init(serviceName: "no at sign", host: "fe80::1", port: 7000, textRecord: ["et=0,3,5", "cn=0,1,2,3"])] : [])
        }) { line in lines.withLock { $0.append(line) } }
        finder.start()
        let deadline = Date().addingTimeInterval(10)
        while Date() < deadline, looks.withLock({ $0 }) < 6 { try await Task.sleep(nanoseconds: 10_000_000) }
        let rooms = await finder.rooms()
        await finder.stop()
        #expect(rooms == ["10.0.0.7:5000": "Porch", "[fe80::1]:7000": "no at sign"])
        let said = lines.withLock { $0 }
        #expect(said.filter { $0.contains("cannot look for AirPlay receivers") }.count == 1, "\(said)")
        #expect(said.filter { $0.contains("found the AirPlay receiver Porch at 10.0.0.7:5000: it waits to be admitted") }.count == 1, "\(said)")
        // One line each for the receivers a room cannot play to, however often they are seen.
        #expect(said.filter { $0.contains("Locked") && $0.contains("left out") }.count == 1 && said.filter { $0.contains("Encrypted") && $0.contains("left out") }.count == 1, "\(said)")
    }
}
