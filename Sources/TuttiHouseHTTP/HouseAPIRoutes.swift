import Foundation
import Hummingbird
import HummingbirdWebSocket
import NIOCore
import TuttiHouse
import TuttiProtocol

/// The REST routes of the house's API (docs/HTTP-API.md). Each route is a `ControlCommand`:
/// its name fixed by the route, its fields from the path and the JSON body, read by
/// `ControlJSON` as `tutti ctl`'s are, so the API and the CLI share one definition. Replies are
/// the commands' reports; a refusal is `{"error": "…", "kind": "…"}` with the status code its
/// kind calls for.
enum HouseAPIRoutes {
    typealias Context = HouseRequestContext

    /// The largest request body: a play of a few thousand paths.
    static let maximumBodyBytes = 1 << 20

    static func add(to router: Router<Context>, house: House) {
        for operation in APIOperation.all {
            router.on(RouterPath(operation.path), method: operation.method) { request, context in
                var path: [String: Any] = [:]
                for field in operation.pathFields {
                    // Names with spaces or beyond ASCII come percent-encoded.
                    let raw = try context.parameters.require(field.name)
                    let text = raw.removingPercentEncoding ?? raw
                    if case .integer = field.schema {
                        guard let value = Int(text) else {
                            return refusal(ControlRefusal("\(operation.command ?? "control"): the \(field.name) in the path must be a whole number"))
                        }
                        path[field.name] = value
                    } else {
                        path[field.name] = text
                    }
                }
                // Reads (GET) take their fields from the query string, and no body.
                if operation.method == .get, let command = operation.command {
                    var fields: [String: Any] = ["command": command]
                    for field in operation.queryFields {
                        guard let text = request.uri.queryParameters.get(field.name) else { continue }
                        if case .integer = field.schema {
                            guard let value = Int(text) else {
                                return refusal(ControlRefusal("\(command): \"\(field.name)\" must be a whole number"))
                            }
                            fields[field.name] = value
                        } else {
                            fields[field.name] = text
                        }
                    }
                    fields.merge(path) { _, fromPath in fromPath }
                    let json = String(decoding: try! JSONSerialization.data(withJSONObject: fields), as: UTF8.self)
                    let request: ControlRequest
                    do throws(ControlRefusal) { request = try ControlJSON.decodeRequest(json) } catch { return refusal(error) }
                    return await answer(house, request)
                }
                return await run(operation.command, request, context, house, path: path)
            }
        }
        router.get(RouterPath(ArtworkRoute.path)) { request, _ in await ArtworkRoute.answer(request, house: house) }
        let document = OpenAPIDocument.json()
        router.get("/openapi.json") { _, _ in json(document, status: .ok) }
    }

    /// Performs the command named `name` (nil: named by the body's "command"), with the body's
    /// fields and `path`'s.
    static func run(_ name: String?, _ request: Request, _ context: Context, _ house: House, path: [String: Any] = [:]) async -> Response {
        var fields: [String: Any]
        do {
            let body = try await request.body.collect(upTo: maximumBodyBytes)
            fields = try bodyObject(body, command: name ?? "control")
        } catch let refused as ControlRefusal {
            return refusal(refused)
        } catch {
            return refusal(ControlRefusal("\(name ?? "control"): the body is over \(maximumBodyBytes >> 20) MiB"))
        }
        fields.merge(path) { _, fromPath in fromPath }
        if let name { fields["command"] = name }
        // Serializing what was just parsed (plus strings and integers) cannot fail.
        let json = String(decoding: try! JSONSerialization.data(withJSONObject: fields), as: UTF8.self)
        let request: ControlRequest
        do { request = try ControlJSON.decodeRequest(json) } catch { return refusal(error) }
        return await answer(house, request)
    }

    /// The body as a JSON object; empty is `{}`.
    static func bodyObject(_ body: ByteBuffer, command: String) throws(ControlRefusal) -> [String: Any] {
        guard body.readableBytes > 0 else { return [:] }
        guard let object = try? JSONSerialization.jsonObject(with: Data(body.readableBytesView)) as? [String: Any] else {
            throw ControlRefusal("\(command): the body is not a JSON object")
        }
        return object
    }

    static func answer(_ house: House, _ request: ControlRequest) async -> Response {
        switch await house.perform(request.command, group: request.group) {
        case .success(let reply): json(ControlJSON.encode(reply), status: .ok)
        case .failure(let refused): refusal(refused)
        }
    }

    static func refusal(_ refused: ControlRefusal) -> Response {
        json(ControlJSON.encode(refused), status: status(for: refused.kind))
    }

    static func status(for kind: ControlRefusal.Kind) -> HTTPResponse.Status {
        switch kind {
        case .invalid: .badRequest
        case .notFound: .notFound
        case .conflict: .conflict
        case .unplayable: .unprocessableContent
        case .forbidden: .forbidden
        case .unauthorized: .unauthorized
        }
    }

    static func json(_ text: String, status: HTTPResponse.Status) -> Response {
        Response(status: status, headers: [.contentType: "application/json"], body: ResponseBody(byteBuffer: ByteBuffer(string: text)))
    }
}

/// Turns Hummingbird's own errors (no such route, a method the route does not take) into the
/// API's JSON refusals.
struct JSONErrorMiddleware<Context: RequestContext>: RouterMiddleware {
    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        do {
            return try await next(request, context)
        } catch let error as any HTTPResponseError {
            let kind: ControlRefusal.Kind = error.status == .notFound ? .notFound : .invalid
            let reason = error.status == .notFound ? "no such endpoint" : error.status.reasonPhrase.lowercased()
            let refused = ControlRefusal("\(request.method) \(request.uri.path): \(reason)", kind: kind)
            return HouseAPIRoutes.json(ControlJSON.encode(refused), status: error.status)
        }
    }
}
