import Crypto
import FoundationEssentials
import NIOCore
import NIOEmbedded
import Synchronization
import TuttiCore
import TuttiMedia
import TuttiProtocol

/// A broken invariant: the decoder accepted the input but what it made of it is inconsistent.
/// The fuzz targets turn it into a crash (what libFuzzer reports); the corpus replay test
/// reports it as a failure naming the file.
public struct FuzzFailure: Error, CustomStringConvertible {
    public let description: String
    init(_ description: String) { self.description = description }
}

/// What each libFuzzer target (Fuzz/Targets/fuzz-*/main.swift) runs on one input: the real
/// decoders, then the invariants that hold for every input they accept. Rejecting an input is
/// always fine; crashing, hanging or accepting it inconsistently is the bug.
///
/// Every entry is a function of its input alone (no threads; the one cache, `reencoder`, does
/// not change outcomes), so a crash reproduces from its input file.
public enum FuzzHarness {
    /// The targets by name, as scripts/fuzz.sh and the replay test know them.
    public static let targets: [String: @Sendable (UnsafeRawBufferPointer) throws(FuzzFailure) -> Void] = [
        "fuzz-wire": { data throws(FuzzFailure) in try wire(data) },
        "fuzz-clocksync": { data throws(FuzzFailure) in try clockSync(data) },
        "fuzz-control": { data throws(FuzzFailure) in try control(data) },
        "fuzz-streamparser": { data throws(FuzzFailure) in try streamParser(data) },
        "fuzz-chunkdecoder": { data throws(FuzzFailure) in try chunkDecoder(data) },
        "fuzz-hls": { data throws(FuzzFailure) in try hls(data) },
        "fuzz-lines": { data throws(FuzzFailure) in try lines(data) },
        "fuzz-mpd": { data throws(FuzzFailure) in try mpdCommandLine(data) },
        "fuzz-icy": { data throws(FuzzFailure) in try icy(data) },
        "fuzz-secure": { data throws(FuzzFailure) in try secure(data) },
        "fuzz-snapcast": { data throws(FuzzFailure) in try snapcast(data) },
        "fuzz-jsonrpc": { data throws(FuzzFailure) in try jsonRPC(data) },
        "fuzz-httpbody": { data throws(FuzzFailure) in try httpBody(data) },
        "fuzz-rtsp": { data throws(FuzzFailure) in try rtsp(data) },
        "fuzz-raop": { data throws(FuzzFailure) in try raop(data) },
        "fuzz-airplay2": { data throws(FuzzFailure) in try airPlay2(data) },
    ]

    /// One libFuzzer input through `target`: a broken invariant becomes the crash libFuzzer
    /// reports, with the invariant's words. What each target's `LLVMFuzzerTestOneInput` returns.
    public static func runOrCrash(_ target: (UnsafeRawBufferPointer) throws(FuzzFailure) -> Void,
                                  _ start: UnsafePointer<UInt8>?, _ count: Int) -> CInt {
        do {
            try target(UnsafeRawBufferPointer(start: start, count: count))
        } catch {
            fatalError(error.description)
        }
        return 0
    }

    // MARK: AirPlay

    /// The bytes of an AirPlay sender's RTSP connection. Read whole and read in two parts (split
    /// where the first byte says), the parser gives the same requests and the same refusal; each
    /// request written out again reads back as itself; every body goes through the SDP and DMAP
    /// readers, and an accepted announcement is within AirPlay's ranges.
    public static func rtsp(_ data: UnsafeRawBufferPointer) throws(FuzzFailure) {
        let bytes = Array(data)
        func readAll(_ parts: [ArraySlice<UInt8>]) -> (requests: [RTSPRequest], refusal: RTSPRequestParser.Refusal?) {
            var parser = RTSPRequestParser()
            var requests: [RTSPRequest] = []
            for part in parts {
                parser.append(part)
                do throws(RTSPRequestParser.Refusal) {
                    while let request = try parser.next() { requests.append(request) }
                } catch {
                    return (requests, error)
                }
            }
            return (requests, nil)
        }
        let whole = readAll([bytes[...]])
        let split = bytes.isEmpty ? 0 : Int(bytes[0]) % (bytes.count + 1)
        let parts = readAll([bytes[..<split], bytes[split...]])
        guard whole.requests == parts.requests, whole.refusal == parts.refusal else {
            throw FuzzFailure("rtsp: read whole, \(whole.requests.count) requests and \(String(describing: whole.refusal)); split at \(split), \(parts.requests.count) and \(String(describing: parts.refusal))")
        }
        try rtspResponses(bytes, split: split)
        for request in whole.requests {
            var parser = RTSPRequestParser()
            parser.append(request.encoded)
            let again: RTSPRequest?
            do throws(RTSPRequestParser.Refusal) { again = try parser.next() } catch {
                throw FuzzFailure("rtsp: \(request.method) \(request.uri) written out again is refused: \(error.message)")
            }
            guard again == request, parser.bufferedCount == 0 else { throw FuzzFailure("rtsp: \(request.method) \(request.uri) written out again reads as \(String(describing: again))") }
            _ = DMAPTags(request.body)
            if let announcement = try? RAOPAnnouncement(sdp: request.body) {
                guard (8000...192_000).contains(announcement.sampleRate), (1...2).contains(announcement.channelCount),
                      (1...4096).contains(announcement.framesPerPacket), announcement.bitsPerSample == 16 else {
                    throw FuzzFailure("rtsp: an announcement out of range accepted: \(announcement)")
                }
            }
        }
    }

