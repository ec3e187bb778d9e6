import Foundation
import TuttiProtocol

/// JSON-RPC 2.0's envelopes, as Snapcast's control API uses them: a request (a notification
/// when it has no id), a response with a result or an error, and a notification the server
/// pushes.
enum JSONRPC {
    struct Response<Result: Encodable>: Encodable {
        var jsonrpc = "2.0"
        var id: JSONValue
        var result: Result
    }

    struct ErrorResponse: Encodable {
        struct Body: Encodable {
            var code: Int
            var message: String
        }
        var jsonrpc = "2.0"
        var id: JSONValue
        var error: Body
    }

    struct Notification<Params: Encodable>: Encodable {
        var jsonrpc = "2.0"
        var method: String
        var params: Params
    }

    /// A response with `result`, encoded.
    static func reply(id: JSONValue, result: some Encodable) -> Data {
        encode(Response(id: id, result: result))
    }

    /// An error response, encoded.
    static func error(id: JSONValue, code: Int, message: String) -> Data {
        encode(ErrorResponse(id: id, error: .init(code: code, message: message)))
    }

    /// How replies are written: slashes as they are (URLs in stream properties).
    static func encode(_ value: some Encodable) -> Data {
        let encoder = JSONEncoder()
        encoder.outputFormatting = .withoutEscapingSlashes
        // The replies are built here of strings, numbers and booleans: encoding cannot fail.
        return (try? encoder.encode(value)) ?? Data("{}".utf8)
    }
}
