import Foundation
import TuttiCore
import NIOCore
import NIOPosix
import Synchronization
import Testing
import TuttiProtocol
import TuttiSimulation
@testable import TuttiHouse
import TuttiEngine
import TuttiTestSupport

/// The house on real loopback sockets: bad peers are refused with a reason and disconnected,
/// and nobody else notices.
@Suite struct HouseServerTests {
    final class Collected: @unchecked Sendable {
        let lock = NSLock()
        var lines: [String] = []
        var bytes: [UInt8] = []
        func append(_ line: String) { lock.withLock { lines.append(line) } }
    }

    /// A raw TCP client that records what the server sends and whether it closed.
    final class RawPeer: ChannelInboundHandler, @unchecked Sendable {
        typealias InboundIn = ByteBuffer
        let received = Collected()
        /// Completes when the server closes the connection, or fails after 30 s: a guard, so a
        /// server that never closes fails the test instead of hanging it.
        let closed: EventLoopPromise<Void>
        private let settled = Mutex(false)
        init(closed: EventLoopPromise<Void>) {
            self.closed = closed
            closed.futureResult.eventLoop.scheduleTask(in: .seconds(30)) { [self] in
                settle(.failure(TestFailure("the server did not close the connection within 30 s")))
            }
        }
        func channelRead(context: ChannelHandlerContext, data: NIOAny) {
            let buffer = Self.unwrapInboundIn(data)
            received.lock.withLock { received.bytes += buffer.readableBytesView }
        }
        func channelInactive(context: ChannelHandlerContext) { settle(.success(())) }
        private func settle(_ result: Result<Void, any Error>) {
            guard settled.withLock({ was in defer { was = true }; return !was }) else { return }
            closed.completeWith(result)
        }
    }

    func rawConnection(port: Int, group: any EventLoopGroup) async throws -> (any Channel, RawPeer) {
        let promise = group.next().makePromise(of: Void.self)
        let peer = RawPeer(closed: promise)
        let channel = try await ClientBootstrap(group: group)
            .channelInitializer { channel in channel.eventLoop.makeCompletedFuture { try channel.pipeline.syncOperations.addHandler(peer) } }
            .connect(host: "127.0.0.1", port: port).get()
        return (channel, peer)
    }

