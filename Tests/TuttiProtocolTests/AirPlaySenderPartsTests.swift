import Testing
import TuttiCore
import TuttiProtocol

/// What an AirPlay room (the house as a sender) writes and reads: receivers' replies, the audio
/// it encodes, and its sync packets as shairport-sync reads them.
@Suite struct AirPlaySenderPartsTests {
    func responses(_ text: String, splitAt split: Int? = nil) throws(RTSPResponseParser.Failure) -> [RTSPResponse] {
        var parser = RTSPResponseParser()
        var out: [RTSPResponse] = []
        let bytes = Array(text.utf8)
        for part in split.map({ [bytes[..<$0], bytes[$0...]] }) ?? [bytes[...]] {
            parser.append(part)
            while let response = try parser.next() { out.append(response) }
        }
        return out
    }

    /// shairport-sync's replies, as it writes them, pipelined and cut anywhere: the same replies.
    @Test func repliesAreReadWholeOrInPieces() throws {
        let text = "RTSP/1.0 200 OK\r\nCSeq: 3\r\nTransport: RTP/AVP/UDP;unicast;mode=record;server_port=6003;control_port=6001;timing_port=6002\r\nSession: 1\r\nServer: AirTunes/105.1\r\n\r\n"
            + "RTSP/1.0 200 OK\r\nCSeq: 4\r\nContent-Length: 22\r\n\r\n\r\nvolume: -18.000000\r\n"
            + "RTSP/1.0 453 Not Enough Bandwidth\r\nCSeq: 5\r\n\r\n"
        let whole = try responses(text)
        #expect(whole.count == 3)
        #expect(whole[0].status == 200 && whole[0][header: "transport"]?.contains("server_port=6003") == true)
        #expect(whole[1].body == Array("\r\nvolume: -18.000000\r\n".utf8))
        #expect(whole[2].status == 453 && whole[2].reason == "Not Enough Bandwidth")
        for split in 0...text.utf8.count { #expect(try responses(text, splitAt: split) == whole) }
        // A status line without a reason is a reply; written out, each reads back as itself.
        #expect(try responses("RTSP/1.0 200\r\nCSeq: 1\r\n\r\n").first?.reason == "")
        for response in whole { #expect(try responses(String(decoding: response.encoded, as: UTF8.self)) == [response]) }
    }

    /// A receiver is a peer on the network: what is not a reply fails with the reason.
    @Test func badRepliesFailWithTheirReason() {
        func failure(_ text: String) -> String? {
            do { _ = try responses(text); return nil } catch { return error.message }
        }
        #expect(failure("HTTP/2 200 OK\r\n\r\n")?.contains("not VERSION STATUS REASON") == true)
        #expect(failure("RTSP/1.0 2000 OK\r\n\r\n")?.contains("not VERSION STATUS REASON") == true)
        #expect(failure("RTSP/1.0 061\r\n\r\n")?.contains("not VERSION STATUS REASON") == true)
        #expect(failure("RTSP/1.0 200 OK\r\nContent-Length: 99999999\r\n\r\n")?.contains("over") == true)
        #expect(failure("RTSP/1.0 200 OK\r\nCSeq 1\r\n\r\n")?.contains("without a colon") == true)
        #expect(failure("RTSP/1.0 200 OK\nCSeq: 1\r\n\r\n")?.contains("bare LF") == true)
        #expect(failure("RTSP/1.0 200 OK\r\nX: " + String(repeating: "a", count: 20_000))?.contains("run past") == true)
    }

    /// Both encodings decode to what was encoded; an ALAC frame carries the samples verbatim
    /// (escape bit set) and says its size only when it is short of the announced frames.
    @Test func theEncoderWritesWhatTheDecoderReads() throws {
        var random = SplitMix64(seed: 5)
        let samples = (0..<(352 * 2)).map { _ in Int16(truncatingIfNeeded: random.next()) }
        for encoding in [RAOPAnnouncement.Encoding.l16, .appleLossless] {
            let announcement = RAOPAnnouncement(encoding: encoding, sampleRate: 44100, channelCount: 2, framesPerPacket: 352)
            for frames in [352, 100, 1] {
                let payload = samples.withUnsafeBufferPointer { RAOPAudioEncoder(announcement: announcement).encode($0, frames: frames) }
                var decoded: [Int16] = []
                #expect(try RAOPAudioDecoder(announcement: announcement).decode(payload, into: &decoded) == frames)
                #expect(decoded == Array(samples.prefix(frames * 2)), "\(encoding), \(frames) frames")
                if encoding == .l16 { #expect(payload.count == frames * 4) }
            }
        }
        let alac = RAOPAnnouncement(encoding: .appleLossless, sampleRate: 44100, channelCount: 2, framesPerPacket: 352)
        let full = samples.withUnsafeBufferPointer { RAOPAudioEncoder(announcement: alac).encode($0, frames: 352) }
        // CPE, tag 0, 12 unused, no size, shift 0, escape: 001 0000 000000000000 0 00 1 …
        #expect(Array(full.prefix(3)) == [0x20, 0x00, 0x02 | UInt8(UInt16(bitPattern: samples[0]) >> 15)])
        #expect(full.count == (23 + 352 * 2 * 16 + 3 + 7) / 8)
    }

    /// A sync packet as shairport-sync reads it: bytes 2–3 are 4 (7 would make it play 0.25 s
    /// later: its fixed offset for iTunes), bytes 4–7 the frame heard at the NTP time of bytes
    /// 8–15, and 16–19 that frame plus the latency.
    @Test func aSyncPacketIsWhatShairportSyncExpects() {
        let sync = RAOPSync(rtpTimeWithoutLatency: 1000, ntpTime: NTPTimestamp(0x0102_0304_0506_0708), rtpTime: 23_050, isFirst: true)
        let bytes = RAOPPacket.sync(sync).encoded
        #expect(bytes == [0x90, 0xD4, 0x00, 0x04, 0, 0, 0x03, 0xE8, 1, 2, 3, 4, 5, 6, 7, 8, 0, 0, 0x5A, 0x0A])
        #expect(RAOPPacket(bytes) == .sync(sync))
        // A timing reply: the request's send time echoed at bytes 8–15, then ours.
        let reply = RAOPPacket.timingReply(RAOPTimingReply(originate: NTPTimestamp(1), receive: NTPTimestamp(2), transmit: NTPTimestamp(3))).encoded
        #expect(reply.count == 32 && reply[1] == 0xD3 && reply[15] == 1 && reply[23] == 2 && reply[31] == 3)
    }

    /// `text/parameters` lines end in CRLF as senders write them (to Swift, one Character).
    @Test func textParametersTakeEveryLineEnd() {
        for body in ["volume: -20.5\r\n", "volume: -20.5\n", "volume: -20.5\r", "volume: -20.5"] {
            #expect(RTSPRequest.textParameters(Array(body.utf8)).map(\.value) == ["-20.5"], "\(body.debugDescription)")
        }
        #expect(RTSPRequest.textParameters(Array("progress: 1/2/3\r\nvolume: 0\r\n".utf8)).map(\.name) == ["progress", "volume"])
    }
}
