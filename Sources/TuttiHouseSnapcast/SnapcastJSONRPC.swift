import Foundation
import TuttiHouse
import TuttiProtocol

/// Snapcast's control API as JSON-RPC 2.0 messages, whatever carries them: a line on the
/// control port (`SnapcastControlServer`), an HTTP POST to `/jsonrpc` or a WebSocket message at
/// `/jsonrpc` on the house's HTTP port, where snapserver serves Snapweb and Home Assistant's
/// HTTP transport. One per controller: it remembers mute levels and what it last notified.
///
/// Not thread-safe: one per connection (or request), used by its task.
public struct SnapcastJSONRPC {
    var methods: SnapcastControlMethods
    private var lastNotified: String?

    public var house: House { methods.house }

    /// - Parameters:
    ///   - hostName: the server's name in `Server.GetStatus` (looked up once, by the caller:
    ///     Foundation's lookup may ask the resolver).
    ///   - mutedVolumes: the front end's, shared by its connections.
    public init(house: House, hostName: String, mutedVolumes: SnapcastMutedVolumes) {
        methods = SnapcastControlMethods(house: house, hostName: hostName, mutedVolumes: mutedVolumes)
    }

    /// The reply to one message (a request, or a batch), or nil when it asked for none (only
    /// notifications).
    public mutating func answer(_ message: Data) async -> Data? {
        guard let parsed = try? JSONSerialization.jsonObject(with: message) else {
            return Self.encode(Self.error(id: NSNull(), code: -32700, message: "Parse error"))
        }
        if let batch = parsed as? [Any] {
            guard !batch.isEmpty else { return Self.encode(Self.error(id: NSNull(), code: -32600, message: "Invalid request")) }
            var replies: [Any] = []
            for request in batch { if let reply = await respond(to: request) { replies.append(reply) } }
            return replies.isEmpty ? nil : Self.encode(replies)
        }
        return await respond(to: parsed).map { Self.encode($0) }
    }

    /// `Server.OnUpdate` with the whole status, when it differs from what this controller was
    /// last told (the first call only notes it), else nil.
    public mutating func updateNotification() async -> Data? {
        guard let view = try? await methods.view() else { return nil }
        let steady = view.steady
        defer { lastNotified = steady }
        guard let last = lastNotified, last != steady else { return nil }
        return Self.encode(["jsonrpc": "2.0", "method": "Server.OnUpdate", "params": SnapcastServerStatus.json(view, hostName: methods.hostName)] as [String: Any])
    }

    private mutating func respond(to request: Any) async -> [String: Any]? {
        guard let object = request as? [String: Any], let method = object["method"] as? String else {
            return Self.error(id: (request as? [String: Any])?["id"] ?? NSNull(), code: -32600, message: "Invalid request")
        }
        let id = object["id"]
        let params = object["params"] as? [String: Any] ?? [:]
        do throws(SnapcastControlMethods.Failure) {
            let result = try await methods.call(method, params)
            guard let id else { return nil }
            return ["jsonrpc": "2.0", "id": id, "result": result]
        } catch {
            return Self.error(id: id ?? NSNull(), code: error.code, message: error.message)
        }
    }

    private static func error(id: Any, code: Int, message: String) -> [String: Any] {
        ["jsonrpc": "2.0", "id": id, "error": ["code": code, "message": message]]
    }

    private static func encode(_ object: Any) -> Data {
        // The objects are built here of strings, numbers, booleans, arrays and dictionaries.
        (try? JSONSerialization.data(withJSONObject: object, options: [.withoutEscapingSlashes])) ?? Data("{}".utf8)
    }
}
