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
    /// Requests in one batch; a larger batch is refused whole with -32600, naming the limit.
    public static var maximumBatchLength: Int { JSONRPCInput.maximumBatchLength }

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
        switch JSONRPCInput(parsing: message) {
        case .refused(let error):
            return JSONRPC.error(id: error.id, code: error.code, message: error.message)
        case .single(let entry):
            return await respond(to: entry)
        case .batch(let batch):
            var replies: [Data] = []
            for entry in batch { if let reply = await respond(to: entry) { replies.append(reply) } }
            return replies.isEmpty ? nil : Data("[".utf8) + Data(replies.joined(separator: Data(",".utf8))) + Data("]".utf8)
        }
    }

    /// `Server.OnUpdate` with the whole status, when it differs from what this controller was
    /// last told (the first call only notes it), else nil.
    public mutating func updateNotification() async -> Data? {
        guard let view = try? await methods.view() else { return nil }
        let steady = view.steady
        defer { lastNotified = steady }
        guard let last = lastNotified, last != steady else { return nil }
        return JSONRPC.encode(JSONRPC.Notification(method: "Server.OnUpdate", params: SnapcastServerStatus.status(view, hostName: methods.hostName)))
    }

    private mutating func respond(to entry: JSONRPCInput.Entry) async -> Data? {
        let request: JSONRPCInput.Request
        switch entry {
        case .invalid(let error): return JSONRPC.error(id: error.id, code: error.code, message: error.message)
        case .request(let read): request = read
        }
        do throws(SnapcastControlMethods.Failure) {
            let result = try await methods.call(request.method, request.params)
            guard let id = request.id else { return nil }
            return JSONRPC.reply(id: id, result: result)
        } catch {
            // A notification is never answered, not even with an error (JSON-RPC 2.0).
            guard let id = request.id else { return nil }
            return JSONRPC.error(id: id, code: error.code, message: error.message)
        }
    }
}
