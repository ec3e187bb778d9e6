#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import AsyncHTTPClient
import Foundation
import NIOCore
import TuttiCore
import NIOPosix

/// Which URLs may be fetched, checked before every request: the first, each redirect's
/// target, and every entry of an HLS playlist.
///
/// A house fetches URLs that controllers give it, from inside the household's network. Left
/// open, anyone who can queue a URL makes the house fetch what only it can reach: its own
/// loopback services, a cloud's metadata address (169.254.169.254), or, through a redirect or a
/// playlist entry, AsyncHTTPClient's `http+unix` sockets. So a house's policy (`house`) takes
/// http and https only, and refuses targets that resolve to a loopback, link-local,
/// unspecified, multicast or broadcast address (IPv4-mapped and NAT64 forms included). LAN
/// addresses stay allowed: a NAS, a radio on the LAN. Hosts named with `--allow-url-host` are
/// fetched whatever they resolve to. A player the user runs on their own machine
/// (`tutti play`) uses `open`: http(s) anywhere.
///
/// A refusal says why, never whether the target exists. What it cannot stop: a name that
/// resolves to a public address when checked and to a private one when connected (DNS
/// rebinding against the house itself); docs/SECURITY.md says so.
///
/// Thread-safety: a value.
public struct URLPolicy: Sendable {
    /// Whether loopback, link-local and other local targets are refused.
    public var refusesLocalTargets: Bool
    /// Hosts fetched whatever they resolve to, lowercased.
    public var allowedHosts: Set<String>
    /// Redirects followed before a fetch fails.
    public var maximumRedirects = 10

    public init(refusesLocalTargets: Bool, allowedHosts: [String] = []) {
        self.refusesLocalTargets = refusesLocalTargets
        self.allowedHosts = Set(allowedHosts.map { $0.lowercased() })
    }

    /// http(s) anywhere: a player the user runs themselves.
    public static let open = URLPolicy(refusesLocalTargets: false)

    /// What a house fetches for its controllers: http(s), not to local targets, except `hosts`.
    public static func house(allowing hosts: [String] = []) -> URLPolicy { URLPolicy(refusesLocalTargets: true, allowedHosts: hosts) }

    /// Why a URL is not fetched.
    public struct Refusal: Error, CustomStringConvertible {
        public let reason: String
        public var description: String { reason }
    }

    /// Throws a `Refusal` for a URL this policy does not fetch. Resolves its host (off the
    /// caller's thread) when local targets are refused.
    public func check(_ text: String) async throws(Refusal) {
        guard let url = URL(string: text), let scheme = url.scheme?.lowercased() else { throw Refusal(reason: "not a URL") }
        guard scheme == "http" || scheme == "https" else { throw Refusal(reason: "refused: only http and https URLs are fetched, not \(scheme)") }
        guard let rawHost = url.host, !rawHost.isEmpty else { throw Refusal(reason: "refused: the URL names no host") }
        let host = rawHost.trimmingCharacters(in: CharacterSet(charactersIn: "[]")).lowercased()
        guard refusesLocalTargets, !allowedHosts.contains(host) else { return }
        let addresses: [SocketAddress]
        do { addresses = try await Self.resolve(host) } catch {
            // Unresolvable: the fetch itself will say it cannot reach the host.
            return
        }
        for address in addresses {
            if let kind = Self.localKind(of: address) {
                throw Refusal(reason: "refused: \(host) is \(kind), which the house does not fetch from (allow it with tutti server --allow-url-host \(host))")
            }
        }
    }

    /// `request` executed as `client` would, each redirect followed here (the client must not
    /// follow them itself: `MediaHTTPClient.make`) once its target passes `check`.
    /// - Throws: `Refusal` for a URL or a redirect target refused, or the client's error.
    public func execute(_ request: HTTPClientRequest, client: HTTPClient, timeout: TimeAmount) async throws -> HTTPClientResponse {
        var request = request
        var hops = 0
        while true {
            try await check(request.url)
            let response = try await client.execute(request, timeout: timeout)
            guard [301, 302, 303, 307, 308].contains(response.status.code), let location = response.headers.first(name: "Location") else {
                return response
            }
            // The redirect's own body is a few bytes of HTML; the connection is reused once it is read.
            _ = try? await response.body.collect(upTo: 64 * 1024)
            hops += 1
            guard hops <= maximumRedirects else { throw Refusal(reason: "more than \(maximumRedirects) redirects") }
            guard let next = URL(string: location, relativeTo: URL(string: request.url))?.absoluteURL.absoluteString else {
                throw Refusal(reason: "a redirect to \(location), which is not a URL")
            }
            request.url = next
            if response.status.code == 303 && request.method != .HEAD {
                request.method = .GET
                request.body = nil
            }
        }
    }

    /// What kind of local address `address` is, or nil for one the house may fetch from.
    static func localKind(of address: SocketAddress) -> String? {
        switch address {
        case .v4(let v4): IPAddressKind(v4.address)?.description
        case .v6(let v6): IPAddressKind(v6.address)?.description
        case .unixDomainSocket: "a local socket"
        }
    }

    /// Every address `host` resolves to (getaddrinfo, on NIO's blocking-work pool).
    static func resolve(_ host: String) async throws -> [SocketAddress] {
        if let literal = try? SocketAddress(ipAddress: host, port: 0) { return [literal] }
        return try await NIOThreadPool.singleton.runIfActive {
            var hints = addrinfo()
            hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
            var list: UnsafeMutablePointer<addrinfo>?
            let status = getaddrinfo(host, nil, &hints, &list)
            guard status == 0, let first = list else { throw Refusal(reason: "cannot resolve \(host)") }
            defer { freeaddrinfo(first) }
            var addresses: [SocketAddress] = []
            var entry: UnsafeMutablePointer<addrinfo>? = first
            while let current = entry {
                if let raw = current.pointee.ai_addr {
                    switch Int32(raw.pointee.sa_family) {
                    case AF_INET:
                        addresses.append(raw.withMemoryRebound(to: sockaddr_in.self, capacity: 1) { SocketAddress($0.pointee, host: host) })
                    case AF_INET6:
                        addresses.append(raw.withMemoryRebound(to: sockaddr_in6.self, capacity: 1) { SocketAddress($0.pointee, host: host) })
                    default: break
                    }
                }
                entry = current.pointee.ai_next
            }
            return addresses
        }
    }
}
