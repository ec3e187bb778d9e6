extension MediaHTTPServer {
    /// One request as the server saw it, for tests to check what a streaming client asked for
    /// (ranges, retries, connection reuse) and how much it was given.
    public struct RequestRecord: Sendable, Equatable, CustomStringConvertible {
        /// How the response ended, so a test can tell a deliberate cut from a client that hung up.
        public enum Outcome: Sendable, Equatable {
            /// The body is still being sent (throttled, stalled, or waiting for the client to read).
            case inProgress
            /// The whole response was handed to the connection.
            case completed
            /// Closed mid-body by a `cutConnection` rule.
            case cut
            /// The connection closed before the body was complete (client hang-up or `shutdown()`).
            case connectionClosed
        }

        /// Increases with every accepted connection; equal values mean a reused (kept-alive) connection.
        public let connectionID: Int
        public let method: String
        /// The request target without its query string: the key into the served files.
        public let path: String
        /// The request target as sent, query included.
        public let target: String
        /// The `Range` header as sent, nil without one.
        public let range: String?
        public let status: Int
        /// Body bytes written to the connection for this response. Bytes still buffered when the
        /// peer went away are counted too, so for a closed connection this is an upper bound.
        public internal(set) var bodyBytesSent: Int
        public internal(set) var outcome: Outcome

        public var description: String {
            "#\(connectionID) \(method) \(target)\(range.map { " [\($0)]" } ?? "") -> \(status), \(bodyBytesSent) bytes, \(outcome)"
        }
    }

    public struct ServerError: Error, CustomStringConvertible {
        public let description: String
        init(_ description: String) { self.description = description }
    }
}
