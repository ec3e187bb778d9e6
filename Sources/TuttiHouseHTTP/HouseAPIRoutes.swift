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
                var path: [String: JSONValue] = [:]
                for field in operation.pathFields {
                    // Names with spaces or beyond ASCII come percent-encoded.
                    let raw = try context.parameters.require(field.name)
                    let text = raw.removingPercentEncoding ?? raw
                    if case .integer = field.schema {
                        guard let value = Int(text) else {
                            return refusal(ControlRefusal("\(operation.command ?? "control"): the \(field.name) in the path must be a whole number"))
                        }
                        path[field.name] = .integer(value)
                    } else {
                        path[field.name] = .string(text)
                    }
                }
                // Reads (GET) take their fields from the query string, and no body.
                if operation.method == .get, let command = operation.command {
                    var fields: [String: JSONValue] = [:]
                    for field in operation.queryFields {
                        guard let text = request.uri.queryParameters.get(field.name) else { continue }
                        if case .integer = field.schema {
                            guard let value = Int(text) else {
                                return refusal(ControlRefusal("\(command): \"\(field.name)\" must be a whole number"))
                            }
                            fields[field.name] = .integer(value)
                        } else {
                            fields[field.name] = .string(text)
                        }
                    }
                    fields.merge(path) { _, fromPath in fromPath }
                    let request: ControlRequest
                    do throws(ControlRefusal) {
                        request = try ControlJSON.decodeRequest(body: [UInt8](), command: command, fields: fields)
                    } catch { return refusal(error) }
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
    static func run(_ name: String?, _ request: Request, _ context: Context, _ house: House, path: [String: JSONValue] = [:]) async -> Response {
        let body: ByteBuffer
        do { body = try await request.body.collect(upTo: maximumBodyBytes) } catch {
            return refusal(ControlRefusal("\(name ?? "control"): the body is over \(maximumBodyBytes >> 20) MiB"))
        }
        let request: ControlRequest
        do throws(ControlRefusal) {
            request = try ControlJSON.decodeRequest(body: body.readableBytesView, command: name, fields: path)
        } catch { return refusal(error) }
        return await answer(house, request)
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
