import Foundation
import Hummingbird
import HummingbirdWebSocket
import TuttiHouse
import TuttiHouseSnapcast

/// Snapcast's control API on the house's HTTP port, where snapserver serves it (its port 1780):
/// `POST /jsonrpc` answers one request or batch per body, and the WebSocket `/jsonrpc` answers
/// each text message and pushes `Server.OnUpdate` on every change, as Snapweb and Home
/// Assistant's HTTP transport expect. Both speak `SnapcastJSONRPC`, as the control port does.
enum SnapcastJSONRPCRoutes {
    /// The largest request body taken (snapserver's control port takes lines of 1 MiB).
    static let maximumBodyBytes = 1 << 20

    static func add(to router: Router<BasicWebSocketRequestContext>, house: House) {
        router.post("/jsonrpc") { request, _ -> Response in
            let body = try await request.body.collect(upTo: maximumBodyBytes)
            var rpc = SnapcastJSONRPC(house: house)
            // Only notifications: an empty 200, as snapserver answers.
            guard let reply = await rpc.answer(Data(body.readableBytesView)) else { return Response(status: .ok) }
            return Response(status: .ok, headers: [.contentType: "application/json"], body: ResponseBody(byteBuffer: ByteBuffer(bytes: reply)))
        }
        router.ws("/jsonrpc") { inbound, outbound, _ in
            let (events, event) = AsyncStream<Data?>.makeStream()
            let token = await house.observeChanges { event.yield(nil) }
            defer {
                house.stopObservingChanges(token)
                event.finish()
            }
            try await withThrowingTaskGroup(of: Void.self) { group in
                group.addTask {
                    for try await message in inbound.messages(maxSize: maximumBodyBytes) {
                        switch message {
                        case .text(let text): event.yield(Data(text.utf8))
                        case .binary(let buffer): event.yield(Data(buffer.readableBytesView))
                        }
                    }
                }
                group.addTask {
                    // Requests and changes in one order, on one responder.
                    var rpc = SnapcastJSONRPC(house: house)
                    _ = await rpc.updateNotification()
                    for await message in events {
                        let reply = if let message { await rpc.answer(message) } else { await rpc.updateNotification() }
                        if let reply { try await outbound.write(.text(String(decoding: reply, as: UTF8.self))) }
                    }
                }
                try await group.next()
                group.cancelAll()
            }
        }
    }
}
