import Foundation
import NIOPosix
import TuttiProtocol

/// A running house's control port, as tests drive it: commands, and waits on what the house
/// reports (with timeouts only as guards).
public struct HouseControlPort: Sendable {
    public let host: String
    public let port: Int
    /// The house's controller token, as `tutti ctl` finds it.
    public let token: ControllerToken

    /// A house started with `--state-dir stateDirectory`, or without one (its token is then the
    /// default state directory's, as for `tutti ctl` on this machine).
    public init(host: String = "127.0.0.1", port: Int, stateDirectory: String? = nil) throws {
        self.host = host
        self.port = port
        token = try stateDirectory.map { try ControllerTokenFile.read(ControllerTokenFile.path(in: $0)) } ?? ControllerTokenFile.readDefault()
    }

    public func send(_ command: ControlCommand) async throws -> ControlReply {
        try await ControlClient.send(command, host: host, port: port, token: token, group: MultiThreadedEventLoopGroup.singleton)
    }

    /// Admits every speaker waiting at the house, by its code, as the household would its own
    /// (a test's speakers are new to each test's house); returns the rooms as they are after.
    @discardableResult
    public func admitWaiting() async throws -> RoomsReport {
        try await Self.admitWaiting(host: host, port: port, token: token)
    }

    /// The same for a house known by its port and token.
    @discardableResult
    public static func admitWaiting(host: String = "127.0.0.1", port: Int, token: ControllerToken) async throws -> RoomsReport {
        let group = MultiThreadedEventLoopGroup.singleton
        var report = try await ControlClient.send(.rooms, host: host, port: port, token: token, group: group).rooms ?? RoomsReport(rooms: [])
        for speaker in report.waiting ?? [] {
            do {
                report = try await ControlClient.send(.admit(speaker: speaker.code), host: host, port: port, token: token, group: group).rooms ?? report
            } catch let refusal as ControlRefusal where refusal.kind == .notFound {
                // It left between the list and the admission: it comes back and is admitted then.
            }
        }
        return report
    }

    /// Returns once exactly `names` are connected, each with a settled clock (`hasSettledClock`),
    /// admitting the speakers that wait meanwhile.
    public func waitForRooms(_ names: Set<String>, timeout: Double = 30) async throws {
        let deadline = Date().addingTimeInterval(timeout)
        var seen: [String] = []
        while Date() < deadline {
            let report = try await admitWaiting()
            seen = report.rooms.map { "\($0.name) \($0.state)" }
            if Set(report.rooms.map(\.name)) == names && report.rooms.allSatisfy(\.hasSettledClock) { return }
            try await Task.sleep(nanoseconds: 100_000_000)
        }
        throw TestFailure("rooms \(names.sorted()) not connected and settled within \(Int(timeout)) s: \(seen)")
    }

    /// Returns once the house's position passed `seconds` into what it plays.
    public func waitForPosition(_ seconds: Double) async throws {
        let deadline = Date().addingTimeInterval(seconds + 30)
        while Date() < deadline {
            if case .status(let status) = try await send(.status), (status.positionSeconds ?? 0) > seconds { return }
            try await Task.sleep(nanoseconds: 50_000_000)
        }
        throw TestFailure("the house never reached \(seconds) s")
    }
}
