/// A device that stopped playing on its own — unplugged, suspended, on a route change — and is
/// being looked for again. `ALSADevice` reports it; devices that cannot vanish never do.
public struct DeviceInterruption: Sendable, Equatable {
    /// Why it stopped, as the system put it ("No such device").
    public var reason: String
    /// When it stopped, on the device's clock.
    public var sinceHostTime: Int64

    public init(reason: String, sinceHostTime: Int64) {
        self.reason = reason
        self.sinceHostTime = sinceHostTime
    }
}

/// How a device came back from its last interruption or xrun: how long it was silent, and the
/// device frames that silence accounts for (from time stamps, so the device frame numbering
/// still tracks true time).
public struct DeviceRecovery: Sendable, Equatable {
    public var gapNanoseconds: Int64
    public var missedFrames: Int64
    /// The period it came back with, which may differ from before.
    public var periodFrames: Int

    public init(gapNanoseconds: Int64, missedFrames: Int64, periodFrames: Int) {
        self.gapNanoseconds = gapNanoseconds
        self.missedFrames = missedFrames
        self.periodFrames = periodFrames
    }
}
