/// Which of the stereo stream's channels a room plays: both (`stereo`), one of them on every
/// output of its card (`left`, `right`: a half of a stereo pair, or a speaker at one side of a
/// room), or their mean (`mono`: half of each, so a downmix of full-scale channels cannot clip).
/// Chosen in the room from the stream it already receives (`roomSettings`), so a pair costs the
/// house nothing.
public enum ChannelMode: String, Sendable, Codable, CaseIterable {
    case stereo, left, right, mono

    /// Its code in `roomSettings`.
    public var wireCode: UInt8 {
        switch self {
        case .stereo: 0
        case .left: 1
        case .right: 2
        case .mono: 3
        }
    }

    public init?(wireCode: UInt8) {
        guard let mode = Self.allCases.first(where: { $0.wireCode == wireCode }) else { return nil }
        self = mode
    }

    /// What a frame's first two channels become, given its left and right samples.
    @inline(__always)
    public func mix(left: Float, right: Float) -> (Float, Float) {
        switch self {
        case .stereo: (left, right)
        case .left: (left, left)
        case .right: (right, right)
        case .mono: ((left + right) * 0.5, (left + right) * 0.5)
        }
    }
}