    /// The same bytes as a receiver's replies to a sender (an AirPlay room): read whole and in
    /// two parts alike, and each reply written out again reads back as itself.
    static func rtspResponses(_ bytes: [UInt8], split: Int) throws(FuzzFailure) {
        func readAll(_ parts: [ArraySlice<UInt8>]) -> (responses: [RTSPResponse], failure: RTSPResponseParser.Failure?) {
            var parser = RTSPResponseParser()
            var responses: [RTSPResponse] = []
            for part in parts {
                parser.append(part)
                do throws(RTSPResponseParser.Failure) {
                    while let response = try parser.next() { responses.append(response) }
                } catch {
                    return (responses, error)
                }
            }
            return (responses, nil)
        }
        let whole = readAll([bytes[...]])
        let parts = readAll([bytes[..<split], bytes[split...]])
        guard whole.responses == parts.responses, whole.failure == parts.failure else {
            throw FuzzFailure("rtsp replies: read whole, \(whole.responses.count) and \(String(describing: whole.failure)); split at \(split), \(parts.responses.count) and \(String(describing: parts.failure))")
        }
        for response in whole.responses {
            var parser = RTSPResponseParser()
            parser.append(response.encoded)
            let again: RTSPResponse?
            do throws(RTSPResponseParser.Failure) { again = try parser.next() } catch {
                throw FuzzFailure("rtsp replies: \(response.status) written out again is refused: \(error.message)")
            }
            guard again == response, parser.bufferedCount == 0 else { throw FuzzFailure("rtsp replies: \(response.status) written out again reads as \(String(describing: again))") }
        }
    }

    /// A run of datagrams to a receiver (each a 16-bit big-endian length, then that many bytes). Each that
    /// parses writes out to a datagram that parses the same; every audio payload goes through
    /// both decoders, whose frame counts match the samples they append; the audio packets go
    /// through the reorder buffer, which releases each sequence number once, consecutively (but
    /// for a jump, which starts again at its run).
    public static func raop(_ data: UnsafeRawBufferPointer) throws(FuzzFailure) {
        let bytes = Array(data)
        let l16 = RAOPAudioDecoder(announcement: RAOPAnnouncement(encoding: .l16, sampleRate: 44100, channelCount: 2))
        let alac = RAOPAudioDecoder(announcement: RAOPAnnouncement(encoding: .appleLossless, sampleRate: 44100, channelCount: 2, framesPerPacket: 352))
        var reorder = RAOPReorderBuffer(patience: 8)
        var nextReleased: UInt16?
        var index = 0
        while index < bytes.count {
            guard index + 2 <= bytes.count else { break }
            let length = Int(bytes[index]) << 8 | Int(bytes[index + 1])
            let datagram = Array(bytes[(index + 2)..<min(bytes.count, index + 2 + length)])
            index += 2 + length
            guard let packet = RAOPPacket(datagram) else { continue }
            guard RAOPPacket(packet.encoded) == packet else { throw FuzzFailure("raop: \(packet) written out reads as \(String(describing: RAOPPacket(packet.encoded)))") }
            guard case .audio(let audio) = packet else { continue }
            for decoder in [l16, alac] {
                var samples: [Int16] = [1]
                if let frames = try? decoder.decode(audio.payload, into: &samples) {
                    if samples.count != 1 + frames * 2 {
                        throw FuzzFailure("raop: \(decoder.announcement.encoding) says \(frames) frames and appended \(samples.count - 1) samples")
                    }
                    // What a sender (an AirPlay room) encodes from them decodes to them again.
                    guard frames >= 1, frames <= decoder.announcement.framesPerPacket else { continue }
                    let payload = samples.withUnsafeBufferPointer { RAOPAudioEncoder(announcement: decoder.announcement).encode(UnsafeBufferPointer(rebasing: $0[1...]), frames: frames) }
                    var again: [Int16] = []
                    guard (try? decoder.decode(payload, into: &again)) == frames, again == Array(samples[1...]) else {
                        throw FuzzFailure("raop: \(frames) frames encoded as \(decoder.announcement.encoding) do not decode to themselves")
                    }
                }
            }
            let jumps = reorder.jumps
            let released = reorder.receive(audio).released
            // A jump (a run of packets far ahead) starts the order again at the run.
            let runStart = reorder.jumps > jumps ? released.count - RAOPReorderBuffer.jumpRun : -1
            for (index, (sequence, _)) in released.enumerated() {
                if let expected = nextReleased, sequence != expected, index != runStart { throw FuzzFailure("raop: released \(sequence) after \(expected &- 1)") }
                nextReleased = sequence &+ 1
            }
        }
    }

    /// What an AirPlay 2 sender sends before its audio: the same bytes as a pairing message
    /// (`TLV8`) and as a SETUP body (`AirPlay2Setup`, a binary property list). An accepted TLV8
    /// written out again reads back as itself; an accepted stream's audio is one this receiver
    /// takes (16-bit stereo at 44.1 or 48 kHz, 1–4096 frames a packet).
    public static func airPlay2(_ data: UnsafeRawBufferPointer) throws(FuzzFailure) {
        let bytes = Array(data)
        if let message = try? TLV8(parsing: bytes) {
            let again = try? TLV8(parsing: message.encoded)
            guard again == message else { throw FuzzFailure("airplay2: a TLV8 of \(message.items.count) items written out reads as \(String(describing: again?.items.count))") }
        }
        guard let setup = try? AirPlay2Setup(body: bytes) else { return }
        for stream in setup.streams ?? [] {
            guard let announcement = try? AirPlay2Setup.announcement(for: stream) else { continue }
            guard [44100, 48000].contains(announcement.sampleRate), announcement.channelCount == 2, announcement.bitsPerSample == 16,
                  (1...4096).contains(announcement.framesPerPacket) else {
                throw FuzzFailure("airplay2: a stream taken out of range: \(announcement)")
            }
        }
    }

    // MARK: Wire protocol

    /// The bytes of a TCP connection: frames decoded one after another until the decoder wants
    /// more bytes or refuses them. Every accepted frame re-encodes to exactly its own bytes (the
    /// encoding is canonical), decodes again to the same message, and every proper prefix of it
    /// decodes to "not complete yet" without consuming anything.
    public static func wire(_ data: UnsafeRawBufferPointer) throws(FuzzFailure) {
        let bytes = Array(data)
        var buffer = ByteBuffer(bytes: bytes)
        while true {
            let start = buffer.readerIndex
            let message: WireMessage?
            do {
                message = try WireMessage.decode(from: &buffer)
            } catch {
                _ = error.description  // the line the connection's handler logs
                return
            }
            guard let message else {
                guard buffer.readerIndex == start else { throw FuzzFailure("wire: an incomplete frame consumed bytes") }
                return
            }
            _ = message.kindName
            // The buffer's indices are offsets into the input: it started at 0 and never moved.
            let frame = bytes[start..<buffer.readerIndex]
            var encoded = ByteBuffer()
            message.encode(into: &encoded)
            guard encoded.readableBytesView.elementsEqual(frame) else {
                throw FuzzFailure("wire: \(message.kindName) of \(frame.count) bytes re-encodes to \(encoded.readableBytes) different bytes")
            }
            var again = encoded
            let decodedAgain: WireMessage?
            do {
                decodedAgain = try WireMessage.decode(from: &again)
            } catch {
                throw FuzzFailure("wire: the re-encoded \(message.kindName) is refused: \(error)")
            }
            // A float field may be NaN (speakerStatus.fillRate), which is unequal to itself:
            // then the identical bytes above are the round trip.
            guard let decodedAgain, decodedAgain == message || message != message, again.readableBytes == 0 else {
                throw FuzzFailure("wire: the re-encoded \(message.kindName) decodes to something else")
            }
            try expectIncomplete(frame, headerSize: WireProtocol.headerSize, what: "wire: a valid \(message.kindName)") { try WireMessage.decode(from: &$0) }
        }
    }

