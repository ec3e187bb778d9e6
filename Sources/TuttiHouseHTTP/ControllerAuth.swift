import Foundation
import Hummingbird
import HummingbirdWebSocket
import NIOCore
import TuttiHouse
import TuttiProtocol

/// Lets through only requests from a controller of the house: one that sends the controller
/// token as `Authorization: Bearer TOKEN` (scripts, Home Assistant, curl), or the session cookie
/// the login page gave a browser (`ControllerAuthRoutes`).
///
/// Answered with no credential: the web UI's own files and `/openapi.json` (they hold nothing of
/// the house) and the login page's endpoints. Everything else, the API, its WebSocket, `/jsonrpc` and `/metrics`,
/// is refused with 401 and `{"error": …, "kind": "unauthorized"}` saying how to sign in.
///
/// A request with the credential marks its connection trusted in the port's `ConnectionBudget`
/// (one over the budget's cap is refused, 503); a connection that makes none is closed after
/// 10 s, or sooner when newer ones need its place.
struct ControllerAuthMiddleware: RouterMiddleware {
    typealias Context = HouseRequestContext
    static var cookieName: String { "tutti_session" }
    let token: ControllerToken
    let budget: ConnectionBudget?
    /// What anyone may fetch, as normalized paths (`normalized`): the web UI's own files, `/`,
    /// `/openapi.json` and the login page's endpoints. Everything else needs the credential:
    /// a list of what is open cannot be dodged by a spelling of a path the router also takes
    /// (`//api/status`, `/metrics/`), as a list of what is closed was (found in review).
    let openPaths: Set<String>

    init(token: ControllerToken, budget: ConnectionBudget?, webFiles: [String]) {
        self.token = token
        self.budget = budget
        openPaths = Set(["", "openapi.json"] + webFiles + ControllerAuthRoutes.publicPaths.map { Self.normalized($0) })
    }

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        let controller = Self.isController(request, token: token)
        if controller, budget?.trust(context.channel) == .full {
            let limit = budget?.limits.maximumTrusted ?? 0
            return HouseAPIRoutes.json(ControlJSON.encode(ControlRefusal(
                "\(request.method) \(request.uri.path): the house already serves \(limit) signed-in connections on HTTP (--max-connections); close one and try again",
                kind: .conflict)), status: .serviceUnavailable)
        }
        guard needsCredential(request.uri.path), !controller else { return try await next(request, context) }
        var response = HouseAPIRoutes.refusal(ControlRefusal(
            "\(request.method) \(request.uri.path): sign in first: send the house's controller token as Authorization: Bearer TOKEN "
                + "(it is in the house's state directory, controller-token), or sign in at the web UI's login page with it or a code "
                + "from tutti ctl pair-controller", kind: .unauthorized))
        response.headers[.wwwAuthenticate] = "Bearer realm=\"tutti\""
        return response
    }

    /// Whether `path` may hold anything of the house: all but the open paths.
    func needsCredential(_ path: String) -> Bool {
        !openPaths.contains(Self.normalized(path))
    }

    /// A path as the router reads it: percent-decoded, its empty segments dropped, without
    /// leading or trailing slashes (`//api//status/` is `api/status`).
    static func normalized(_ path: String) -> String {
        (path.removingPercentEncoding ?? path).split(separator: "/", omittingEmptySubsequences: true).joined(separator: "/")
    }

    /// Whether `request` carries `token` as a bearer token, or a session cookie it made.
    static func isController(_ request: Request, token: ControllerToken) -> Bool {
        if let authorization = request.headers[.authorization] {
            let parts = authorization.split(separator: " ", maxSplits: 1)
            return parts.count == 2 && parts[0].lowercased() == "bearer" && token.matches(text: String(parts[1]))
        }
        return Self.sessionCookie(in: request).map { token.acceptsSessionCookie($0) } ?? false
    }

    /// The value of the session cookie among the request's cookies.
    static func sessionCookie(in request: Request) -> String? {
        for header in request.headers[values: .cookie] {
            for pair in header.split(separator: ";") {
                let trimmed = pair.trimmingCharacters(in: .whitespaces)
                guard let equals = trimmed.firstIndex(of: "="), trimmed[..<equals] == cookieName else { continue }
                return String(trimmed[trimmed.index(after: equals)...])
            }
        }
        return nil
    }
}

