import Crypto
import NIOCore
import NIOEmbedded
import Testing
@testable import TuttiProtocol

@Suite struct WireCodecTests {
    static let samples: [WireMessage] = [
        .hello(.init(role: .speaker, name: "Küche 🍳", codecs: ["flac", "pcm-f32le"], latencyNanoseconds: 12_500_000,
                     outputLeadNanoseconds: 95_000_000)),
        .hello(.init(role: .controller, name: "", codecs: [])),
        .hello(.init(role: .speaker, name: "hall", codecs: ["flac"], resume: .init(streamID: 4, epoch: 2, held: [-4096..<96000, 100_000..<(1 << 40)]))),
        .hello(.init(role: .speaker, name: "attic", resume: .init(streamID: 1, epoch: 0, held: []))),
        .welcome(.init(serverName: "house", clientID: 7)),
        .welcome(.init(serverName: "house", clientID: 8, challenge: Array(0..<32))),
        .authenticate(proof: Array(100..<132)),
        .admission(.init(isAdmitted: false, code: "372 737")),
        .admission(.init(isAdmitted: true)),
        .streamStart(.init(streamID: 3, codec: "flac", sampleRate: 48000, channelCount: 2, codecHeader: Array(0..<34))),
        .streamStart(.init(streamID: 5, codec: "pcm-f32le", sampleRate: 44100, channelCount: 1, codecHeader: [], epoch: 7)),
        .audioChunk(.init(streamID: 3, firstFrame: 1 << 40, frameCount: 2048, payload: (0..<5000).map { UInt8($0 % 251) })),
        .anchor(.init(streamID: 3, timelineFrame: -5, serverTime: Int64.max - 1, isPlaying: true)),
        .anchor(.init(streamID: 3, timelineFrame: 96000, serverTime: 1, isPlaying: false)),
        .flush(.init(streamID: 3, fromFrame: Int64.min)),
        .flush(.init(streamID: 3, fromFrame: 192_000, epoch: 3)),
        .streamEnd(.init(streamID: 3, endFrame: 12_345_678)),
        .volume(.init(level: 0.25, rampNanoseconds: 50_000_000)),
        .roomSettings(.init(name: "Küche links", latencyNanoseconds: 80_000_000)),
        .speakerStatus(.init(state: .playing, streamID: 3, playheadFrame: 42, bufferedUntilFrame: 14_400_000,
                             syncErrorNanoseconds: -1234, clockErrorNanoseconds: 5600, underruns: 2)),
        .speakerStatus(.init(state: .buffering, streamID: 4, playheadFrame: -1, bufferedUntilFrame: -1, syncErrorNanoseconds: 0,
                             clockErrorNanoseconds: -1, underruns: 0, fillRate: 180.5,
                             problem: "stream 4: cannot open its flac decoder: bad header; silent until the next stream")),
        .controlRequest(.init(requestID: 9, json: #"{"command":"play","files":["/a b.flac"]}"#)),
        .controlResponse(.init(requestID: 9, ok: false, json: #"{"error":"no such room"}"#)),
        .goodbye(reason: "server shutting down"),
    ]

    @Test func everyMessageRoundTrips() throws {
        for message in Self.samples {
            var buffer = ByteBuffer()
            message.encode(into: &buffer)
            let decoded = try WireMessage.decode(from: &buffer)
            #expect(decoded == message)
            #expect(buffer.readableBytes == 0)
        }
    }

    /// A stream of messages split at every possible byte boundary decodes to the same messages.
    @Test func decodesAcrossArbitrarySplits() throws {
        var whole = ByteBuffer()
        for message in Self.samples { message.encode(into: &whole) }
        let bytes = whole.readableBytesView.map { $0 }
        for chunkSize in [1, 2, 3, 7, 64, 1000] {
            let channel = EmbeddedChannel(handler: ByteToMessageHandler(WireMessageDecoder()))
            var index = 0
            while index < bytes.count {
                let end = min(bytes.count, index + chunkSize)
                try channel.writeInbound(ByteBuffer(bytes: bytes[index..<end]))
                index = end
            }
            var received: [WireMessage] = []
            while let message = try channel.readInbound(as: WireMessage.self) { received.append(message) }
            #expect(received == Self.samples, "chunk size \(chunkSize)")
            _ = try channel.finish()
        }
    }

    @Test func encoderHandlerWritesFrames() throws {
        let channel = EmbeddedChannel(handler: MessageToByteHandler(WireMessageEncoder()))
        try channel.writeOutbound(Self.samples[2])
        var out = try #require(try channel.readOutbound(as: ByteBuffer.self))
        #expect(try WireMessage.decode(from: &out) == Self.samples[2])
    }

    static func frame(type: UInt8, payload: [UInt8], magic: UInt16 = WireProtocol.magic, version: UInt8 = UInt8(WireProtocol.version), length: UInt32? = nil) -> ByteBuffer {
        var buffer = ByteBuffer()
        buffer.writeInteger(magic)
        buffer.writeInteger(version)
        buffer.writeInteger(type)
        buffer.writeInteger(length ?? UInt32(payload.count))
        buffer.writeBytes(payload)
        return buffer
    }

    @Test(arguments: [
        (frame(type: 1, payload: [], magic: 0x4745), "not a Tutti stream (bad magic 0x4745)"),
        (frame(type: 1, payload: [], version: 9), "protocol version 9 not supported (this build speaks 8)"),
        (frame(type: 99, payload: []), "unknown message type 99"),
        (frame(type: 4, payload: [], length: 100_000_000), "message of 100000000 bytes exceeds the limit of 4194304"),
        (frame(type: 6, payload: [0, 0, 0, 1, 0, 0]), "flush message is truncated"),
        (frame(type: 12, payload: [0, 2, 0xC3, 0x28]), "goodbye message has invalid UTF-8 text"),
        (frame(type: 7, payload: [UInt8](repeating: 0, count: 13)), "streamEnd message has 1 unexpected trailing bytes"),
        (frame(type: 1, payload: [5, 0, 1, 0, 0, 0, 0]), "hello: unknown role 5"),
        (frame(type: 1, payload: [1, 0, 4, 0, 0, 0, 0] + [UInt8](repeating: 0, count: 16) + [1, 0, 0, 0, 1, 0, 0, 0, 0, 9]),
         "hello: 9 held ranges, more than 8"),
        // Latency and output lead are added to the house's clock: a hostile value must not overflow it.
        (frame(type: 1, payload: [1, 0, 4, 0, 0, 0, 0] + [UInt8](repeating: 0xFF, count: 8) + [UInt8](repeating: 0, count: 9)),
         "hello: latency -1 ns is outside 0…10 s"),
        (frame(type: 1, payload: [1, 0, 4, 0, 0, 0, 0] + [UInt8](repeating: 0, count: 8) + [0x40] + [UInt8](repeating: 0, count: 8)),
         "hello: output lead 4611686018427387904 ns is outside 0…10 s"),
        (frame(type: 1, payload: [1, 0, 4, 0, 0, 0, 0] + [UInt8](repeating: 0, count: 16) + [1, 0, 0, 0, 1, 0, 0, 0, 0, 1]
            + [0, 0, 0, 0, 0, 0, 0, 5] + [0, 0, 0, 0, 0, 0, 0, 5]), "hello: held range 5..<5 is empty or out of order"),
        (frame(type: 5, payload: [UInt8](repeating: 0, count: 20) + [7]), "anchor message has an invalid flag 7"),
        (frame(type: 8, payload: [0x7F, 0xC0, 0, 0] + [UInt8](repeating: 0, count: 8)), "volume: invalid level nan"),
        (frame(type: 13, payload: [0, 1, 0x41] + [0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF]), "roomSettings: invalid latency -1 ns"),
        (frame(type: 13, payload: [0, 0] + [UInt8](repeating: 0, count: 8)), "roomSettings: a room name must be 1 to 64 bytes"),
        // The house reports a room's fill rate as JSON, which has no infinity.
        (frame(type: 9, payload: [2] + [UInt8](repeating: 0, count: 40) + [0x7F, 0x80, 0, 0] + [0, 0]), "speakerStatus: invalid fill rate inf"),
        (frame(type: 3, payload: [0, 0, 0, 1, 0, 4] + Array("flac".utf8) + [0, 0, 0, 0, 2, 0, 0, 0, 0]), "streamStart: invalid format 0 Hz × 2"),
    ])
    func malformedInputIsRejectedWithAReason(input: ByteBuffer, reason: String) {
        var buffer = input
        #expect(throws: WireError(reason)) { _ = try WireMessage.decode(from: &buffer) }
    }

    @Test func incompleteFrameWaitsForMoreBytes() throws {
        var full = ByteBuffer()
        Self.samples[4].encode(into: &full)
        var partial = full.getSlice(at: 0, length: full.readableBytes - 1)!
        #expect(try WireMessage.decode(from: &partial) == nil)
        #expect(partial.readableBytes == full.readableBytes - 1)
    }

    /// In a pipeline, garbage raises the error (which closes only that connection).
    @Test func decoderHandlerRaisesErrors() throws {
        let channel = EmbeddedChannel(handler: ByteToMessageHandler(WireMessageDecoder()))
        #expect(throws: WireError.self) { try channel.writeInbound(ByteBuffer(string: "GET / HTTP/1.1\r\n\r\n")) }
        _ = try? channel.finish()
    }

    @Test func clockSyncPacketsRoundTripAndRejectGarbage() throws {
        let packet = ClockSyncPacket(isReply: true, sequence: 77, clientSend: -3, serverReceive: 1 << 50, serverSend: (1 << 50) + 999)
        let bytes = packet.encoded()
        #expect(bytes.count == ClockSyncPacket.size)
        #expect(try ClockSyncPacket(decoding: bytes) == packet)
        #expect(throws: WireError("clock-sync packet of 3 bytes (expected 58)")) { try ClockSyncPacket(decoding: [1, 2, 3]) }
        var wrong = bytes
        wrong[0] = 0
        #expect(throws: WireError("not a Tutti clock-sync packet")) { try ClockSyncPacket(decoding: wrong) }
        var kind = bytes
        kind[5] = 9
        #expect(throws: WireError("clock-sync packet of unknown kind 9")) { try ClockSyncPacket(decoding: kind) }
    }

    /// A tagged packet carries its session and verifies under its key only: a forged reply (any
    /// other key, a changed field, the tag of a request on a reply) does not pass for one.
    @Test func clockSyncTagsVerifyUnderTheirSessionKeyOnly() throws {
        let key = ClockSyncKey(sessionID: 0xFEED, key: SymmetricKey(size: .bits256))
        let reply = ClockSyncPacket(isReply: true, sequence: 9, clientSend: 10, serverReceive: 20, serverSend: 30)
        let bytes = reply.encoded(key: key)
        #expect(try ClockSyncPacket(decoding: bytes).sessionID == 0xFEED)
        #expect(ClockSyncPacket.isAuthentic(bytes, key: key))
        #expect(!ClockSyncPacket.isAuthentic(reply.encoded(), key: key), "untagged")
        #expect(!ClockSyncPacket.isAuthentic(bytes, key: ClockSyncKey(sessionID: 0xFEED, key: SymmetricKey(size: .bits256))), "another key")
        for index in [5, 12, 30, 40, 50] {
            var altered = bytes
            altered[index] ^= 0x01
            #expect(!ClockSyncPacket.isAuthentic(altered, key: key), "byte \(index) changed")
        }
        var asRequest = bytes
        asRequest[5] = 1
        #expect(!ClockSyncPacket.isAuthentic(asRequest, key: key), "a reply turned into a request")
    }
}
