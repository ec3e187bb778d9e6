import AsyncHTTPClient
import TuttiCore
import TuttiMediaHTTP

/// The network access tests give the player, the house and decoders: one HTTP client for the
/// test process (it lives as long as the process, so it is never shut down) and the real clock.
public enum TestNetwork {
    public static let client = MediaHTTPClient.make()
    public static let clock = MonotonicClock()
    public static var opener: HTTPInputOpener { HTTPInputOpener(client: client, clock: clock) }
    /// What a house is given: its URL policy (`URLPolicy.house`), with the test servers' host
    /// allowed as `tutti server --allow-url-host 127.0.0.1` would.
    public static func houseOpener(allowing hosts: [String] = ["127.0.0.1"]) -> HTTPInputOpener {
        HTTPInputOpener(client: client, clock: clock, policy: .house(allowing: hosts))
    }
}
