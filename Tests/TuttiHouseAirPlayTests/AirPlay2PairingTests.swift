import Foundation
import NIOCore
import NIOEmbedded
import Synchronization
import Testing
import TuttiProtocol
import TuttiTestSupport
@testable import TuttiHouseAirPlay

/// AirPlay 2's pairing and encryption, piece by piece: TLV8, SRP-6a against `srptools` (the
/// SRP pyatv pairs with, run from the venv `make test` makes), the HAP frames of a paired
/// connection, and the audio's ChaCha20-Poly1305.
@Suite struct AirPlay2PairingTests {
    static let python = FileManager.default.currentDirectoryPath + "/out/venv-pyatv/bin/python"

    @Test func tlv8JoinsSplitValuesAndRefusesCutItems() throws {
        let long = (0..<700).map { UInt8(truncatingIfNeeded: $0) }
        let message = TLV8([(.state, [3]), (.publicKey, long), (.proof, [1, 2, 3]), (.flags, [])])
        let bytes = message.encoded
        // 700 bytes: items of 255, 255 and 190.
        #expect(bytes.count == 3 + (2 + 255) * 2 + 2 + 190 + 5 + 2)
        let parsed = try TLV8(parsing: bytes)
        #expect(parsed == message)
        #expect(parsed[.publicKey] == long && parsed.state == 3 && parsed[.flags] == [])
        #expect(throws: TLV8.Malformed.self) { try TLV8(parsing: [6, 1]) }
        #expect(throws: TLV8.Malformed.self) { try TLV8(parsing: [6]) }
        // Two short items of one type stay two.
        #expect(try TLV8(parsing: [1, 1, 7, 1, 1, 8]).items.count == 2)
        // A value of 255 bytes ended by an empty fragment, then another item of its type: two
        // items, written out with the empty fragment again (fuzz-airplay2 found it lost).
        let full = try TLV8(parsing: [1, 255] + Array(repeating: 3, count: 255) + [1, 0, 1, 1, 9])
        #expect(full.items.count == 2 && full.items[0].value.count == 255 && full.items[1].value == [9])
        #expect(try TLV8(parsing: full.encoded) == full)
    }

    /// A client's values from `srptools` (the version pyatv works with, which the Makefile pins),
    /// for each line `salt B` of ours (hex): its A, its M1,
    /// the M2 it expects and its K. `findLeadingZero`: the client's private value is searched
    /// until its A has a leading zero byte, which `srptools` hashes without.
    func srptoolsClient(_ lines: [(salt: [UInt8], publicKey: [UInt8])], pin: String = "3939", findLeadingZero: Bool = false) throws -> [[[UInt8]]] {
        try #require(FileManager.default.isExecutableFile(atPath: Self.python), "the venv's python is not at \(Self.python): run make test (it makes the venv)")
        let script = """
            import sys, hashlib, os
            from srptools import SRPContext, SRPClientSession, constants
            for line in sys.stdin:
                salt, b = line.split()
                ctx = SRPContext("Pair-Setup", "\(pin)", prime=constants.PRIME_3072, generator=constants.PRIME_3072_GEN, hash_func=hashlib.sha512)
                while True:
                    s = SRPClientSession(ctx, private=os.urandom(32).hex())
                    if \(findLeadingZero ? "True" : "False") and len(bytes.fromhex(s.public)) == 384: continue
                    break
                s.process(b, salt)
                # srptools 1.0 gives some values as bytes of hex digits, 2.0 as str.
                print(*(v.decode() if isinstance(v, bytes) else v for v in (s.public, s.key_proof, s.key_proof_hash, s.key)))
            """
        let input = lines.map { $0.salt.hex + " " + $0.publicKey.hex }.joined(separator: "\n") + "\n"
        let output = try TestMedia.run(Self.python, ["-c", script], standardInput: Data(input.utf8), timeout: 120)
        return String(decoding: output, as: UTF8.self).split(separator: "\n").map { $0.split(separator: " ").map { [UInt8](hex: String($0)) } }
    }

