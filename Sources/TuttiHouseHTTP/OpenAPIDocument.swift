import Foundation
import TuttiProtocol

/// `/openapi.json`: the OpenAPI 3.1 description of the house's API, made from the same
/// `APIOperation` list the routes are registered from, and the reply schemas of `APISchemas`.
enum OpenAPIDocument {
    static func json() -> String {
        var paths: [String: [String: Any]] = [:]
        for operation in APIOperation.all {
            paths[operation.path, default: [:]][operation.method.rawValue.lowercased()] = describe(operation)
        }
        paths[ArtworkRoute.path] = ArtworkRoute.openAPI
        for (path, item) in ControllerAuthRoutes.openAPI { paths[path] = item }
        let document: [String: Any] = [
            "openapi": "3.1.0",
            "info": [
                "title": "Tutti house",
                "version": "\(WireProtocol.version)",
                "description": "The house's control commands over HTTP (docs/HTTP-API.md). GET /api/events is a WebSocket that pushes the status and the queue whenever they change.",
            ],
            "paths": paths,
            // Every operation but the login page's takes the controller token as a bearer token,
            // or the session cookie the login page gives a browser (docs/SECURITY.md).
            "security": [["bearerToken": [String]()], ["sessionCookie": [String]()]],
            "components": [
                "schemas": APISchemas.components.mapValues(\.json),
                "securitySchemes": [
                    "bearerToken": ["type": "http", "scheme": "bearer",
                                    "description": "The house's controller token (<state-dir>/controller-token)."],
                    "sessionCookie": ["type": "apiKey", "in": "cookie", "name": ControllerAuthMiddleware.cookieName,
                                      "description": "Set by POST /api/login, for the web UI."],
                ],
            ],
        ]
        // Every value is a string, number, bool, array or dictionary of them.
        let data = try! JSONSerialization.data(withJSONObject: document, options: [.sortedKeys, .withoutEscapingSlashes])
        return String(decoding: data, as: UTF8.self)
    }

    private static func describe(_ operation: APIOperation) -> [String: Any] {
        var description: [String: Any] = [
            "summary": operation.summary,
            "operationId": operation.operationID,
        ]
        let parameters = operation.pathFields.map { field -> [String: Any] in
            ["name": field.name, "in": "path", "required": true, "description": field.summary, "schema": field.schema.json]
        } + operation.queryFields.map { field -> [String: Any] in
            ["name": field.name, "in": "query", "required": field.required, "description": field.summary, "schema": field.schema.json]
        }
        if !parameters.isEmpty { description["parameters"] = parameters }
        if !operation.bodyFields.isEmpty {
            var schema = JSONSchema.object(operation.bodyFields.map { ($0.name, $0.schema, $0.required) }).json
            // Fields the operation does not take are ignored, as `ctl`'s are; `/api/control`
            // takes every command's.
            schema["additionalProperties"] = true
            var properties = schema["properties"] as! [String: Any]
            for field in operation.bodyFields {
                var property = properties[field.name] as! [String: Any]
                property["description"] = field.summary
                properties[field.name] = property
            }
            schema["properties"] = properties
            description["requestBody"] = [
                "required": operation.bodyFields.contains(where: \.required),
                "content": ["application/json": ["schema": schema]],
            ]
        }
        var responses: [String: Any] = ["200": response("The command's report.", schema: operation.reply)]
        for kind in [ControlRefusal.Kind.invalid, .unauthorized] + operation.refusals {
            responses["\(HouseAPIRoutes.status(for: kind).code)"] = response(refusalSummary(kind), schema: "Refusal")
        }
        description["responses"] = responses
        return description
    }

    private static func response(_ summary: String, schema: String) -> [String: Any] {
        ["description": summary, "content": ["application/json": ["schema": JSONSchema.reference(schema).json]]]
    }

    private static func refusalSummary(_ kind: ControlRefusal.Kind) -> String {
        switch kind {
        case .invalid: "The request is malformed or its values make no sense."
        case .notFound: "It names a room or a queue item that does not exist."
        case .conflict: "It does not fit what the house is doing now."
        case .unplayable: "It names media the house cannot play."
        case .forbidden: "It names media the house will not play: a file outside its directories, a URL not http(s)."
        case .unauthorized: "No controller token or session cookie came with it, or a wrong one."
        }
    }
}
