import Hummingbird
import HummingbirdWebSocket
import NIOCore

/// The context of every request to the house's HTTP port: Hummingbird's, plus the connection it
/// came on, so that a request with the controller's credential can mark its connection trusted
/// (`ConnectionBudget`), and one without leaves it to time out.
struct HouseRequestContext: RequestContext, WebSocketRequestContext {
    var coreContext: CoreRequestContextStorage
    let webSocket: WebSocketHandlerReference<Self>
    /// The connection the request came on.
    let channel: any Channel

    init(source: ApplicationRequestContextSource) {
        coreContext = .init(source: source)
        webSocket = .init()
        channel = source.channel
    }
}