    // MARK: Snapcast's stream protocol

    /// The bytes a snapclient sends the house's Snapcast stream port (1704): messages read one
    /// after another (`SnapcastMessage.read`) until it wants more bytes or refuses them. An
    /// accepted message written again (`write`) reads back as the same message and nothing
    /// more; the first bytes of it, short of its end, read as "not complete yet" without
    /// consuming anything; a hello names a room. (Not "the same bytes": a body may carry bytes
    /// after what its type reads, and JSON is written in one canonical form of many.)
    public static func snapcast(_ data: UnsafeRawBufferPointer) throws(FuzzFailure) {
        let bytes = Array(data)
        var buffer = ByteBuffer(bytes: bytes)
        while true {
            let start = buffer.readerIndex
            let message: SnapcastMessage?
            do {
                message = try SnapcastMessage.read(from: &buffer)
            } catch {
                _ = error.description  // the line the bridge logs before it closes the connection
                return
            }
            guard let message else {
                guard buffer.readerIndex == start else { throw FuzzFailure("snapcast: an incomplete message consumed bytes") }
                return
            }
            let frame = bytes[start..<buffer.readerIndex]
            var encoded = ByteBuffer()
            message.write(to: &encoded)
            let again: SnapcastMessage?
            do {
                again = try SnapcastMessage.read(from: &encoded)
            } catch {
                throw FuzzFailure("snapcast: a message of type \(message.kind) written again is refused: \(error)")
            }
            guard again == message, encoded.readableBytes == 0 else {
                throw FuzzFailure("snapcast: a message of type \(message.kind) written again reads as \(String(describing: again))")
            }
            if case .hello(let hello) = message.payload, hello.roomName.isEmpty {
                throw FuzzFailure("snapcast: a hello names no room: \(hello)")
            }
            try expectIncomplete(frame, headerSize: SnapcastMessage.headerSize, what: "snapcast: a valid message of type \(message.kind)") {
                try SnapcastMessage.read(from: &$0)
            }
        }
    }

    /// Every proper prefix of a valid frame that a stream decoder may see (one byte short, the
    /// header, one byte short of it) reads as "not complete yet", consuming nothing.
    static func expectIncomplete<Message>(_ frame: ArraySlice<UInt8>, headerSize: Int, what: String,
                                          read: (inout ByteBuffer) throws -> Message?) throws(FuzzFailure) {
        for length in Set([frame.count - 1, headerSize, headerSize - 1]) where length >= 0 && length < frame.count {
            var prefix = ByteBuffer(bytes: frame.prefix(length))
            let partial: Message?
            do { partial = try read(&prefix) } catch {
                throw FuzzFailure("\(what): its first \(length) bytes are refused: \(error)")
            }
            guard partial == nil, prefix.readerIndex == 0 else {
                throw FuzzFailure("\(what): its first \(length) of \(frame.count) bytes read as complete")
            }
        }
    }

    // MARK: JSON-RPC (Snapcast's control API)

    /// One message to Snapcast's control API (a line on its port, an HTTP body or a WebSocket
    /// message at `/jsonrpc`) read as `JSONRPCInput`: a refusal is a parse error or an invalid
    /// request; a batch holds 1 to `maximumBatchLength` entries; each request written as JSON
    /// reads back as itself; a known method's params read as their type or are refused in one
    /// line.
    public static func jsonRPC(_ data: UnsafeRawBufferPointer) throws(FuzzFailure) {
        // What the message is as plain JSON, read apart from the parser under test.
        let raw = try? JSONDecoder().decode(JSONValue.self, from: Data(data))
        let entries: [JSONRPCInput.Entry]
        let rawEntries: [JSONValue]
        switch JSONRPCInput(parsing: data) {
        case .refused(let error):
            let expected: Bool
            switch raw {
            case nil: expected = error.code == -32700
            case .array(let batch)?: expected = error.code == -32600 && (batch.isEmpty || batch.count > JSONRPCInput.maximumBatchLength)
            default: expected = false
            }
            guard expected, error.id == .null else { throw FuzzFailure("jsonrpc: a message refused with \(error)") }
            return
        case .single(let entry):
            guard let raw else { throw FuzzFailure("jsonrpc: a message that is not JSON read as a request") }
            entries = [entry]
            rawEntries = [raw]
        case .batch(let batch):
            guard case .array(let array)? = raw, !batch.isEmpty, batch.count <= JSONRPCInput.maximumBatchLength, batch.count == array.count else {
                throw FuzzFailure("jsonrpc: a batch of \(batch.count) taken")
            }
            entries = batch
            rawEntries = array
        }
        for (entry, value) in zip(entries, rawEntries) {
            // Each entry is the request its JSON holds, or invalid when it holds none.
            let method: String?
            if case .string(let name)? = value["method"] { method = name } else { method = nil }
            switch entry {
            case .invalid(let error):
                guard method == nil, error.code == -32600, sameJSON(error.id, value["id"] ?? .null) else {
                    throw FuzzFailure("jsonrpc: \(value) answered with \(error)")
                }
                continue
            case .request(let request):
                guard request.method == method, sameJSON(request.id, value["id"]), sameJSON(request.params, value["params"]) else {
                    throw FuzzFailure("jsonrpc: \(value) read as \(request)")
                }
            }
            guard case .request(let request) = entry else { continue }
            let json: Data
            do { json = try JSONEncoder().encode(request.json) } catch {
                throw FuzzFailure("jsonrpc: a request read from JSON cannot be written: \(error)")
            }
            guard case .single(.request(let again)) = JSONRPCInput(parsing: json), again.method == request.method,
                  sameJSON(again.id, request.id), sameJSON(again.params, request.params) else {
                throw FuzzFailure("jsonrpc: \(request) written as \(String(decoding: json, as: UTF8.self)) reads back otherwise")
            }
            guard let type = SnapcastParams.types[request.method] else { continue }
            do throws(SnapcastParams.Invalid) { _ = try SnapcastParams.read(type, request.params) } catch {
                guard !error.message.isEmpty, !error.message.contains(where: \.isNewline) else { throw FuzzFailure("jsonrpc: params refused with \"\(error.message)\"") }
            }
        }
    }

