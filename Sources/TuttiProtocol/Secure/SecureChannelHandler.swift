import Crypto
import NIOCore

/// The secure channel in a NIO pipeline, next to the socket: runs the handshake
/// (`SecureHandshake`), then seals every buffer written through it into a record and opens every
/// record read, so the handlers above see the plain wire protocol.
///
/// Once the channel is open it fires a `SecureHandshake.Session` user event. On a client the
/// channel's activation is held back until then, so a handler above sends its hello in
/// `channelActive` as before, sealed. On the house it passes at once: the house counts a
/// connection against its port's budget from its first byte, not from its handshake.
///
/// A record that fails to open (a flipped bit, a forged or replayed record) or a handshake that
/// does not hold raises `SecureChannelError` through the pipeline: the handler above says why in
/// one line and closes the connection. Nothing is written before the channel is open: a write
/// then fails (a goodbye to a peer that never finished its handshake goes nowhere).
///
/// Thread-safety: on the channel's event loop only.
public final class SecureChannelHandler: ChannelDuplexHandler, RemovableChannelHandler {
    public typealias InboundIn = ByteBuffer
    public typealias InboundOut = ByteBuffer
    public typealias OutboundIn = ByteBuffer
    public typealias OutboundOut = ByteBuffer

    public enum Side: Sendable {
        /// The house, with its identity.
        case house(IdentityKey)
        /// A client: a speaker with its identity, or a controller (nil). `acceptHouse` says
        /// whether the house that proved this identity is one to talk to (nil), or why not.
        case client(role: WireMessage.Hello.Role, identity: IdentityKey?, acceptHouse: @Sendable (PeerKey) -> String?)
    }

    private enum State {
        case awaitingClientHello
        case awaitingHouseHello(ephemeral: Curve25519.KeyAgreement.PrivateKey, hello: [UInt8], nonce: [UInt8])
        case awaitingIdentity(role: WireMessage.Hello.Role, houseKey: PeerKey, transcript: [UInt8], clock: ClockSyncKey, clientHello: [UInt8])
        case open
        case failed
    }

    private let side: Side
    private var state: State
    private var received: ByteBuffer?
    private var sealer: SecureRecordSealer?
    private var opener: SecureRecordOpener?
    /// The largest plaintext a record may carry once the channel is open and the peer trusted.
    private let maximumPlaintext: Int
    /// The largest until then (`trusted()`): a peer that has proved nothing holds a few KiB.
    private let openingPlaintext: Int
    private var activationHeld = false
    /// A record failed to open: nothing more is read.
    private var inputFailed = false

    /// - Parameters:
    ///   - maximumPlaintext: the largest record to take once open: a wire frame's limit and its header.
    ///   - openingPlaintext: on the house, the largest record from a peer not yet trusted
    ///     (`trusted()`): its hello, a speaker's status, a controller's proof.
    public init(side: Side, maximumPlaintext: Int = WireProtocol.defaultMaximumPayload + WireProtocol.headerSize,
                openingPlaintext: Int? = nil) {
        self.side = side
        self.maximumPlaintext = maximumPlaintext
        self.openingPlaintext = openingPlaintext ?? maximumPlaintext
        if case .house = side { state = .awaitingClientHello } else { state = .failed }
    }

    /// The peer proved it belongs to the household (an admitted speaker, a controller that
    /// proved the token): its records may now be as large as `maximumPlaintext`. On the loop.
    public func trusted() {
        opener?.maximumPlaintext = maximumPlaintext
        isTrusted = true
    }
    private var isTrusted = false

    public func channelActive(context: ChannelHandlerContext) {
        switch side {
        case .house:
            context.fireChannelActive()
        case .client(let role, _, _):
            let ephemeral = Curve25519.KeyAgreement.PrivateKey()
            let nonce = SecureHandshake.nonce()
            let hello = SecureHandshake.clientHello(role: role, ephemeral: ephemeral, nonce: nonce)
            state = .awaitingHouseHello(ephemeral: ephemeral, hello: hello, nonce: nonce)
            activationHeld = true
            context.writeAndFlush(wrapOutboundOut(context.channel.allocator.buffer(bytes: hello)), promise: nil)
        }
    }