    @Test(.timeLimit(.minutes(1)))
    func malformedPeersAreRefusedAndOthersUnaffected() async throws {
        let log = Collected()
        let server = HouseServer(clock: MonotonicClock(), host: "127.0.0.1", port: 0, configuration: House.Configuration()) { log.append($0) }
        let port = try await server.start()
        let token = server.house.configuration.controllerToken
        let group = MultiThreadedEventLoopGroup.singleton
        // A good controller stays served throughout.
        #expect(try await ControlClient.sendJSON(#"{"command":"status"}"#, host: "127.0.0.1", port: port, token: token, group: group).ok)

        // Bytes that are no secure channel's hello (a browser, a client of protocol 6, which
        // sent its frames in the clear) are refused in the clear, with a goodbye saying why.
        let oldHello = "TT\u{06}\u{01}" + String(repeating: "\0", count: 80)
        for (garbage, expected) in [("GET / HTTP/1.1\r\nHost: x\r\nUser-Agent: a stray tool of some kind\r\nAccept: */*\r\n\r\n", "not a Tutti client"),
                                    (oldHello, "an unencrypted client of wire protocol 6")] {
            let (channel, peer) = try await rawConnection(port: port, group: group)
            try await channel.writeAndFlush(ByteBuffer(string: garbage))
            try await peer.closed.futureResult.get()
            var reply = ByteBuffer(bytes: peer.received.lock.withLock { peer.received.bytes })
            guard case .goodbye(let reason)? = try WireMessage.decode(from: &reply) else {
                Issue.record("no goodbye for \(garbage.debugDescription)")
                continue
            }
            #expect(reason.hasPrefix(expected), "\(reason)")
        }
        // An oversized record is refused before its payload is read.
        let big = try await SecureRawPeer.connect(port: port, role: .controller)
        var header = ByteBuffer()
        header.writeInteger(UInt32(200_000_000))
        try await big.sendUnsealed(header)
        try await big.closed.futureResult.get()
        // A controller that skips hello is refused too.
        let rude = try await SecureRawPeer.connect(port: port, role: .controller)
        var request = ByteBuffer()
        WireMessage.controlRequest(.init(requestID: 1, json: "{}")).encode(into: &request)
        try await rude.send(request)
        try await rude.closed.futureResult.get()
        // A record altered on the way (one bit) ends the connection.
        let altered = try await SecureRawPeer.connect(port: port, role: .controller)
        var sealed = ByteBuffer()
        sealed.writeInteger(UInt32(40))
        sealed.writeBytes([UInt8](repeating: 0x5A, count: 40))
        try await altered.sendUnsealed(sealed)
        try await altered.closed.futureResult.get()

        // A controller holding another token is refused, and told why; so is one that sends a
        // request without proving a token, or a forged proof.
        let wrong = await #expect(throws: ControlClient.Failure.self) {
            try await ControlClient.sendJSON(#"{"command":"status"}"#, host: "127.0.0.1", port: port, token: .random(), group: group)
        }
        #expect(wrong?.description == "the server refused: the controller token does not match this house's", "\(String(describing: wrong))")
        for proof in [nil, [UInt8](repeating: 0, count: 32)] {
            let unproved = try await SecureRawPeer.connect(port: port, role: .controller)
            var frames = ByteBuffer()
            WireMessage.hello(.init(role: .controller, name: "stranger")).encode(into: &frames)
            if let proof { WireMessage.authenticate(proof: proof).encode(into: &frames) }
            WireMessage.controlRequest(.init(requestID: 1, json: #"{"command":"volume","room":"a","percent":1}"#)).encode(into: &frames)
            try await unproved.send(frames)
            try await unproved.closed.futureResult.get()
            let kinds = try unproved.messages()
            #expect(kinds.count == 2 && kinds[0] == "welcome", "\(kinds)")
            #expect(kinds.last == "goodbye: " + (proof == nil ? "a control request before the controller token was proved" : "the controller token does not match this house's"),
                    "\(kinds)")
        }

        let lines = log.lock.withLock { log.lines }
        #expect(lines.contains { $0.contains("not a Tutti client") && $0.contains("connection closed") })
        #expect(lines.contains { $0.contains("a record of 200000000 bytes") })

        #expect(lines.contains { $0.contains("fails authentication") })
        #expect(lines.contains { $0.contains("expected hello, got controlRequest") })
        #expect(lines.allSatisfy { !$0.contains("\n") })
        // Before it proves anything, a peer's records are a few KiB at most, however valid (the
        // house's log has said enough for ten seconds: the peer's goodbye says it).
        let greedy = try await SecureRawPeer.connect(port: port, role: .controller)
        try await greedy.send(ByteBuffer(repeating: 0, count: 64 << 10))
        try await greedy.closed.futureResult.get()
        #expect(try greedy.messages() == ["goodbye: a record of 65552 bytes (at most 4120)"])
        #expect(try await ControlClient.sendJSON(#"{"command":"status"}"#, host: "127.0.0.1", port: port, token: token, group: group).ok)
        // Unknown commands and bad arguments are refusals, not failures.
        // Each gets one line naming the command and what is wrong with it.
        let refusals = [
            (#"{"command":"dance"}"#, #"unknown command "dance""#),
            (#"{"command":"volume","room":"attic","percent":50}"#, "no such room: attic"),
            (#"{"command":"volume","room":"attic","percent":150}"#, "volume needs a percentage from 0 to 100"),
            (#"{"command":"seek","seconds":"soon"}"#, #"seek: "seconds" must be a number"#),
            (#"{"command":"play"}"#, #"play: missing "files""#),
            (#"{"command":"play","files":[]}"#, "play needs at least one file"),
            ("not json", #"request is not a JSON object with a "command""#),
        ]
        for (request, reason) in refusals {
            let reply = try await ControlClient.sendJSON(request, host: "127.0.0.1", port: port, token: token, group: group)
            #expect(!reply.ok, "\(request)")
            let refusal = ControlJSON.decodeRefusal(reply.json)
            #expect(refusal.error.hasPrefix(reason), "\(request) → \(refusal.error)")
            #expect(!refusal.error.contains("\n"))
        }
        await server.stop()
    }

    /// Records a speaker connection's messages until the stream's end arrives.
    final class SpeakerPeer: ChannelInboundHandler, Sendable {
        typealias InboundIn = WireMessage
        typealias OutboundOut = WireMessage
        let ended: EventLoopPromise<Void>
        /// Said as the secure channel opens.
        var hello: WireMessage { .hello(.init(role: .speaker, name: "late", codecs: ["pcm-f32le"])) }
        func channelActive(context: ChannelHandlerContext) {
            context.writeAndFlush(Self.wrapOutboundOut(hello), promise: nil)
        }
        /// Frames of audio received from the first chunk's frame on, and the kinds of message
        /// in order (repeats folded).
        let received = Mutex<(first: Int64?, frames: Int64, kinds: [String])>((nil, 0, []))
        private let settled = Mutex(false)
        init(ended: EventLoopPromise<Void>) { self.ended = ended }
        func settle(_ result: Result<Void, any Error>) {
            guard settled.withLock({ was in defer { was = true }; return !was }) else { return }
            ended.completeWith(result)
        }
        func channelRead(context: ChannelHandlerContext, data: NIOAny) {
            let message = Self.unwrapInboundIn(data)
            received.withLock {
                if $0.kinds.last != message.kindName { $0.kinds.append(message.kindName) }
                if case .audioChunk(let chunk) = message {
                    if $0.first == nil { $0.first = chunk.firstFrame }
                    $0.frames += Int64(chunk.frameCount)
                }
            }
            if case .streamEnd = message { settle(.success(())) }
        }
    }

    /// A speaker that connects after the house has produced the whole track (a room restarting
    /// late in a song) is sent all of it. The first burst fills its connection past the
    /// high-water mark and drains at once on loopback, so the house must keep sending on
    /// writability that comes back while the connection is still being set up.
    @Test(.timeLimit(.minutes(1)))
    func aSpeakerConnectingLateIsSentTheWholeStream() async throws {
        let directory = try TemporaryDirectory("house-late-speaker")
        defer { directory.remove() }
        let track = directory.file("track.flac")
        try TestMedia.generateTone(track, seconds: 20)
        var configuration = House.Configuration()
        configuration.codec = .pcm  // 7.7 MB: several times the connection's 1 MiB high-water mark
        let identity = IdentityKey.random()
        configuration.admittedSpeakers = [identity.publicKey]
        let server = HouseServer(clock: MonotonicClock(), host: "127.0.0.1", port: 0, configuration: configuration) { _ in }
        let port = try await server.start()
        let token = configuration.controllerToken
        let group = MultiThreadedEventLoopGroup.singleton
        _ = try await ControlClient.send(.play(files: [track]), host: "127.0.0.1", port: port, token: token, group: group)
        let house = server.house
        let deadline = ContinuousClock.now + .seconds(30)
        while try await !house.loop.submit({ house.core.value.defaultGroup.stream?.endFrame != nil }).get() {
            guard ContinuousClock.now < deadline else { throw TestTimeout("the house did not produce the 20 s track within 30 s") }
            try await Task.sleep(for: .milliseconds(5))
        }
        let total = try await house.loop.submit { house.core.value.defaultGroup.stream?.endFrame ?? 0 }.get()

        let ended = group.next().makePromise(of: Void.self)
        let peer = SpeakerPeer(ended: ended)
        ended.futureResult.eventLoop.scheduleTask(in: .seconds(20)) {
            let (_, frames, kinds) = peer.received.withLock { $0 }
            peer.settle(.failure(TestTimeout("the late speaker was not sent the stream's end within 20 s (got \(frames) of \(total) frames; messages \(kinds))")))
        }
        let channel = try await ClientBootstrap(group: group)
            .channelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHandlers([
                        SecureChannelHandler(side: .client(role: .speaker, identity: identity, acceptHouse: { _ in nil })),
                        ByteToMessageHandler(WireMessageDecoder()), MessageToByteHandler(WireMessageEncoder()), peer,
                    ])
                }
            }
            .connect(host: "127.0.0.1", port: port).get()
        try await ended.futureResult.get()
        // Everything from the join point (a little after the playhead) to the end, once.
        let (first, frames, _) = peer.received.withLock { $0 }
        #expect(first.map { $0 >= 0 && $0 < total } == true, "joined at \(String(describing: first)) of \(total)")
        #expect(frames == total - (first ?? 0), "sent \(frames) frames from \(String(describing: first)) to \(total)")
        try await channel.close()
        await server.stop()
    }

    @Test func stateSurvivesARestart() async throws {
        let directory = try TemporaryDirectory("house-state")
        defer { directory.remove() }
        var configuration = House.Configuration()
        configuration.stateDirectory = directory.path
        let first = HouseServer(clock: MonotonicClock(), host: "127.0.0.1", port: 0, configuration: configuration) { _ in }
        let port = try await first.start()
        // The second house below has the same configuration, so the same token.
        let token = configuration.controllerToken
        let group = MultiThreadedEventLoopGroup.singleton
        // Queue edits while stopped are kept; they need no flush.
        let a = directory.file("a.flac"), b = directory.file("b.flac")
        try TestMedia.generateTone(a, seconds: 0.2)
        try TestMedia.generateTone(b, seconds: 0.2)
        _ = try await ControlClient.send(.queueAdd(file: a), host: "127.0.0.1", port: port, token: token, group: group)
        _ = try await ControlClient.send(.queueAdd(file: b, at: 0), host: "127.0.0.1", port: port, token: token, group: group)
        let missing = await #expect(throws: ControlRefusal.self) {
            try await ControlClient.send(.queueAdd(file: "/nowhere/c.flac"), host: "127.0.0.1", port: port, token: token, group: group)
        }
        #expect(missing?.error == "/nowhere/c.flac: no such file")
        await first.stop()
        let second = HouseServer(clock: MonotonicClock(), host: "127.0.0.1", port: 0, configuration: configuration) { _ in }
        let secondPort = try await second.start()
        let reply = try await ControlClient.send(.queue, host: "127.0.0.1", port: secondPort, token: token, group: group)
        let paths = reply.queue?.items.map(\.path)
        #expect(paths == [b, a])
        await second.stop()
        // A damaged state file is reported and ignored.
        try "{not json".write(toFile: directory.file("house.json"), atomically: true, encoding: .utf8)
        let log = Collected()
        let third = HouseServer(clock: MonotonicClock(), host: "127.0.0.1", port: 0, configuration: configuration) { log.append($0) }
        _ = try await third.start()
        #expect(log.lock.withLock { log.lines }.contains { $0.contains("house.json: unreadable state") })
        await third.stop()
    }

    /// A second house on the state directory of a running one refuses to start, naming the
    /// first's pid, and touches nothing: the first keeps its store and its queue. (A second
    /// house used to take "database is locked" for damage and move the first's store aside.)
    @Test(.timeLimit(.minutes(1)))
    func aSecondHouseOnTheSameStateDirectoryRefusesToStart() async throws {
        let directory = try TemporaryDirectory("state-lock")
        defer { directory.remove() }
        let state = directory.file("state")
        let arguments = ["server", "--listen", "127.0.0.1:0", "--http", "off", "--mpd", "off", "--snapcast", "off",
                         "--snapcast-control", "off", "--announce", "off", "--state-dir", state]
        let first = try ChildProcess(name: "first", arguments: arguments, standardError: directory.file("first.log"))
        defer { first.interrupt() }
        let port = Int(try first.waitForLine(containing: "listening on").split(separator: ":").last!.split(separator: " ").first!)!
        let token = try ControllerTokenFile.read(ControllerTokenFile.path(in: state))
        let a = directory.file("a.flac")
        try TestMedia.generateTone(a, seconds: 0.2)
        let group = MultiThreadedEventLoopGroup.singleton
        _ = try await ControlClient.send(.queueAdd(file: a), host: "127.0.0.1", port: port, token: token, group: group)

        let second = try ChildProcess(name: "second", arguments: arguments, standardError: directory.file("second.log"))
        #expect(await second.exit(within: 30) == 2)
        let refusal = (try? String(contentsOfFile: directory.file("second.log"), encoding: .utf8)) ?? ""
        #expect(refusal.contains("another house (pid \(first.process.processIdentifier)) uses the state directory \(state)"), "\(refusal)")
        #expect(!refusal.contains("listening on"), "\(refusal)")
        // The first plays on from its own store, which nothing moved.
        let queue = try await ControlClient.send(.queue, host: "127.0.0.1", port: port, token: token, group: group)
        #expect(queue.queue?.items.map(\.path) == [a])
        let files = try FileManager.default.contentsOfDirectory(atPath: state)
        #expect(!files.contains { $0.contains("damaged") }, "\(files)")
        #expect(first.interrupt() == 0)
        // Once the first has gone, the directory is free again.
        let third = try ChildProcess(name: "third", arguments: arguments, standardError: directory.file("third.log"))
        defer { third.interrupt() }
        _ = try third.waitForLine(containing: "listening on")
    }
}
