import Foundation
import Hummingbird
import HummingbirdWebSocket
import TuttiHouse
import TuttiHouseSnapcast

/// Snapcast's control API on the house's HTTP port, where snapserver serves it (its port 1780):
/// `POST /jsonrpc` answers one request or batch per body, and the WebSocket `/jsonrpc` answers
/// each text message and pushes `Server.OnUpdate` on every change, as Snapweb and Home
/// Assistant's HTTP transport expect. Both speak `SnapcastJSONRPC`, as the control port does,
/// and share one memory of muted volumes.
enum SnapcastJSONRPCRoutes {
    /// The largest request body taken (snapserver's control port takes lines of 1 MiB).
    static let maximumBodyBytes = 1 << 20

    static func add(to router: Router<HouseRequestContext>, house: House) {
        let hostName = ProcessInfo.processInfo.hostName, mutedVolumes = SnapcastMutedVolumes()
        router.post("/jsonrpc") { request, _ -> Response in
            let body = try await request.body.collect(upTo: maximumBodyBytes)
            var rpc = SnapcastJSONRPC(house: house, hostName: hostName, mutedVolumes: mutedVolumes)
            // Only notifications: an empty 200, as snapserver answers.
            guard let reply = await rpc.answer(Data(body.readableBytesView)) else { return Response(status: .ok) }
            return Response(status: .ok, headers: [.contentType: "application/json"], body: ResponseBody(byteBuffer: ByteBuffer(bytes: reply)))
        }
        router.ws("/jsonrpc") { inbound, outbound, _ in
            // Changes wake the notifier, at most one waiting: it looks at the whole status anyway.
            let (changes, changed) = AsyncStream<Void>.makeStream(bufferingPolicy: .bufferingNewest(1))
            let token = await house.observeChanges { changed.yield() }
            defer {
                house.stopObservingChanges(token)
                changed.finish()
            }
            try await withThrowingTaskGroup(of: Void.self) { group in
                group.addTask {
                    // Requests answered as they are read: a client that sends faster than the
                    // house answers is slowed by its socket, not queued here.
                    var rpc = SnapcastJSONRPC(house: house, hostName: hostName, mutedVolumes: mutedVolumes)
                    for try await message in inbound.messages(maxSize: maximumBodyBytes) {
                        let bytes = switch message {
                        case .text(let text): Data(text.utf8)
                        case .binary(let buffer): Data(buffer.readableBytesView)
                        }
                        if let reply = await rpc.answer(bytes) { try await outbound.write(.text(String(decoding: reply, as: UTF8.self))) }
                    }
                }
                group.addTask {
                    var notifier = SnapcastJSONRPC(house: house, hostName: hostName, mutedVolumes: mutedVolumes)
                    _ = await notifier.updateNotification()
                    for await _ in changes {
                        if let update = await notifier.updateNotification() { try await outbound.write(.text(String(decoding: update, as: UTF8.self))) }
                    }
                }
                try await group.next()
                group.cancelAll()
            }
        }
    }
}