    public func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        var incoming = unwrapInboundIn(data)
        if case .failed = state { return }
        guard !inputFailed else { return }
        if received == nil { received = incoming } else { received!.writeBuffer(&incoming) }
        do {
            while try step(context) {}
        } catch {
            if case .awaitingClientHello = state {
                // No keys yet: the refusal goes in the clear, as a plain goodbye, so that a
                // client of an older protocol, or a person with a stray tool, reads why.
                var goodbye = context.channel.allocator.buffer(capacity: 128)
                WireMessage.goodbye(reason: error.reason).encode(into: &goodbye)
                context.writeAndFlush(wrapOutboundOut(goodbye), promise: nil)
            }
            // Once open, a bad record ends the reading only: the goodbye that says why still goes
            // out sealed.
            if case .open = state { inputFailed = true } else { state = .failed }
            received = nil
            context.fireErrorCaught(error)
            return
        }
        // What was read is dropped: a ByteBuffer keeps its read bytes until told, and a peer
        // whose reads never end on a record's boundary would otherwise grow it without end.
        if received?.readableBytes == 0 { received = nil } else { received?.discardReadBytes() }
    }

    /// Takes the next whole message or record off `received`; false when it needs more bytes.
    private func step(_ context: ChannelHandlerContext) throws(SecureChannelError) -> Bool {
        guard var buffer = received else { return false }
        defer { received = buffer }
        switch state {
        case .awaitingClientHello:
            guard case .house(let identity) = side, let bytes = buffer.readBytes(length: SecureHandshake.clientHelloSize) else { return false }
            let (role, clientKey) = try SecureHandshake.parseClientHello(bytes)
            let (hello, transcript, keys) = try SecureHandshake.houseHello(answering: bytes, clientKey: clientKey, identity: identity)
            sealer = SecureRecordSealer(key: keys.houseToClient)
            opener = SecureRecordOpener(key: keys.clientToHouse, maximumPlaintext: SecureHandshake.identityRecordSize)
            state = .awaitingIdentity(role: role, houseKey: identity.publicKey, transcript: transcript, clock: keys.clock, clientHello: bytes)
            context.writeAndFlush(wrapOutboundOut(context.channel.allocator.buffer(bytes: hello)), promise: nil)
            return true
        case .awaitingHouseHello(let ephemeral, let clientHello, let nonce):
            guard case .client(let role, let identity, let acceptHouse) = side,
                  let bytes = buffer.readBytes(length: SecureHandshake.houseHelloSize) else { return false }
            let (houseKey, transcript, keys) = try SecureHandshake.readHouseHello(bytes, clientHello: clientHello, ephemeral: ephemeral)
            if let refusal = acceptHouse(houseKey) { throw SecureChannelError(refusal, isRefusedHouse: true) }
            sealer = SecureRecordSealer(key: keys.clientToHouse)
            opener = SecureRecordOpener(key: keys.houseToClient, maximumPlaintext: maximumPlaintext)
            let ownIdentity = identity.map { SecureHandshake.speakerIdentity($0, transcript: transcript, nonce: nonce) } ?? []
            var sealed = context.channel.allocator.buffer(capacity: ownIdentity.count + 20)
            sealer!.seal(context.channel.allocator.buffer(bytes: ownIdentity), into: &sealed)
            context.writeAndFlush(wrapOutboundOut(sealed), promise: nil)
            state = .open
            let session = SecureHandshake.Session(role: role, houseKey: houseKey, speakerKey: identity?.publicKey, binding: transcript, clock: keys.clock,
                                                  admissionCode: identity == nil ? "" : AdmissionCode.code(transcript: transcript, nonce: nonce))
            context.fireUserInboundEventTriggered(session)
            if activationHeld {
                activationHeld = false
                context.fireChannelActive()
            }
            return true
        case .awaitingIdentity(let role, let houseKey, let transcript, let clock, let clientHello):
            guard let record = try opener!.open(from: &buffer) else { return false }
            let bytes = Array(record.readableBytesView)
            var speakerKey: PeerKey?
            var code = ""
            switch role {
            case .speaker:
                let (key, nonce) = try SecureHandshake.readSpeakerIdentity(bytes, transcript: transcript, clientHello: clientHello)
                speakerKey = key
                code = AdmissionCode.code(transcript: transcript, nonce: nonce)
            case .controller:
                guard bytes.isEmpty else { throw SecureChannelError("a controller's handshake with an identity") }
            }
            opener!.maximumPlaintext = isTrusted ? maximumPlaintext : openingPlaintext
            state = .open
            context.fireUserInboundEventTriggered(SecureHandshake.Session(role: role, houseKey: houseKey, speakerKey: speakerKey, binding: transcript,
                                                                         clock: clock, admissionCode: code))
            return true
        case .open:
            guard let record = try opener!.open(from: &buffer) else { return false }
            context.fireChannelRead(wrapInboundOut(record))
            return true
        case .failed:
            return false
        }
    }

    public func channelInactive(context: ChannelHandlerContext) {
        // Passed on even when the handshake never finished (the handlers above were never told
        // the channel was active): they fail what waits for an answer.
        activationHeld = false
        context.fireChannelInactive()
    }

    public func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        guard case .open = state, sealer != nil else {
            promise?.fail(SecureChannelError("nothing is written before the secure channel is open"))
            return
        }
        let plaintext = unwrapOutboundIn(data)
        var sealed = context.channel.allocator.buffer(capacity: plaintext.readableBytes + 20)
        sealer!.seal(plaintext, into: &sealed)
        context.write(wrapOutboundOut(sealed), promise: promise)
    }
}