    @Test(.timeLimit(.minutes(2)))
    func srpAgreesWithSrptoolsAndRefusesAWrongPIN() throws {
        var servers = (0..<6).map { _ in SRPServer(password: "3939") }
        // A server value B with a leading zero byte (1 in 256): found by trying private values.
        // The inputs are fixed, so the search ends at the same attempt every run.
        for attempt in 1...4096 {
            let bytes = [UInt8(attempt >> 8), UInt8(attempt & 0xFF)]
            let server = SRPServer(password: "3939", salt: bytes + Array(repeating: 0xA5, count: 14), privateValue: bytes + Array(repeating: 0x5A, count: 30))
            if server.publicKey[0] == 0 { servers.append(server); break }
        }
        try #require(servers.count == 7, "no B with a leading zero among 4096 private values")
        let clients = try srptoolsClient(servers.map { ($0.salt, $0.publicKey) })
        try #require(clients.count == servers.count)
        for (server, client) in zip(servers, clients) {
            let (serverProof, key) = try server.verify(clientPublicKey: client[0], clientProof: client[1])
            #expect(serverProof == client[2], "M2 differs from the one srptools expects (B \(Array(server.publicKey.prefix(2)).hex)…)")
            #expect(key == client[3])
        }
        // A client A with a leading zero byte.
        let zeroA = SRPServer(password: "3939")
        let client = try #require(try srptoolsClient([(zeroA.salt, zeroA.publicKey)], findLeadingZero: true).first)
        #expect(client[0].count == 383)
        let (proof, _) = try zeroA.verify(clientPublicKey: client[0], clientProof: client[1])
        #expect(proof == client[2])
        // The wrong PIN, and a public value of N (0 mod N), are refused.
        let other = SRPServer(password: "3939")
        let wrong = try #require(try srptoolsClient([(other.salt, other.publicKey)], pin: "1234").first)
        #expect(throws: SRPServer.Failure.self) { try other.verify(clientPublicKey: wrong[0], clientProof: wrong[1]) }
        #expect(throws: SRPServer.Failure.self) { try other.verify(clientPublicKey: SRPServer.prime, clientProof: wrong[1]) }
    }

    /// Pair-setup M1–M4 through `HAPPairing`, the client's side from `srptools`.
    @Test(.timeLimit(.minutes(1)))
    func transientPairSetupGivesTheClientsSessionKey() throws {
        var pairing = HAPPairing(accessory: nil)
        guard case .reply(let m2) = pairing.pairSetup(TLV8([(.method, [0]), (.state, [1]), (.flags, [0x10])]).encoded, now: 0) else {
            Issue.record("M1 was not answered with M2"); return
        }
        let reply = try TLV8(parsing: m2)
        #expect(reply.state == 2 && reply[.salt]?.count == 16 && reply[.publicKey]?.count == 384)
        let client = try #require(try srptoolsClient([(reply[.salt]!, reply[.publicKey]!)]).first)
        guard case .established(let m4, let key, _) = pairing.pairSetup(TLV8([(.state, [3]), (.publicKey, client[0]), (.proof, client[1])]).encoded, now: 0) else {
            Issue.record("M3 did not establish the session"); return
        }
        #expect(try TLV8(parsing: m4)[.proof] == client[2])
        #expect(key == client[3])
        // A pair-setup with a PIN, an M3 without an M1, and pair-verify are refused with an error TLV.
        for body in [TLV8([(.method, [0]), (.state, [1])]).encoded, TLV8([(.state, [3]), (.publicKey, [1]), (.proof, [2])]).encoded, [0xFF]] {
            guard case .refused(let answer, _) = pairing.pairSetup(body, now: 0) else { Issue.record("\(body.prefix(8)) was not refused"); continue }
            #expect(try TLV8(parsing: answer)[.error] != nil)
        }
        guard case .refused = pairing.pairVerify(TLV8([(.state, [1]), (.publicKey, Array(repeating: 9, count: 32))]).encoded) else {
            Issue.record("pair-verify was not refused"); return
        }
    }

