import Synchronization
import TuttiProtocol

/// The controller tokens of the houses a test started, by port: read from the house's state
/// directory as `tutti ctl` reads it, once the house listens. A house started without
/// `--state-dir` keeps the default state directory's token, which needs no registration.
public enum HouseTokens {
    private static let byPort = Mutex<[Int: ControllerToken]>([:])

    /// Reads the token of the house listening on `port` with `stateDirectory`.
    public static func remember(port: Int, stateDirectory: String) throws {
        let token = try ControllerTokenFile.read(ControllerTokenFile.path(in: stateDirectory))
        byPort.withLock { $0[port] = token }
    }

    /// The token of the house on `port`: the one remembered, else the default house's.
    public static func token(port: Int) throws -> ControllerToken {
        if let token = byPort.withLock({ $0[port] }) { return token }
        return try ControllerTokenFile.readDefault()
    }
}