    /// JSON values alike up to how a number is held: 100 read back from 1e2 is an integer.
    static func sameJSON(_ a: JSONValue?, _ b: JSONValue?) -> Bool {
        switch (a, b) {
        case (nil, nil): return true
        case (.integer(let x)?, .number(let y)?), (.number(let y)?, .integer(let x)?): return Double(x) == y
        case (.array(let x)?, .array(let y)?): return x.count == y.count && zip(x, y).allSatisfy { sameJSON($0, $1) }
        case (.object(let x)?, .object(let y)?): return x.keys == y.keys && x.allSatisfy { sameJSON($0.value, y[$0.key]) }
        default: return a == b
        }
    }

    // MARK: HTTP API bodies

    /// The commands the HTTP API's routes may name (docs/HTTP-API.md), and nil for `/api/control`.
    public static let routeCommands: [String?] = [nil] + ControlCommand.names

    /// An HTTP API request's body, through `ControlJSON.decodeRequest(body:command:fields:)`
    /// as the routes call it. Byte 0 picks the route's command (`routeCommands`), byte 1 the
    /// fields its path gives (none, a room, an index, a group's name). A request read is the
    /// route's command, and survives its own JSON round trip; a refusal survives its own.
    public static func httpBody(_ data: UnsafeRawBufferPointer) throws(FuzzFailure) {
        guard data.count >= 2 else { return }
        let command = routeCommands[Int(data[0]) % routeCommands.count]
        let fields: [String: JSONValue] = switch data[1] % 4 {
        case 0: [:]
        case 1: ["room": .string("kitchen")]
        case 2: ["index": .integer(3)]
        default: ["name": .string("Küche")]
        }
        let request: ControlRequest
        do {
            request = try ControlJSON.decodeRequest(body: UnsafeRawBufferPointer(rebasing: data[2...]), command: command, fields: fields)
        } catch {
            guard ControlJSON.decodeRefusal(ControlJSON.encode(error)) == error, !error.error.contains(where: \.isNewline) else {
                throw FuzzFailure("httpbody: the refusal \"\(error)\" does not survive its JSON round trip, or is not one line")
            }
            return
        }
        if let command, request.command.name != command {
            throw FuzzFailure("httpbody: the route of \(command) performed \(request.command.name)")
        }
        _ = request.command.problem
        let json = ControlJSON.encode(request)
        let again: ControlRequest
        do { again = try ControlJSON.decodeRequest(json) } catch {
            throw FuzzFailure("httpbody: \(request) encodes to \(json), which is refused: \(error)")
        }
        guard again == request else { throw FuzzFailure("httpbody: \(request) round-trips to \(again) through \(json)") }
    }

    // MARK: Clock sync

    /// One UDP datagram. An accepted packet re-encodes to exactly the datagram; the contiguous
    /// (ByteBuffer view) and non-contiguous read paths agree.
    public static func clockSync(_ data: UnsafeRawBufferPointer) throws(FuzzFailure) {
        let bytes = Array(data)
        let viaBuffer = Result { () throws(WireError) in try ClockSyncPacket(decoding: ByteBuffer(bytes: bytes).readableBytesView) }
        let viaArray = Result { () throws(WireError) in try ClockSyncPacket(decoding: bytes) }
        // A lazy map has no contiguous storage: the copying path.
        let viaCopy = Result { () throws(WireError) in try ClockSyncPacket(decoding: bytes.lazy.map { $0 }) }
        guard viaBuffer == viaArray, viaArray == viaCopy else {
            throw FuzzFailure("clocksync: the read paths disagree: \(viaBuffer), \(viaArray), \(viaCopy)")
        }
        guard case .success(let packet) = viaArray else { return }
        // The fields re-encode to the same bytes; the tag is the key holder's to check.
        guard packet.encoded().prefix(ClockSyncPacket.size - 16) == bytes.prefix(ClockSyncPacket.size - 16) else {
            throw FuzzFailure("clocksync: \(packet) re-encodes to different bytes")
        }
        // Under the seeds' key: a packet is authentic exactly when it is what that key makes of
        // its fields, and a packet with any other tag is not.
        let authentic = ClockSyncPacket.isAuthentic(bytes, key: clockSyncSeedKey)
        guard authentic == (packet.encoded(key: clockSyncSeedKey) == bytes) else {
            throw FuzzFailure("clocksync: isAuthentic says \(authentic) for \(packet) whose tag \(authentic ? "is not" : "is") the key's")
        }
    }

    /// The key the clock-sync seeds are tagged with (Fuzz/Corpus/fuzz-clocksync), so that the
    /// fuzzer starts from authentic packets.
    public static let clockSyncSeedKey = ClockSyncKey(sessionID: 0x5EED, key: SymmetricKey(data: [UInt8](repeating: 0x42, count: 32)))

    // MARK: The secure channel