/// The login page's endpoints, which take no credential:
/// - `POST /api/login` with `{"token": "…"}` or `{"code": "123456"}` (from `tutti ctl
///   pair-controller` or another signed-in page's "Pair a phone") answers `{"signedIn": true}`
///   and sets the session cookie: HttpOnly (no script reads it), SameSite=Strict (no other
///   site's page sends it), for a year. A wrong secret is 401.
/// - `POST /api/logout` drops the cookie from the browser.
/// - `GET /api/session` says whether the request is signed in, so the UI knows whether to show
///   the login form.
enum ControllerAuthRoutes {
    typealias Context = HouseRequestContext
    static let publicPaths: Set<String> = ["/api/login", "/api/logout", "/api/session"]

    struct SessionReport: Codable {
        var signedIn: Bool
        /// This machine's name on the LAN (`NAME.local`, as Avahi announces it): where a phone
        /// reaches the page that was opened as localhost.
        var localName: String? = nil
    }

    static let localName: String = {
        let short = ProcessInfo.processInfo.hostName.split(separator: ".").first.map(String.init) ?? "localhost"
        return short + ".local"
    }()

    static func add(to router: Router<Context>, house: House) {
        let token = house.configuration.controllerToken
        router.get("/api/session") { request, _ in
            reply(SessionReport(signedIn: ControllerAuthMiddleware.isController(request, token: token), localName: localName))
        }
        router.post("/api/logout") { _, _ in
            var response = reply(SessionReport(signedIn: false))
            response.headers[.setCookie] = cookie(value: "", maxAge: 0)
            return response
        }
        router.post("/api/login") { request, _ in
            struct Login: Decodable { var token: String?; var code: String? }
            let body: ByteBuffer
            do { body = try await request.body.collect(upTo: 4096) } catch {
                return HouseAPIRoutes.refusal(ControlRefusal("login: the body is over 4 KiB"))
            }
            guard let login = try? JSONDecoder().decode(Login.self, from: Data(body.readableBytesView)), login.token != nil || login.code != nil else {
                return HouseAPIRoutes.refusal(ControlRefusal("login: the body must be {\"token\": \"…\"} or {\"code\": \"123456\"}"))
            }
            var accepted = false
            if let given = login.token { accepted = token.matches(text: given) }
            if !accepted, let code = login.code { accepted = await house.redeemPairingCode(code) }
            guard accepted else {
                let what = login.code != nil ? "the code is not one the house gave, or it expired or was used (ask for another with tutti ctl pair-controller)"
                                             : "the token is not this house's controller token"
                return HouseAPIRoutes.refusal(ControlRefusal("login: \(what)", kind: .unauthorized))
            }
            var response = reply(SessionReport(signedIn: true))
            response.headers[.setCookie] = cookie(value: token.sessionCookie(), maxAge: Int(ControllerToken.sessionLifetimeSeconds))
            return response
        }
    }

    static func cookie(value: String, maxAge: Int) -> String {
        "\(ControllerAuthMiddleware.cookieName)=\(value); Path=/; Max-Age=\(maxAge); HttpOnly; SameSite=Strict"
    }

    private static func reply(_ report: SessionReport) -> Response {
        // Two fixed fields: encoding cannot fail.
        HouseAPIRoutes.json(String(decoding: try! JSONEncoder().encode(report), as: UTF8.self), status: .ok)
    }

    /// The three endpoints in `/openapi.json`, each open to anyone (`security: []`).
    static var openAPI: [String: [String: Any]] {
        func answer(_ summary: String, _ schema: String) -> [String: Any] {
            ["description": summary, "content": ["application/json": ["schema": JSONSchema.reference(schema).json]]]
        }
        let session = answer("Whether the request is signed in.", "SessionReport")
        return [
            "/api/login": ["post": [
                "summary": "Sign a browser in with the controller token or a pairing code: sets the session cookie.",
                "operationId": "login", "security": [[String: [String]]](),
                "requestBody": ["required": true, "content": ["application/json": ["schema": [
                    "type": "object", "additionalProperties": false,
                    "properties": ["token": ["type": "string", "description": "The controller token."],
                                   "code": ["type": "string", "description": "A code from pair-controller."]],
                ] as [String: Any]]]] as [String: Any],
                "responses": ["200": session, "400": answer("Neither a token nor a code.", "Refusal"),
                              "401": answer("A wrong token, or a code unknown, expired or used.", "Refusal")],
            ] as [String: Any]],
            "/api/logout": ["post": [
                "summary": "Drop the session cookie.", "operationId": "logout", "security": [[String: [String]]](),
                "responses": ["200": session],
            ] as [String: Any]],
            "/api/session": ["get": [
                "summary": "Whether this request is signed in.", "operationId": "session", "security": [[String: [String]]](),
                "responses": ["200": session],
            ] as [String: Any]],
        ]
    }
}
