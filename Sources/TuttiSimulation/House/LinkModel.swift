/// What one network path between the house and a room does to what crosses it, each way:
/// a base delay plus seeded uniform jitter, a bandwidth that serializes a burst (the deep
/// buffer's fill), datagram loss, and outages that hold TCP and drop datagrams.
public struct LinkModel: Sendable, Equatable {
    public var baseDelayNanoseconds: Int64 = 1_000_000
    /// Each message waits an extra uniform 0 ..< jitter.
    public var jitterNanoseconds: Int64 = 1_000_000
    /// Bytes per second a TCP burst drains at (50 Mbit/s: a good Wi-Fi link).
    public var bytesPerSecond: Double = 6_250_000
    /// Bytes a TCP sender may have written and not yet delivered before its channel reports
    /// not writable (NIO's 1 MiB high-water mark plus a kernel send buffer); it is writable
    /// again once a quarter of that is left, as NIO's low-water mark does.
    public var sendWindowBytes = 4 << 20
    /// Fraction of datagrams lost.
    public var datagramLoss: Double = 0
    /// Simulated-time intervals in which nothing crosses: TCP waits, datagrams are lost.
    public var outages: [Range<Int64>] = []
    /// A named impairment model (`NetworkModel`): when set, each direction's delays come from
    /// it instead of `baseDelayNanoseconds` and `jitterNanoseconds`.
    public var network: NetworkModel?

    public init() {}

    /// The outage `time` falls in, if any.
    func outage(at time: Int64) -> Range<Int64>? { outages.first { $0.contains(time) } }
}