    /// A stranger's bytes to the house's wire port, through the house's side of the secure
    /// channel (`SecureChannelHandler`) in an embedded pipeline; byte 0 sets the size the rest
    /// arrives in (1–64 bytes at a time). Fed whole and in pieces, the same refusal (or none);
    /// and no plain byte ever comes out: a record opens only under a key the handshake agreed,
    /// which bytes chosen without seeing the house's reply cannot hold.
    public static func secure(_ data: UnsafeRawBufferPointer) throws(FuzzFailure) {
        guard data.count >= 1 else { return }
        let pieceSize = Int(data[0]) % 64 + 1
        let input = Array(data.dropFirst())
        func run(inPiecesOf size: Int) throws(FuzzFailure) -> [String] {
            let above = SecureFuzzPeer()
            let channel = EmbeddedChannel(handlers: [SecureChannelHandler(side: .house(secureFuzzIdentity), openingPlaintext: 4096 + 8), above])
            var offset = 0
            while offset < input.count {
                let end = min(input.count, offset + size)
                do { try channel.writeInbound(ByteBuffer(bytes: input[offset..<end])) } catch {
                    throw FuzzFailure("secure: the pipeline threw \(error)")
                }
                offset = end
            }
            _ = try? channel.finish()
            guard above.plainBytes == 0 else { throw FuzzFailure("secure: \(above.plainBytes) plain bytes came out of records no key sealed") }
            guard above.errors.count <= 1 else { throw FuzzFailure("secure: \(above.errors.count) errors, reading on after the first: \(above.errors)") }
            return above.errors
        }
        let whole = try run(inPiecesOf: max(1, input.count))
        let pieces = try run(inPiecesOf: pieceSize)
        guard whole == pieces else { throw FuzzFailure("secure: whole \(whole), in pieces of \(pieceSize) \(pieces)") }
    }

    /// The house's identity in the secure-channel target: fixed, so a crash reproduces.
    static let secureFuzzIdentity = IdentityKey(text: "QkJCQkJCQkJCQkJCQkJCQkJCQkJCQkJCQkJCQkJCQkI")!

    /// Above the secure channel: what comes out of it.
    final class SecureFuzzPeer: ChannelInboundHandler {
        typealias InboundIn = ByteBuffer
        var plainBytes = 0
        var errors: [String] = []
        func channelRead(context: ChannelHandlerContext, data: NIOAny) { plainBytes += Self.unwrapInboundIn(data).readableBytes }
        func errorCaught(context: ChannelHandlerContext, error: any Error) { errors.append("\(error)") }
    }

    // MARK: Line protocols

    /// A line-protocol connection's bytes (MPD, Snapcast's control API) to `LineFrameDecoder`:
    /// byte 0 sets the longest line allowed (1–256 bytes), byte 1 the size the rest arrives in
    /// (1–16 bytes at a time). Fed at once and in pieces, the same lines come out and the same
    /// refusal; every line is within the limit and holds no newline; with no refusal, the
    /// lines and their newlines, then what is left waiting, are the input.
    public static func lines(_ data: UnsafeRawBufferPointer) throws(FuzzFailure) {
        guard data.count >= 2 else { return }
        let maximum = Int(data[0]) + 1, pieceSize = Int(data[1]) % 16 + 1
        let input = Array(data.dropFirst(2))
        func split(inPiecesOf size: Int) -> (lines: [[UInt8]], refused: Bool, left: [UInt8]) {
            var buffer = ByteBuffer()
            var lines: [[UInt8]] = []
            var offset = 0
            while offset < input.count {
                let end = min(input.count, offset + size)
                buffer.writeBytes(input[offset..<end])
                offset = end
                do {
                    while let line = try LineFrameDecoder.nextLine(from: &buffer, maximumLength: maximum) { lines.append(Array(line.readableBytesView)) }
                } catch {
                    return (lines, true, [])
                }
            }
            return (lines, false, Array(buffer.readableBytesView))
        }
        let whole = split(inPiecesOf: max(1, input.count)), pieces = split(inPiecesOf: pieceSize)
        guard whole.lines == pieces.lines, whole.refused == pieces.refused else {
            throw FuzzFailure("lines: \(whole.lines.count) lines (refused: \(whole.refused)) at once, \(pieces.lines.count) (refused: \(pieces.refused)) in pieces of \(pieceSize)")
        }
        for line in whole.lines where line.count > maximum || line.contains(UInt8(ascii: "\n")) {
            throw FuzzFailure("lines: a line of \(line.count) bytes (limit \(maximum)) or with a newline in it")
        }
        guard !whole.refused else { return }
        guard whole.lines.flatMap({ $0 + [UInt8(ascii: "\n")] }) + whole.left == input, whole.left.count <= maximum,
              !whole.left.contains(UInt8(ascii: "\n")) else {
            throw FuzzFailure("lines: the lines and what is left are not the input")
        }
    }

    /// One MPD request line to `MPDCommandLine.split`, as MPD splits it. An accepted line's
    /// words, each quoted again (`MPDCommandLine.quoted`), split into the same words.
    public static func mpdCommandLine(_ data: UnsafeRawBufferPointer) throws(FuzzFailure) {
        let text = String(decoding: data, as: UTF8.self)
        let line: MPDCommandLine
        do throws(MPDCommandLine.Refusal) { line = try MPDCommandLine.split(text) } catch { return }
        guard !line.name.isEmpty || text.contains("\"") else { throw FuzzFailure("mpd: an empty command name from a line without quotes") }
        let requoted = ([line.name] + line.arguments).map(MPDCommandLine.quoted).joined(separator: " ")
        let again: MPDCommandLine
        do throws(MPDCommandLine.Refusal) { again = try MPDCommandLine.split(requoted) } catch {
            throw FuzzFailure("mpd: \(line) quoted again is refused: \(error.message)")
        }
        guard again == line else { throw FuzzFailure("mpd: \(line) quoted again splits as \(again)") }
    }

    // MARK: Control JSON

    /// A control request's JSON, as a controller sends it. An accepted command encodes to JSON
    /// that decodes to the same command; a refusal survives its own round trip (the house sends
    /// it back as JSON).
    public static func control(_ data: UnsafeRawBufferPointer) throws(FuzzFailure) {
        let text = String(decoding: data, as: UTF8.self)
        let command: ControlCommand
        do {
            command = try ControlJSON.decodeCommand(text)
        } catch {
            let line = ControlJSON.encode(error)
            guard ControlJSON.decodeRefusal(line) == error else {
                throw FuzzFailure("control: the refusal \"\(error)\" does not survive its JSON round trip")
            }
            return
        }
        _ = command.problem
        let json = ControlJSON.encode(command)
        let again: ControlCommand
        do {
            again = try ControlJSON.decodeCommand(json)
        } catch {
            throw FuzzFailure("control: \(command) encodes to \(json), which is refused: \(error)")
        }
        guard again == command else { throw FuzzFailure("control: \(command) round-trips to \(again) through \(json)") }
    }