    /// A PIN is shown on asking, is good for two minutes on the receiver's clock and for one try.
    @Test(.timeLimit(.minutes(1)))
    func aPINIsShownAndGoodForTwoMinutesAndOneTry() throws {
        let shown = Mutex<[String]>([])
        let accessory = AirPlayAccessory(identity: .random(), identifier: Array("02:00:00:00:00:01".utf8), pairings: try AirPlayPairings(path: nil)) { pin, _ in
            shown.withLock { $0.append(pin) }
        }
        let m1 = TLV8([(.method, [0]), (.state, [1])]).encoded
        var pairing = HAPPairing(accessory: accessory)
        guard case .refused = pairing.pairSetup(m1, now: 0) else { Issue.record("M1 before a PIN was shown was not refused"); return }
        let started = pairing.startPIN(sender: "192.0.2.1", now: 0)
        #expect(started == nil)
        let pin = try #require(shown.withLock { $0.last })
        #expect(pin.count == 4 && pin.allSatisfy(\.isNumber))
        guard case .refused = pairing.pairSetup(m1, now: HAPPairing.pinLifetimeNanoseconds + 1) else { Issue.record("an expired PIN was taken"); return }
        _ = pairing.startPIN(sender: "192.0.2.1", now: 0)
        guard case .reply(let m2) = pairing.pairSetup(m1, now: 1_000_000_000) else { Issue.record("M1 after a PIN was not answered"); return }
        let reply = try TLV8(parsing: m2)
        // A wrong proof spends the PIN: M1 again is refused until a new one is shown.
        guard case .refused = pairing.pairSetup(TLV8([(.state, [3]), (.publicKey, reply[.publicKey]!), (.proof, Array(repeating: 1, count: 64))]).encoded, now: 2) else {
            Issue.record("a wrong proof was taken"); return
        }
        guard case .refused = pairing.pairSetup(m1, now: 3) else { Issue.record("a spent PIN was taken again"); return }
        // Wrong PINs in a row: after three, the next PIN waits 1 s, then 2, 4…
        func guessWrong(at now: Int64) throws {
            #expect(pairing.startPIN(sender: "192.0.2.1", now: now) == nil, "no PIN at \(now)")
            guard case .reply(let m2) = pairing.pairSetup(m1, now: now) else { Issue.record("M1 at \(now) not answered"); return }
            let key = try TLV8(parsing: m2)[.publicKey]!
            _ = pairing.pairSetup(TLV8([(.state, [3]), (.publicKey, key), (.proof, Array(repeating: 1, count: 64))]).encoded, now: now)
        }
        try guessWrong(at: 10)
        try guessWrong(at: 11)  // the third wrong one (with the one above)
        #expect(pairing.startPIN(sender: "192.0.2.1", now: 11) != nil, "a fourth PIN at once")
        guard case .refused = pairing.pairSetup(m1, now: 11) else { Issue.record("M1 during the wait was answered"); return }
        try guessWrong(at: 11 + 1_000_000_000)  // the fourth: 2 s now
        #expect(pairing.startPIN(sender: "192.0.2.1", now: 11 + 2_000_000_000) != nil)
        #expect(pairing.startPIN(sender: "192.0.2.1", now: 11 + 3_000_000_001) == nil)
    }

