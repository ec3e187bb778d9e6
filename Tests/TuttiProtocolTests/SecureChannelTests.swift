import NIOCore
import NIOEmbedded
import Testing
@testable import TuttiProtocol

/// The secure channel between two in-memory pipelines: the handshake, sealed records both ways,
/// and every way it refuses: an altered byte, a forged or replayed record, a house that is not
/// the speaker's, a relay in the middle, a client of the old, unencrypted protocol.
@Suite struct SecureChannelTests {
    /// Collects what passes the secure handler: plain bytes, the session, errors, activation.
    final class Above: ChannelInboundHandler {
        typealias InboundIn = ByteBuffer
        var bytes: [UInt8] = []
        var session: SecureHandshake.Session?
        var errors: [String] = []
        var active = false
        func channelActive(context: ChannelHandlerContext) { active = true }
        func channelRead(context: ChannelHandlerContext, data: NIOAny) { bytes += Self.unwrapInboundIn(data).readableBytesView }
        func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
            if let session = event as? SecureHandshake.Session { self.session = session }
        }
        func errorCaught(context: ChannelHandlerContext, error: any Error) { errors.append("\(error)") }
    }

    struct Pair {
        let house: EmbeddedChannel, client: EmbeddedChannel
        let houseSide: Above, clientSide: Above

        init(house identity: IdentityKey, role: WireMessage.Hello.Role = .speaker, speaker: IdentityKey? = IdentityKey.random(),
             acceptHouse: @escaping @Sendable (PeerKey) -> String? = { _ in nil }) throws {
            houseSide = Above()
            clientSide = Above()
            house = EmbeddedChannel(handlers: [SecureChannelHandler(side: .house(identity)), houseSide])
            client = EmbeddedChannel(handlers: [SecureChannelHandler(side: .client(role: role, identity: speaker, acceptHouse: acceptHouse)), clientSide])
            try house.connect(to: SocketAddress(ipAddress: "127.0.0.1", port: 1)).wait()
            try client.connect(to: SocketAddress(ipAddress: "127.0.0.1", port: 1)).wait()
        }

        /// Moves what each side wrote to the other until neither writes; returns the bytes that
        /// went client → house and house → client, so a test can alter them on the way.
        @discardableResult
        func pump(alter: (inout ByteBuffer, _ toHouse: Bool) -> Void = { _, _ in }) throws -> Int {
            var moved = 0
            while true {
                var any = false
                while var out = try client.readOutbound(as: ByteBuffer.self) {
                    alter(&out, true)
                    try house.writeInbound(out)
                    any = true
                    moved += 1
                }
                while var out = try house.readOutbound(as: ByteBuffer.self) {
                    alter(&out, false)
                    try client.writeInbound(out)
                    any = true
                    moved += 1
                }
                if !any { return moved }
            }
        }
    }

    @Test func aSpeakerAndItsHouseProveWhoTheyAreAndExchangeSealedBytes() throws {
        let houseKey = IdentityKey.random(), speakerKey = IdentityKey.random()
        let pair = try Pair(house: houseKey, speaker: speakerKey)
        #expect(!pair.clientSide.active, "a client is active above only once the channel is open")
        try pair.pump()
        let house = try #require(pair.houseSide.session), client = try #require(pair.clientSide.session)
        #expect(house.speakerKey == speakerKey.publicKey && house.houseKey == houseKey.publicKey)
        #expect(client.houseKey == houseKey.publicKey)
        #expect(house.binding == client.binding && house.clock.sessionID == client.clock.sessionID)
        #expect(pair.clientSide.active)
        var captured: [UInt8] = []
        let message = Array("a FLAC frame: fLaC TITLE=Secret Song".utf8)
        try pair.client.writeAndFlush(ByteBuffer(bytes: message)).wait()
        try pair.house.writeAndFlush(ByteBuffer(bytes: message.reversed())).wait()
        try pair.pump { buffer, _ in captured += buffer.readableBytesView }
        #expect(pair.houseSide.bytes == message && pair.clientSide.bytes == message.reversed())
        // On the wire: neither the text nor the bytes.
        #expect(!containsRun(captured, Array("Secret".utf8)) && !containsRun(captured, Array("fLaC".utf8)))
        #expect(pair.houseSide.errors.isEmpty && pair.clientSide.errors.isEmpty)
    }

    func containsRun(_ haystack: [UInt8], _ needle: [UInt8]) -> Bool {
        guard haystack.count >= needle.count else { return false }
        return (0...(haystack.count - needle.count)).contains { Array(haystack[$0..<($0 + needle.count)]) == needle }
    }

    @Test func aFlippedBitAReplayOrAForgedRecordEndsTheConnection() throws {
        for attack in ["flip", "replay", "forge"] {
            let pair = try Pair(house: .random())
            try pair.pump()
            try pair.house.writeAndFlush(ByteBuffer(bytes: [1, 2, 3, 4, 5, 6, 7, 8])).wait()
            var first: ByteBuffer?
            try pair.pump { buffer, toHouse in if !toHouse { first = buffer } }
            #expect(pair.clientSide.bytes == [1, 2, 3, 4, 5, 6, 7, 8])
            try pair.house.writeAndFlush(ByteBuffer(bytes: [9, 9, 9])).wait()
            try pair.pump { buffer, toHouse in
                guard !toHouse else { return }
                switch attack {
                case "flip": buffer.setInteger(buffer.getInteger(at: 6, as: UInt8.self)! ^ 0x01, at: 6)
                case "replay": buffer = first!
                default:
                    var forged = ByteBuffer()
                    forged.writeInteger(UInt32(3 + 16))
                    forged.writeBytes([UInt8](repeating: 0xAB, count: 19))
                    buffer = forged
                }
            }
            #expect(pair.clientSide.bytes == [1, 2, 3, 4, 5, 6, 7, 8], "\(attack): nothing of the altered record passed")
            #expect(pair.clientSide.errors.count == 1 && pair.clientSide.errors[0].contains("fails authentication"), "\(attack): \(pair.clientSide.errors)")
        }
    }

    @Test func aSpeakerRefusesAHouseThatIsNotItsOwn() throws {
        let own = IdentityKey.random().publicKey
        let pair = try Pair(house: .random(), acceptHouse: { $0 == own ? nil : "not this speaker's house" })
        try pair.pump()
        #expect(pair.clientSide.errors == ["not this speaker's house"])
        #expect(pair.houseSide.session == nil, "the speaker never sent its identity")
        #expect(!pair.clientSide.active)
    }

    /// A relay in the middle that answers with its own key cannot pass itself off as the house:
    /// whichever key it signs with is its own, and a speaker bound to the house refuses it; one
    /// that passes the house's hello on unchanged holds no key to read what follows.
    @Test func aRelayCannotReadOrPassForTheHouse() throws {
        let realHouse = IdentityKey.random()
        // The relay forwards the client's hello to the house and the house's reply back, but
        // swaps the house's X25519 key for its own to read the channel: the signature breaks.
        let pair = try Pair(house: realHouse)
        try pair.pump { buffer, toHouse in
            guard !toHouse, buffer.readableBytes == SecureHandshake.houseHelloSize else { return }
            buffer.setBytes([UInt8](repeating: 9, count: 32), at: buffer.readerIndex)
        }
        #expect(pair.clientSide.errors.first?.contains("signature does not verify") == true, "\(pair.clientSide.errors)")
    }

    @Test func anUnencryptedClientIsToldInTheClearToUpdate() throws {
        let house = EmbeddedChannel(handlers: [SecureChannelHandler(side: .house(.random())), Above()])
        var hello = ByteBuffer()
        WireMessage.hello(.init(role: .speaker, name: "old", codecs: ["flac"])).encode(into: &hello)
        // The house reads a hello's worth of bytes before it judges.
        hello.writeBytes([UInt8](repeating: 0, count: SecureHandshake.clientHelloSize))
        hello.setInteger(UInt8(6), at: 2)
        try house.writeInbound(hello)
        var reply = try #require(try house.readOutbound(as: ByteBuffer.self))
        guard case .goodbye(let reason)? = try WireMessage.decode(from: &reply) else { Issue.record("no goodbye"); return }
        #expect(reason == "an unencrypted client of wire protocol 6 (this house speaks \(WireProtocol.version), encrypted: update it)")
    }

    /// Both ends of a connection reckon the same code from it; another connection of the same
    /// two keys shows another, so a house in the middle cannot grind keys to make the code the
    /// real house shows match the one the speaker shows.
    @Test func theAdmissionCodeIsBothEndsOwnReckoningOfTheirConnection() throws {
        let houseKey = IdentityKey.random(), speakerKey = IdentityKey.random()
        var codes: Set<String> = []
        for _ in 0..<3 {
            let pair = try Pair(house: houseKey, speaker: speakerKey)
            try pair.pump()
            let house = try #require(pair.houseSide.session), speaker = try #require(pair.clientSide.session)
            #expect(house.admissionCode == speaker.admissionCode)
            #expect(house.admissionCode.count == 7 && house.admissionCode.filter(\.isNumber).count == 6 && house.admissionCode.contains(" "))
            codes.insert(house.admissionCode)
        }
        #expect(codes.count == 3, "a code is new at every connection (1 in a million alike): \(codes)")
    }

    /// A speaker whose revealed nonce is not the one its hello committed to is refused: it
    /// could otherwise choose its code after seeing the house's key.
    @Test func aSpeakerMustRevealTheNonceItCommittedTo() throws {
        let identity = IdentityKey.random()
        let nonce = SecureHandshake.nonce(), other = SecureHandshake.nonce()
        let hello = SecureHandshake.clientHello(role: .speaker, ephemeral: .init(), nonce: nonce)
        let transcript = [UInt8](repeating: 3, count: 32)
        let honest = SecureHandshake.speakerIdentity(identity, transcript: transcript, nonce: nonce)
        #expect(try SecureHandshake.readSpeakerIdentity(honest, transcript: transcript, clientHello: hello).key == identity.publicKey)
        let swapped = SecureHandshake.speakerIdentity(identity, transcript: transcript, nonce: other)
        #expect(throws: SecureChannelError("the speaker's nonce is not the one its hello committed to")) {
            try SecureHandshake.readSpeakerIdentity(swapped, transcript: transcript, clientHello: hello)
        }
    }

    @Test func identitiesReadBackAndDeriveStably() throws {
        let key = IdentityKey.random()
        #expect(IdentityKey(text: key.text)?.publicKey == key.publicKey)
        #expect(IdentityKey(text: "not a key") == nil)
        #expect(PeerKey(text: key.publicKey.text) == key.publicKey)
        #expect(key.derived(for: "snapclient room a").publicKey == key.derived(for: "snapclient room a").publicKey)
        #expect(key.derived(for: "snapclient room a").publicKey != key.derived(for: "snapclient room b").publicKey)
        #expect(!"\(key)".contains(key.text), "a log line never shows the secret")
    }
}
