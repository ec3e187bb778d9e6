import Foundation
import Hummingbird
import HummingbirdWebSocket
import Logging
import NIOCore
import Synchronization
import TuttiHouse
import HummingbirdCore

/// The house's HTTP API and live event feed, on one port (`tutti server --http`, 7780 by
/// default): the REST routes of `HouseAPIRoutes` under `/api`, the WebSocket feed of
/// `HouseEventFeed` at `/api/events`, `/openapi.json`, `HouseMetrics` at `/metrics`, and Snapcast's
/// JSON-RPC at `/jsonrpc` (`SnapcastJSONRPCRoutes`). A request from a hostile web page (a
/// foreign Host or Origin) is refused before any of them (`BrowserGuardMiddleware`), then one
/// without the controller token or a session cookie (`ControllerAuthMiddleware`, and the login
/// page's `ControllerAuthRoutes`). Runs on its own threads (Hummingbird's), never on the
/// house's loop: each request is handed to the house as a `ControlCommand` and awaited.
///
/// Thread-safety: all members may be called from any thread.
public final class HouseHTTPServer: Sendable {
    public struct Configuration: Sendable {
        public var host = "0.0.0.0"
        public var port = 7780
        /// The web UI's files; nil for the ones built in (`WebUI/`, a resource of this module).
        public var webRoot: String?
        /// How often the event feed looks at the house for changes no event announces (the
        /// playhead entering the next item, the fill's progress).
        public var feedIntervalNanoseconds: Int64 = 100_000_000
        /// Host names a browser may reach the house by besides its own (`HostAllowList`):
        /// `tutti server --http-host`.
        public var allowedHostNames: [String] = []
        /// Connections that have not sent the controller's credential: at most 64, each closed
        /// after 10 s; signed-in ones up to `maximumTrusted` (`tutti server --max-connections`).
        public var connectionLimits = ConnectionBudget.Limits()
        /// A signed-in connection with no request in flight is closed after this long (a
        /// browser opens another when it needs one); a WebSocket is kept alive by its pings.
        public var idleTimeout: TimeAmount = .seconds(60)
        public init() {}
    }

    public let house: House
    public let configuration: Configuration
    /// The port's connections (`ConnectionBudget`).
    public let budget: ConnectionBudget
    private let running = Mutex<Task<Void, Never>?>(nil)

    public init(house: House, configuration: Configuration = Configuration()) {
        self.house = house
        self.configuration = configuration
        budget = ConnectionBudget(limits: configuration.connectionLimits, what: "HTTP") { line in house.note(line) }
    }

    /// Binds and serves; returns the port it listens on (the one asked for, or the one picked
    /// for port 0).
    /// - Throws: the bind's error (the address in use, not ours to bind).
    public func start() async throws -> Int {
        var logger = Logger(label: "tutti.http")
        // Hummingbird's own lines (a request's id, "server started", the files' directory) are
        // not the house's log.
        logger.logLevel = .critical
        let router = Router(context: HouseRequestContext.self)
        // First: a hostile page's request is refused before any route or file answers it.
        router.add(middleware: BrowserGuardMiddleware(hosts: HostAllowList(extraNames: configuration.allowedHostNames)))
        // Then: only a controller of the house reaches the API (the token or the login page's
        // cookie); the UI's files and the login page are open.
        // The web UI at `/`: plain files, no build step, nothing fetched from outside the house.
        let webRoot = configuration.webRoot ?? Bundle.module.url(forResource: "WebUI", withExtension: nil)?.path ?? "WebUI"
        // The UI's own files are open to anyone: a page must load before it can sign in. A web
        // root that cannot be listed opens none (and serves none).
        let webFiles = (try? FileManager.default.contentsOfDirectory(atPath: webRoot)) ?? []
        router.add(middleware: ControllerAuthMiddleware(token: house.configuration.controllerToken, budget: budget, webFiles: webFiles))
        router.add(middleware: JSONErrorMiddleware())
        router.add(middleware: FileMiddleware(webRoot, searchForIndexHtml: true, logger: logger))
        ControllerAuthRoutes.add(to: router, house: house)
        HouseAPIRoutes.add(to: router, house: house)
        HouseEventFeed.add(to: router, house: house, intervalNanoseconds: configuration.feedIntervalNanoseconds)
        SnapcastJSONRPCRoutes.add(to: router, house: house)
        let metrics = HouseMetrics(house: house)
        router.get("/metrics") { _, _ in
            Response(status: .ok, headers: [.contentType: "text/plain; version=0.0.4; charset=utf-8"],
                     body: ResponseBody(byteBuffer: ByteBuffer(string: await metrics.scrape())))
        }
        let (bound, announce) = AsyncStream<Result<Int, any Error>>.makeStream()
        let requested = configuration.port
        // Hummingbird's HTTP/1 and WebSocket channel, each connection entered in the budget as
        // it is accepted (`BudgetedChannel`).
        let webSocketResponder = router.buildResponder()
        let budget = self.budget, idleTimeout = configuration.idleTimeout
        let server = HTTPServerBuilder { responder in
            BudgetedChannel(inner: HTTP1WebSocketUpgradeChannel(responder: responder, webSocketResponder: webSocketResponder,
                                                                configuration: .init(http1: .init(idleTimeout: idleTimeout), ws: .init())),
                            budget: budget)
        }
        let app = Application(router: router, server: server,
                              configuration: .init(address: .hostname(configuration.host, port: requested), serverName: "tutti",
                                                   backlog: Int(House.acceptBacklog)),
                              onServerRunning: { channel in announce.yield(.success(channel.localAddress?.port ?? requested)) },
                              logger: logger)
        let task = Task {
            do { try await app.run() } catch { announce.yield(.failure(error)) }
            announce.finish()
        }
        running.withLock { $0 = task }
        for await outcome in bound { return try outcome.get() }
        throw HTTPServerStopped()
    }

    /// Stops serving: open requests and feeds end.
    public func stop() async {
        guard let task = running.withLock({ task -> Task<Void, Never>? in defer { task = nil }; return task }) else { return }
        task.cancel()
        await task.value
    }
}

/// Hummingbird's channel for one HTTP connection, entered in the port's `ConnectionBudget` as it
/// is accepted and left as it closes: a connection that has not sent the controller's
/// credential within 10 s, or that newer ones need the place of, is closed.
struct BudgetedChannel<Inner: ServerChildChannel>: ServerChildChannel {
    typealias Value = Inner.Value
    let inner: Inner
    let budget: ConnectionBudget

    func setup(channel: any Channel, logger: Logger) -> EventLoopFuture<Value> {
        budget.enter(channel) { _ in channel.close(promise: nil) }
        channel.closeFuture.whenComplete { [budget] _ in budget.leave(channel) }
        return inner.setup(channel: channel, logger: logger)
    }

    func handle(value: Value, logger: Logger) async {
        await inner.handle(value: value, logger: logger)
    }
}

struct HTTPServerStopped: Error, CustomStringConvertible {
    var description: String { "the HTTP server stopped before it listened" }
}
