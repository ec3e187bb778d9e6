import FoundationEssentials

/// What a JSON-RPC 2.0 server reads in one message (Snapcast's control API, on its port, over
/// HTTP and over a WebSocket): one request, a batch of them, or a message refused whole. Pure:
/// the fuzz harness holds it to its round trip, and `SnapcastJSONRPC` performs what it yields.
public enum JSONRPCInput: Sendable, Equatable {
    /// A request (a notification when `id` is nil) or, for an entry that is not one, the error
    /// to answer it with (JSON-RPC answers each entry of a batch on its own).
    public enum Entry: Sendable, Equatable {
        case request(Request)
        case invalid(JSONRPCError)
    }

    public struct Request: Sendable, Equatable {
        public var id: JSONValue?
        public var method: String
        public var params: JSONValue?

        public init(id: JSONValue?, method: String, params: JSONValue?) {
            self.id = id
            self.method = method
            self.params = params
        }

        /// The request as JSON: what a controller sends.
        public var json: JSONValue {
            var object: [String: JSONValue] = ["jsonrpc": .string("2.0"), "method": .string(method)]
            if let id { object["id"] = id }
            if let params { object["params"] = params }
            return .object(object)
        }
    }

    case single(Entry)
    case batch([Entry])
    /// Answered with this error and nothing else: not JSON, an empty batch, a batch over the limit.
    case refused(JSONRPCError)

    /// Requests in one batch; a larger batch is refused whole with -32600, naming the limit.
    public static let maximumBatchLength = 1000

    public init(parsing message: some Collection<UInt8>) {
        let parsed: JSONValue
        do { parsed = try JSONDecoder().decode(JSONValue.self, from: Data(message)) } catch {
            self = .refused(JSONRPCError(id: .null, code: -32700, message: "Parse error"))
            return
        }
        guard case .array(let batch) = parsed else {
            self = .single(Self.entry(parsed))
            return
        }
        guard !batch.isEmpty else {
            self = .refused(JSONRPCError(id: .null, code: -32600, message: "Invalid request"))
            return
        }
        guard batch.count <= Self.maximumBatchLength else {
            self = .refused(JSONRPCError(id: .null, code: -32600,
                                         message: "Invalid request: a batch of \(batch.count) requests, over the limit of \(Self.maximumBatchLength)"))
            return
        }
        self = .batch(batch.map(Self.entry))
    }

    private static func entry(_ value: JSONValue) -> Entry {
        guard case .object(let object) = value, case .string(let method)? = object["method"] else {
            return .invalid(JSONRPCError(id: value["id"] ?? .null, code: -32600, message: "Invalid request"))
        }
        return .request(Request(id: object["id"], method: method, params: object["params"]))
    }
}

/// A JSON-RPC error: the request's id (null when it could not be read), a code and a one-line
/// message.
public struct JSONRPCError: Error, Sendable, Equatable {
    public var id: JSONValue
    public var code: Int
    public var message: String

    public init(id: JSONValue, code: Int, message: String) {
        self.id = id
        self.code = code
        self.message = message
    }
}