    // MARK: Stream parser

    /// Byte 0 picks the format hint (low 3 bits: 1 MP3, 2 ADTS, 3 FLAC, 4 Ogg, 5 WAV, else
    /// sniff) and how the rest is split into pushes (high 5 bits). The stream is parsed twice,
    /// pushed at once and pushed in those pieces: the parser promises the same outcome for any
    /// split, so the two must agree.
    public static func streamParser(_ data: UnsafeRawBufferPointer) throws(FuzzFailure) {
        guard let control = data.first else { return }
        let stream = UnsafeRawBufferPointer(rebasing: data.dropFirst())
        let hints: [StreamFormatHint?] = [nil, .mp3, .adts, .flac, .ogg, .wav, nil, nil]
        let hint = hints[Int(control & 7)]
        let whole = parse(stream, hint: hint, pieceSeed: nil)
        let split = parse(stream, hint: hint, pieceSeed: UInt64(control >> 3))

        switch (whole.result, split.result) {
        case (.success(let events), .success(let splitEvents)):
            guard events == splitEvents else {
                throw FuzzFailure("streamparser: \(events.count) events pushed at once, \(splitEvents.count) pushed in pieces (\(hint.map { "\($0)" } ?? "sniffed"))")
            }
            guard whole.discarded == split.discarded else {
                throw FuzzFailure("streamparser: \(whole.discarded) bytes discarded pushed at once, \(split.discarded) in pieces")
            }
            guard whole.eventsAfterFinish == 0, split.eventsAfterFinish == 0 else {
                throw FuzzFailure("streamparser: a second finish() returned events")
            }
            try checkEvents(events)
        case (.failure(let error), .failure(let splitError)):
            guard error.kind == splitError.kind else {
                throw FuzzFailure("streamparser: pushed at once: \(error); in pieces: \(splitError)")
            }
        case (.success, .failure(let error)):
            throw FuzzFailure("streamparser: pushed at once it parses; pushed in pieces: \(error)")
        case (.failure(let error), .success):
            throw FuzzFailure("streamparser: pushed in pieces it parses; pushed at once: \(error)")
        }
    }

    private struct ParseOutcome {
        var result: Result<[ParsedEvent], MediaError>
        var discarded: Int
        var eventsAfterFinish = 0
    }

    /// Pushes `stream` at once (no seed) or in pieces of lengths drawn from the seed, then finishes.
    private static func parse(_ stream: UnsafeRawBufferPointer, hint: StreamFormatHint?, pieceSeed: UInt64?) -> ParseOutcome {
        let parser = AudioStreamParser(format: hint)
        var pieces = pieceSeed.map(SplitMix64.init(seed:))
        var events: [ParsedEvent] = []
        var offset = 0
        do throws(MediaError) {
            while offset < stream.count {
                let length = min(stream.count - offset, pieces?.pieceLength() ?? stream.count)
                events += try parser.push(UnsafeRawBufferPointer(rebasing: stream[offset..<offset + length]))
                offset += length
            }
            events += try parser.finish()
            let afterFinish = try parser.finish().count
            return ParseOutcome(result: .success(events), discarded: parser.discardedByteCount, eventsAfterFinish: afterFinish)
        } catch {
            return ParseOutcome(result: .failure(error), discarded: parser.discardedByteCount)
        }
    }

    /// What every parsed stream looks like: a description before the first packet, sane
    /// formats, packets with bytes.
    private static func checkEvents(_ events: [ParsedEvent]) throws(FuzzFailure) {
        var described = false
        for event in events {
            switch event {
            case .format(let description):
                guard description.sampleRate > 0, description.channelCount > 0 else {
                    throw FuzzFailure("streamparser: a description of \(description.sampleRate) Hz × \(description.channelCount)")
                }
                described = true
            case .packet(let packet):
                guard described else { throw FuzzFailure("streamparser: a packet before the stream's description") }
                guard !packet.bytes.isEmpty else { throw FuzzFailure("streamparser: an empty packet") }
                if let frames = packet.frameCount, frames < 0 { throw FuzzFailure("streamparser: a packet of \(frames) frames") }
            }
        }
    }

    // MARK: Chunk decoder

