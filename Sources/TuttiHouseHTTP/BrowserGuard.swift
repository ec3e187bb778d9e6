import Foundation
import Hummingbird
import NIOCore
import TuttiCore
import TuttiHouse
import TuttiProtocol

/// The names a browser may use to reach the house: what a `Host` header must say.
///
/// A page on the internet can re-point its own name at the house's address (DNS rebinding);
/// the browser then treats the house as that page's origin and lets the page read every reply.
/// The only sign of it is the `Host` header, which names the page's domain. So the house answers
/// only to its own names: localhost, this machine's host name (and `.local`, as Avahi announces
/// it), an address of one of its interfaces, and the names given with `tutti server --http-host`
/// (for a house reached through a forwarded port or a name of the household's own DNS).
///
/// Thread-safety: a value; `allows` may be called from any thread.
public struct HostAllowList: Sendable {
    /// Names allowed besides the machine's own, lowercased, without a trailing dot.
    public let extraNames: Set<String>
    /// The machine's own names, lowercased.
    public let machineNames: Set<String>

    public init(extraNames: [String] = [], hostName: String = ProcessInfo.processInfo.hostName) {
        self.extraNames = Set(extraNames.map(Self.normalized))
        let full = Self.normalized(hostName)
        let short = full.split(separator: ".").first.map(String.init) ?? full
        machineNames = [full, short, short + ".local"]
    }

    /// Whether a request whose `Host` header is `authority` (host, with or without its port)
    /// may be answered.
    public func allows(authority: String) -> Bool {
        guard let host = Self.host(ofAuthority: authority) else { return false }
        if host == "localhost" || host.hasSuffix(".localhost") || extraNames.contains(host) || machineNames.contains(host) { return true }
        // An address literal cannot be rebound; it must still be one of this machine's.
        guard let address = try? SocketAddress(ipAddress: host, port: 0) else { return false }
        return ThisMachine.owns(address)
    }

    /// The host of an authority (`[::1]:7780`, `kitchen.local:7780`, `10.0.0.5`), lowercased and
    /// without brackets or a trailing dot; nil when it is not one.
    static func host(ofAuthority authority: String) -> String? {
        let text = authority.trimmingCharacters(in: .whitespaces)
        if text.hasPrefix("[") {
            guard let close = text.firstIndex(of: "]") else { return nil }
            let rest = text[text.index(after: close)...]
            guard rest.isEmpty || (rest.hasPrefix(":") && rest.dropFirst().allSatisfy(\.isNumber)) else { return nil }
            return String(text[text.index(after: text.startIndex)..<close]).lowercased()
        }
        var host = Substring(text)
        if let colon = text.lastIndex(of: ":") {
            guard text[text.index(after: colon)...].allSatisfy(\.isNumber) else { return nil }
            host = text[..<colon]
        }
        guard !host.isEmpty, !host.contains(":"), !host.contains("@") else { return nil }
        return normalized(String(host))
    }

    /// The port of an authority, or `defaultPort` when it names none.
    static func port(ofAuthority authority: String, defaultPort: Int) -> Int? {
        let text = authority.trimmingCharacters(in: .whitespaces)
        let afterHost = text.hasPrefix("[") ? text.firstIndex(of: "]").map { text[text.index(after: $0)...] } ?? "" : Substring(text)
        guard let colon = afterHost.lastIndex(of: ":") else { return defaultPort }
        return Int(afterHost[afterHost.index(after: colon)...])
    }

    private static func normalized(_ name: String) -> String {
        var name = name.lowercased()
        while name.hasSuffix(".") { name.removeLast() }
        return name
    }
}

/// Refuses what only a hostile web page sends, before any route runs:
/// - a `Host` that is not one of the house's (`HostAllowList`): DNS rebinding;
/// - a state change (any method but GET, HEAD and OPTIONS) or a WebSocket upgrade whose
///   `Origin` is another origin than the house's own: a page elsewhere driving the house
///   (cross-site request forgery; a `no-cors` text/plain POST needs no permission to be sent).
///
/// Clients that are not browsers send no `Origin` and pass on to the API. Every response
/// carries headers that keep the web UI out of other pages' frames and scripts off other
/// origins (`securityHeaders`).
struct BrowserGuardMiddleware<Context: RequestContext>: RouterMiddleware {
    let hosts: HostAllowList

    static var securityHeaders: HTTPFields {
        [
            .contentSecurityPolicy: "default-src 'self'; img-src 'self' data:; object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'",
            .xFrameOptions: "DENY",
            .xContentTypeOptions: "nosniff",
            .referrerPolicy: "no-referrer",
        ]
    }

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        var response: Response
        if let refusal = refusal(of: request) {
            response = HouseAPIRoutes.json(ControlJSON.encode(refusal), status: .forbidden)
        } else {
            response = try await next(request, context)
        }
        for field in Self.securityHeaders where response.headers[field.name] == nil { response.headers.append(field) }
        return response
    }

    /// Why the request is refused, in the API's convention; nil when it may go on.
    func refusal(of request: Request) -> ControlRefusal? {
        let what = "\(request.method) \(request.uri.path)"
        // HTTP/1.0 may leave the host out; no browser does.
        if let authority = request.head.authority, !hosts.allows(authority: authority) {
            return ControlRefusal("\(what) refused: host \(authority) is not a name of this house (a page re-pointing its own name here?); "
                                  + "a name of your own network is allowed with tutti server --http-host NAME", kind: .forbidden)
        }
        let upgrading = request.headers[.upgrade]?.lowercased() == "websocket"
        guard upgrading || ![.get, .head, .options].contains(request.method), let origin = request.headers[.origin] else { return nil }
        guard isSameOrigin(origin, as: request.head.authority) else {
            return ControlRefusal("\(what) refused: sent by a page of another origin (\(origin)); the house takes changes only from its own web UI "
                                  + "and from clients that are not browsers", kind: .forbidden)
        }
        return nil
    }

    /// Whether `origin` (`http://host:port`, or `null` from a sandboxed or local page) is the
    /// origin the request was sent to.
    private func isSameOrigin(_ origin: String, as authority: String?) -> Bool {
        guard let authority, let url = URL(string: origin), let scheme = url.scheme?.lowercased(), scheme == "http" || scheme == "https",
              let originHost = url.host.map({ $0.lowercased().trimmingCharacters(in: CharacterSet(charactersIn: "[]")) }) else { return false }
        let defaultPort = scheme == "https" ? 443 : 80
        return originHost == HostAllowList.host(ofAuthority: authority)
            && (url.port ?? defaultPort) == HostAllowList.port(ofAuthority: authority, defaultPort: defaultPort)
    }
}

extension HTTPFields.Element.Name {
    static var xFrameOptions: Self { Self("X-Frame-Options")! }
    static var referrerPolicy: Self { Self("Referrer-Policy")! }
}