    /// One PIN is outstanding in the house, for the connection that asked: another connection
    /// cannot use it, and a new one cancels it; the wait after wrong PINs stays an hour however
    /// many there were (its doubling once overflowed into no wait at all after 34).
    @Test func onePINAtATimeAndTheWaitNeverRunsOut() throws {
        let pairings = try AirPlayPairings(path: nil)
        let accessory = AirPlayAccessory(identity: .random(), identifier: Array("02:00:00:00:00:02".utf8), pairings: pairings) { _, _ in }
        let m1 = TLV8([(.method, [0]), (.state, [1])]).encoded
        var first = HAPPairing(accessory: accessory), second = HAPPairing(accessory: accessory)
        #expect(first.startPIN(sender: "192.0.2.1", now: 0) == nil)
        guard case .refused = second.pairSetup(m1, now: 1) else { Issue.record("another connection used the PIN"); return }
        #expect(second.startPIN(sender: "192.0.2.2", now: 2) == nil)
        guard case .refused = first.pairSetup(m1, now: 3) else { Issue.record("a cancelled PIN was used"); return }
        guard case .reply = second.pairSetup(m1, now: 4) else { Issue.record("the new PIN's connection was refused"); return }
        #expect(second.awaitingPINUntil == 2 + AirPlayPairings.pinLifetimeNanoseconds)
        for attempt in 0..<100 { pairings.noteWrongPIN(now: Int64(attempt)) }
        #expect(pairings.pinBackoff(now: 99) == AirPlayPairings.maximumBackoffNanoseconds)
    }