    /// The speaker's chunk decoder, fed what a hostile house could send.
    ///
    /// Byte 0: bit 0 codec (FLAC, PCM); bit 1 the codec header comes from the input (34 bytes
    /// after the format bytes) instead of a valid STREAMINFO; bit 2 FLAC frame CRCs are fixed up
    /// after mutation, so that mutants reach the frame decoder instead of the CRC check; bit 3
    /// the first decoded FLAC chunk of 16 frames or more is re-encoded with `ChunkEncoder` and
    /// must decode to the same samples. Byte 1: channels (1 to 8). Byte 2: the sample rate, from
    /// a table. Then packets, each a 2-byte big-endian length and its bytes (the last takes what
    /// is left), decoded in turn by one decoder: a corrupt packet must not disturb the next one,
    /// so after each refusal the first good packet is decoded again and must give the same
    /// samples.
    public static func chunkDecoder(_ data: UnsafeRawBufferPointer) throws(FuzzFailure) {
        guard data.count >= 3 else { return }
        let flags = data[0]
        let codec: StreamCodec = flags & 1 == 0 ? .flac : .pcm
        let channels = Int(data[1] & 7) + 1
        let rates = [48000, 44100, 96000, 22050, 8000, 192000, 16000, 32000, 88200, 11025, 24000, 12000, 384000, 7350, 65535, 655350]
        let sampleRate = rates[Int(data[2] & 15)]
        var rest = data[3...]
        let header: [UInt8]
        if flags & 2 != 0 {
            guard rest.count >= 34 else { return }
            header = Array(rest.prefix(34))
            rest = rest.dropFirst(34)
        } else {
            header = codec == .flac ? streamInfo(sampleRate: sampleRate, channelCount: channels) : []
        }
        let decoder: ChunkDecoder
        do {
            decoder = try ChunkDecoder(codec: codec, sampleRate: sampleRate, channelCount: channels, codecHeader: header)
        } catch {
            return
        }

        var output: [Float] = []
        var reference: (packet: [UInt8], samples: [Float])?
        while !rest.isEmpty {
            var packet: [UInt8]
            if rest.count >= 2 {
                let length = Int(rest[rest.startIndex]) << 8 | Int(rest[rest.startIndex + 1])
                rest = rest.dropFirst(2)
                packet = Array(rest.prefix(length))
                rest = rest.dropFirst(length)
            } else {
                packet = Array(rest)
                rest = rest.dropFirst(rest.count)
            }
            if codec == .flac && flags & 4 != 0 { fixFLACChecksums(&packet) }

            let frames: Int
            do {
                frames = try decoder.decode(packet, into: &output)
            } catch {
                guard output.isEmpty else { throw FuzzFailure("chunkdecoder: a refused packet left \(output.count) samples") }
                if let reference {
                    do {
                        _ = try decoder.decode(reference.packet, into: &output)
                    } catch {
                        throw FuzzFailure("chunkdecoder: after a refused packet, a good one is refused: \(error)")
                    }
                    guard output.elementsEqual(reference.samples, by: sameBits) else {
                        throw FuzzFailure("chunkdecoder: after a refused packet, a good one decodes differently")
                    }
                }
                continue
            }
            guard frames >= 1, output.count == frames * channels else {
                throw FuzzFailure("chunkdecoder: \(frames) frames in \(output.count) samples of \(channels) channels")
            }
            if codec == .pcm {
                guard output.withUnsafeBytes({ $0.elementsEqual(packet) }) else {
                    throw FuzzFailure("chunkdecoder: PCM samples differ from the packet's bytes")
                }
            } else {
                // 24-bit samples: exact in Float, in [-1, 1).
                guard output.allSatisfy({ $0 >= -1 && $0 < 1 }) else {
                    throw FuzzFailure("chunkdecoder: a FLAC sample outside [-1, 1)")
                }
                // Once per input, and not below FLAC's minimum block size of 16: each of those
                // chunks makes the encoder open a one-off libavcodec context (~7 MB zeroed,
                // ~20 ms under ASan), which would leave little time for anything else.
                // Only against a decoder set up as the encoder's stream is (its STREAMINFO: 24
                // bits): one told of another sample size reads the encoder's frames as that size.
                if flags & 8 != 0, reference == nil, frames >= 16, header == streamInfo(sampleRate: sampleRate, channelCount: channels) {
                    try reencode(output, frames: frames, sampleRate: sampleRate, channels: channels, decoder: decoder)
                }
            }
            if reference == nil { reference = (packet, output) }
        }
    }

    private static func sameBits(_ a: Float, _ b: Float) -> Bool { a.bitPattern == b.bitPattern }

    /// The encoder of the last re-encoded format. The one state kept between inputs: opening a
    /// FLAC encoder costs ~25 ms under ASan (libavcodec zeroes ~7 MB per context), 40 times
    /// the rest of an input, and what it encodes decodes the same whatever it encoded before.
    private static let reencoder = Mutex<ChunkEncoder?>(nil)

    /// decode → encode → decode: the decoded samples are 24-bit values, which FLAC carries exactly.
    private static func reencode(_ samples: [Float], frames: Int, sampleRate: Int, channels: Int, decoder: ChunkDecoder) throws(FuzzFailure) {
        // Samples from a header announcing more than 24 bits, or a block longer than a chunk,
        // are not something the encoder can make: nothing to compare.
        guard frames <= StreamCodec.maximumChunkFrames, samples.allSatisfy({ ($0 * 8_388_608).rounded() == $0 * 8_388_608 }) else { return }
        let encoded = reencoder.withLock { encoder -> Result<[UInt8], MediaError>? in
            if encoder?.sampleRate != sampleRate || encoder?.channelCount != channels {
                // A rate FLAC frames cannot state: nothing to compare.
                encoder = try? ChunkEncoder(codec: .flac, sampleRate: sampleRate, channelCount: channels)
            }
            return encoder.map { encoder in Result { () throws(MediaError) in try encoder.encode(samples, frames: frames) } }
        }
        guard let encoded else { return }
        let packet: [UInt8]
        switch encoded {
        case .success(let bytes): packet = bytes
        case .failure(let error): throw FuzzFailure("chunkdecoder: decoded samples cannot be re-encoded: \(error)")
        }
        var again: [Float] = []
        do {
            _ = try decoder.decode(packet, into: &again)
        } catch {
            throw FuzzFailure("chunkdecoder: re-encoded samples are refused: \(error)")
        }
        guard again.elementsEqual(samples, by: sameBits) else {
            throw FuzzFailure("chunkdecoder: decode → encode → decode changed the samples")
        }
    }

    /// The STREAMINFO a `ChunkEncoder` sends: block sizes 16…16384, 24 bits, nothing else known.
    /// Built here because the encoder's own is internal to TuttiMedia; the replay test checks the
    /// two agree.
    public static func streamInfo(sampleRate: Int, channelCount: Int) -> [UInt8] {
        var bytes: [UInt8] = [0, 16, UInt8(StreamCodec.maximumChunkFrames >> 8), UInt8(StreamCodec.maximumChunkFrames & 0xFF), 0, 0, 0, 0, 0, 0]
        let packed = UInt64(sampleRate) << 44 | UInt64(channelCount - 1) << 41 | UInt64(24 - 1) << 36
        for shift in stride(from: 56, through: 0, by: -8) { bytes.append(UInt8(truncatingIfNeeded: packed >> UInt64(shift))) }
        return bytes + [UInt8](repeating: 0, count: 16)
    }

