/// A problem with one input (file, URL, stream): names the input and the reason in one line.
public struct MediaError: Error, Sendable, CustomStringConvertible, Equatable {
    public enum Kind: String, Sendable {
        case notFound, unreadable, notAudio, unsupported, corrupt, truncated, invalidArgument
        /// The network failed: unreachable host, HTTP error, a transfer that kept failing.
        case network
        /// Stopped on request.
        case cancelled
    }

    public let input: String
    public let kind: Kind
    public let reason: String

    public init(_ kind: Kind, input: String, reason: String) {
        self.kind = kind
        self.input = input
        self.reason = reason
    }

    public var description: String { "\(input): \(reason)" }
}