    /// What a sender writes in HAP frames is read in the clear, both ways, across frame
    /// boundaries and in pieces; a forged frame closes the connection.
    @Test func aPairedConnectionsFramesOpenAndAForgedOneCloses() throws {
        let key = Array(repeating: UInt8(7), count: 64)
        let receiverKeys = HAPSessionCodec.Keys.control(key)
        // The sender's keys are the receiver's, swapped.
        let senderKeys = HAPSessionCodec.Keys(read: receiverKeys.write, write: receiverKeys.read)
        let sender = EmbeddedChannel(handler: HAPSessionCodec(keys: senderKeys, onFailure: { _ in }))
        var failures: [String] = []
        let receiver = EmbeddedChannel(handler: HAPSessionCodec(keys: receiverKeys, onFailure: { failures.append($0) }))
        let request = Array("SETUP rtsp://x/1 RTSP/1.0\r\nCSeq: 3\r\nContent-Length: 2000\r\n\r\n".utf8) + Array(repeating: 0x41, count: 2000)
        try sender.writeAndFlush(ByteBuffer(bytes: request)).wait()
        var wire = try #require(try sender.readOutbound(as: ByteBuffer.self))
        #expect(wire.readableBytes == request.count + 3 * 18)
        // In pieces of 100 bytes.
        var received: [UInt8] = []
        while wire.readableBytes > 0 {
            try receiver.writeInbound(wire.readSlice(length: min(100, wire.readableBytes))!)
            while var plain = try receiver.readInbound(as: ByteBuffer.self) { received += plain.readBytes(length: plain.readableBytes)! }
        }
        #expect(received == request)
        // And back.
        try receiver.writeAndFlush(ByteBuffer(bytes: Array("RTSP/1.0 200 OK\r\n\r\n".utf8))).wait()
        try sender.writeInbound(try #require(try receiver.readOutbound(as: ByteBuffer.self)))
        var reply = try #require(try sender.readInbound(as: ByteBuffer.self))
        #expect(reply.readString(length: reply.readableBytes) == "RTSP/1.0 200 OK\r\n\r\n")
        // A frame sealed with another key.
        let stranger = EmbeddedChannel(handler: HAPSessionCodec(keys: .control(Array(repeating: 8, count: 64)), onFailure: { _ in }))
        try stranger.writeAndFlush(ByteBuffer(bytes: Array("OPTIONS * RTSP/1.0\r\n\r\n".utf8))).wait()
        try receiver.writeInbound(try #require(try stranger.readOutbound(as: ByteBuffer.self)))
        #expect(failures.count == 1 && !receiver.isActive)
    }

    @Test func audioOpensWithItsKeyAndNotOtherwise() throws {
        let key = (0..<32).map { UInt8($0) }
        let cipher = try #require(AirPlay2AudioCipher(key: key))
        let audio = (0..<1408).map { UInt8(truncatingIfNeeded: $0 * 7) }
        let sealed = AirPlay2AudioCipher.seal(audio, key: key, count: 41, timestamp: 352 * 9, ssrc: 0xABCD)
        let packet = RAOPAudioPacket(sequence: 9, timestamp: 352 * 9, ssrc: 0xABCD, payload: sealed)
        #expect(cipher.open(packet)?.payload == audio)
        // Another timestamp (the associated data), a flipped bit, another key: none open.
        var moved = packet
        moved.timestamp += 352
        #expect(cipher.open(moved) == nil)
        var flipped = packet
        flipped.payload[100] ^= 1
        #expect(cipher.open(flipped) == nil)
        #expect(AirPlay2AudioCipher(key: Array(repeating: 1, count: 32))!.open(packet) == nil)
        #expect(AirPlay2AudioCipher(key: [1, 2]) == nil)
        #expect(cipher.open(RAOPAudioPacket(sequence: 1, timestamp: 0, ssrc: 0, payload: Array(repeating: 0, count: 23))) == nil)
    }

    /// SETUP bodies as pyatv writes them (binary property lists).
    @Test func setupBodiesAreReadAndRefusedClearly() throws {
        func plist(_ object: Any) throws -> [UInt8] {
            Array(try PropertyListSerialization.data(fromPropertyList: object, format: .binary, options: 0))
        }
        let session = try AirPlay2Setup(body: plist(["timingProtocol": "NTP", "timingPort": 6002, "name": "pyatv", "isMultiSelectAirPlay": true]))
        #expect(session.timingPort == 6002 && session.streams == nil && session.name == "pyatv")
        let stream = try AirPlay2Setup(body: plist(["streams": [["type": 96, "ct": 1, "sr": 44100, "spf": 352, "audioFormat": 0x800,
                                                                  "shk": Data(count: 32), "controlPort": 6001, "latencyMin": 11025]]]))
        let announcement = try AirPlay2Setup.announcement(for: try #require(stream.streams?.first))
        #expect(announcement == RAOPAnnouncement(encoding: .l16, sampleRate: 44100, channelCount: 2, bitsPerSample: 16, framesPerPacket: 352))
        #expect(throws: AirPlay2Setup.Refusal.self) { try AirPlay2Setup(body: Array("not a plist".utf8)) }
        #expect(throws: AirPlay2Setup.Refusal.self) { try AirPlay2Setup(body: plist(["timingPort": "six"])) }
        for (bad, status) in [(["type": 103, "ct": 2], 501), (["type": 96, "ct": 4], 415), (["type": 96, "audioFormat": 0x1000], 415), (["type": 96, "ct": 1, "spf": 0], 415)] {
            let parsed = try AirPlay2Setup(body: plist(["streams": [bad]]))
            do {
                _ = try AirPlay2Setup.announcement(for: parsed.streams![0])
                Issue.record("\(bad) was taken")
            } catch {
                #expect(error.status == status, "\(bad): \(error.message)")
            }
        }
        let reply = AirPlay2SetupReply(streams: [.init(type: 96, dataPort: 7000, controlPort: 7001)]).encoded
        let decoded = try PropertyListSerialization.propertyList(from: Data(reply), format: nil) as? [String: [[String: Int]]]
        #expect(decoded?["streams"]?.first == ["type": 96, "dataPort": 7000, "controlPort": 7001])
    }
}

extension [UInt8] {
    var hex: String { map { String(format: "%02x", $0) }.joined() }
    init(hex: String) {
        let digits = Array(hex.utf8)
        self = stride(from: 0, to: digits.count - 1, by: 2).map { UInt8(String(decoding: digits[$0...$0 + 1], as: UTF8.self), radix: 16)! }
    }
}