    /// Recomputes a FLAC frame's header CRC-8 and frame CRC-16 (libFuzzer's "fuzzer-friendly
    /// build mode", done in the harness); leaves packets whose header cannot be delimited alone.
    public static func fixFLACChecksums(_ packet: inout [UInt8]) {
        guard packet.count >= 6 else { return }
        // Sync (2), block size and rate codes (1), channels and sample size (1), then the frame
        // or sample number, UTF-8 style (1…7 bytes).
        var length = 4
        let lead = packet[4]
        let numberBytes = lead & 0x80 == 0 ? 1 : lead & 0xE0 == 0xC0 ? 2 : lead & 0xF0 == 0xE0 ? 3 : lead & 0xF8 == 0xF0 ? 4
            : lead & 0xFC == 0xF8 ? 5 : lead & 0xFE == 0xFC ? 6 : lead == 0xFE ? 7 : 0
        guard numberBytes > 0 else { return }
        length += numberBytes
        let blockCode = packet[2] >> 4, rateCode = packet[2] & 15
        length += blockCode == 6 ? 1 : blockCode == 7 ? 2 : 0
        length += rateCode == 12 ? 1 : rateCode == 13 || rateCode == 14 ? 2 : 0
        guard packet.count >= length + 1 + 2 else { return }
        var crc8: UInt8 = 0
        for byte in packet[0..<length] {
            crc8 ^= byte
            for _ in 0..<8 { crc8 = crc8 & 0x80 != 0 ? (crc8 << 1) ^ 0x07 : crc8 << 1 }
        }
        packet[length] = crc8
        var crc16: UInt16 = 0
        for byte in packet[0..<(packet.count - 2)] {
            crc16 ^= UInt16(byte) << 8
            for _ in 0..<8 { crc16 = crc16 & 0x8000 != 0 ? (crc16 << 1) ^ 0x8005 : crc16 << 1 }
        }
        packet[packet.count - 2] = UInt8(crc16 >> 8)
        packet[packet.count - 1] = UInt8(crc16 & 0xFF)
    }

    // MARK: HLS playlists

    /// A playlist as fetched from a server. An accepted playlist is consistent: absolute URIs,
    /// consecutive sequence numbers, non-empty byte ranges; its total duration is computed as the
    /// player does. A master playlist's variant URLs are then used as the base of the same text,
    /// as the player does when it fetches a variant.
    public static func hls(_ data: UnsafeRawBufferPointer) throws(FuzzFailure) {
        let text = String(decoding: data, as: UTF8.self)
        try hls(text, url: "http://fuzz.invalid/a/index.m3u8", depth: 0)
    }

    private static func hls(_ text: String, url: String, depth: Int) throws(FuzzFailure) {
        let playlist: HLSPlaylist
        do {
            playlist = try HLSPlaylist.parse(text, url: url)
        } catch {
            guard error.kind == .corrupt || error.kind == .unsupported else { throw FuzzFailure("hls: refused as \(error.kind): \(error)") }
            return
        }
        switch playlist {
        case .master(let master):
            guard !master.variants.isEmpty else { throw FuzzFailure("hls: a master playlist without variants") }
            for variant in master.variants {
                guard !variant.url.isEmpty, variant.bandwidth >= 0, (variant.averageBandwidth ?? 0) >= 0 else {
                    throw FuzzFailure("hls: variant \(variant)")
                }
            }
            if depth == 0 {
                for variant in master.variants.prefix(2) { try hls(text, url: variant.url, depth: 1) }
            }
        case .media(let media):
            guard media.targetDuration >= 1, media.mediaSequence >= 0 else {
                throw FuzzFailure("hls: target duration \(media.targetDuration), media sequence \(media.mediaSequence)")
            }
            for (index, segment) in media.segments.enumerated() {
                guard segment.sequence == media.mediaSequence + index, !segment.url.isEmpty, segment.duration.value >= 0 else {
                    throw FuzzFailure("hls: segment \(index): \(segment)")
                }
                for range in [segment.resource.byteRange, segment.initSection?.byteRange] {
                    if let range, range.isEmpty || range.lowerBound < 0 { throw FuzzFailure("hls: segment \(index) has range \(range)") }
                }
            }
            _ = media.totalDuration
        }
    }
}

extension FuzzHarness {
    // MARK: ICY metadata

    /// An internet radio's bytes with in-band metadata (`Icy-MetaData: 1`), as a server sends
    /// them: byte 0 and 1 choose the interval (1 to 65 536 audio bytes between blocks), byte 2
    /// seeds the pieces the download arrives in. Fed whole and in pieces, the filter gives the
    /// same audio and the same titles; the audio is exactly the bytes outside the blocks, in
    /// order; every title is non-empty text of its block, with no NUL.
    public static func icy(_ data: UnsafeRawBufferPointer) throws(FuzzFailure) {
        guard data.count >= 3 else { return }
        let interval = 1 + (Int(data[0]) << 8 | Int(data[1]))
        var pieces = SplitMix64(seed: UInt64(data[2]))
        let stream = UnsafeRawBufferPointer(rebasing: data[3...])

        var whole = ICYMetadataFilter(interval: interval)
        var audio: [UInt8] = []
        let titles = whole.feed(stream, audio: &audio)

        var split = ICYMetadataFilter(interval: interval)
        var splitAudio: [UInt8] = []
        var splitTitles: [String] = []
        var offset = 0
        while offset < stream.count {
            let length = min(pieces.pieceLength(), stream.count - offset)
            splitTitles += split.feed(UnsafeRawBufferPointer(rebasing: stream[offset..<(offset + length)]), audio: &splitAudio)
            offset += length
        }
        guard audio == splitAudio, titles == splitTitles else {
            throw FuzzFailure("icy: fed in pieces, \(splitAudio.count) audio bytes and \(splitTitles) instead of \(audio.count) and \(titles)")
        }
        // The audio, as the stream's own walk gives it: `interval` audio bytes, a length byte,
        // 16 × length bytes of block, again.
        var expected: [UInt8] = []
        var index = 0
        var blocks = 0
        while index < stream.count {
            let count = min(interval, stream.count - index)
            expected += stream[index..<(index + count)]
            index += count
            guard index < stream.count else { break }
            index += 1 + Int(stream[index]) * 16
            blocks += 1
        }
        guard audio == expected else { throw FuzzFailure("icy: \(audio.count) audio bytes where the stream holds \(expected.count)") }
        guard titles.count <= blocks, titles.allSatisfy({ !$0.isEmpty && !$0.contains("\0") }) else {
            throw FuzzFailure("icy: titles \(titles) from \(blocks) blocks")
        }
    }
}

/// Piece lengths that depend only on the input.
extension SplitMix64 {
    /// Mostly short pieces (a byte to a few hundred), sometimes a large one.
    mutating func pieceLength() -> Int {
        let value = next()
        switch value % 8 {
        case 0: return 1
        case 1...5: return 1 + Int((value >> 8) % 64)
        case 6: return 1 + Int((value >> 8) % 1024)
        default: return 1 + Int((value >> 8) % 8192)
        }
    }
}
