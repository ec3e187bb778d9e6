import NIOEmbedded
import TuttiCore

/// The simulated house's true time: the virtual time of its one event loop, which is where
/// every task of the run happens. The house reads it directly; each room reads it through a
/// `SkewedClock` of its own.
public struct SimulatedClock: HostClock {
    public let loop: EmbeddedEventLoop

    public init(loop: EmbeddedEventLoop) { self.loop = loop }

    public func now() -> Int64 { Int64(loop.now.uptimeNanoseconds) }
}
