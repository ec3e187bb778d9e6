import Foundation
import Testing
@testable import TuttiProtocol

/// AirPlay 1's parsers, on what real senders send (pyatv's and PipeWire's announcements, iTunes'
/// DMAP) and on what a stranger might.
@Suite struct AirPlayParsingTests {
    static let pyatvAnnounce = "v=0\r\no=iTunes 3413821438 0 IN IP4 127.0.0.1\r\ns=iTunes\r\nc=IN IP4 127.0.0.1\r\nt=0 0\r\n"
        + "m=audio 0 RTP/AVP 96\r\na=rtpmap:96 L16/44100/2\r\na=fmtp:96 352 0 16 40 10 14 2 255 0 0 44100\r\n"

    @Test func requestsComeWholeWhicheverWayTheBytesAreSplit() throws {
        let body = Array(Self.pyatvAnnounce.utf8)
        let wire = Array("OPTIONS * RTSP/1.0\r\nCSeq: 1\r\nUser-Agent: MediaControl/1.0\r\n\r\nANNOUNCE rtsp://127.0.0.1/3413821438 RTSP/1.0\r\nCSeq: 2\r\nContent-Type: application/sdp\r\nContent-Length: \(body.count)\r\n\r\n".utf8) + body
        for split in [1, 7, 64, wire.count] {
            var parser = RTSPRequestParser()
            var requests: [RTSPRequest] = []
            var index = 0
            while index < wire.count {
                parser.append(wire[index..<min(index + split, wire.count)])
                index += split
                while let request = try parser.next() { requests.append(request) }
            }
            #expect(requests.map(\.method) == ["OPTIONS", "ANNOUNCE"], "split \(split)")
            #expect(requests.map(\.sequence) == ["1", "2"])
            #expect(requests.last?.body == body)
            #expect(requests.first?[header: "user-agent"] == "MediaControl/1.0")
            #expect(parser.bufferedCount == 0)
        }
    }

    @Test func malformedRequestsAreRefusedWithTheirStatus() {
        func refusal(_ text: String) -> RTSPRequestParser.Refusal? {
            var parser = RTSPRequestParser()
            parser.append(Array(text.utf8))
            do { _ = try parser.next(); return nil } catch { return error }
        }
        #expect(refusal("GET / HTTP/1.1\nHost: x\r\n\r\n")?.status == 400)
        #expect(refusal("hello\r\n\r\n")?.status == 400)
        #expect(refusal("OPTIONS * RTSP/2.0\r\n\r\n")?.status == 505)
        #expect(refusal("ANNOUNCE * RTSP/1.0\r\nContent-Length: 99999999\r\n\r\n")?.status == 413)
        #expect(refusal("ANNOUNCE * RTSP/1.0\r\nContent-Length: -1\r\n\r\n")?.status == 400)
        #expect(refusal("ANNOUNCE * RTSP/1.0\r\nContent-Length: 1\r\nContent-Length: 1\r\n\r\n")?.status == 400)
        #expect(refusal("OPTIONS * RTSP/1.0\r\nX: \u{1}\r\n\r\n")?.status == 400)
        #expect(refusal("OPTIONS * RTSP/1.0\r\n" + String(repeating: "X-Long: 1\r\n", count: 2000))?.status == 431)
        // Incomplete is not refused: more may come.
        #expect(refusal("OPTIONS * RTSP/1.0\r\nCSeq: 1\r\n") == nil)
    }

    /// A value's spaces are trimmed as bytes: a space before a combining mark is one Character
    /// to Swift, and a request written out again then read back with another value (fuzz-rtsp).
    @Test func headerValuesAreTrimmedAsBytes() throws {
        var parser = RTSPRequestParser()
        parser.append(Array("OPTIONS * RTSP/1.0\r\nCSeq: 1\r\nX-Mark:\u{59E}a \r\nX-Space:  \u{59E}b\t\r\n\r\n".utf8))
        let request = try #require(try parser.next())
        #expect(request.headers.map(\.value) == ["1", "\u{59E}a", "\u{59E}b"])
        var again = RTSPRequestParser()
        again.append(request.encoded)
        #expect(try again.next()?.headers.map(\.value) == request.headers.map(\.value))
    }

    @Test func announcementsOfRealSenders() throws {
        let pyatv = try RAOPAnnouncement(sdp: Array(Self.pyatvAnnounce.utf8))
        var expected = RAOPAnnouncement(encoding: .l16, sampleRate: 44100, channelCount: 2, framesPerPacket: 352, payloadType: 96, sessionName: "iTunes")
        expected.alacParameters = [352, 0, 16, 40, 10, 14, 2, 255, 0, 0, 44100]
        #expect(pyatv == expected)
        // PipeWire's raop sink, unencrypted.
        let pipewire = "v=0\r\no=iTunes 1 0 IN IP4 10.0.0.2\r\ns=iTunes\r\nc=IN IP4 10.0.0.3\r\nt=0 0\r\nm=audio 0 RTP/AVP 96\r\n"
            + "a=rtpmap:96 AppleLossless\r\na=fmtp:96 352 0 16 40 10 14 2 255 0 0 44100\r\n"
        #expect(try RAOPAnnouncement(sdp: Array(pipewire.utf8)).encoding == .appleLossless)
        func status(_ sdp: String) -> Int? {
            do { _ = try RAOPAnnouncement(sdp: Array(sdp.utf8)); return nil } catch { return error.status }
        }
        #expect(status(pipewire + "a=rsaaeskey:AAAA\r\na=aesiv:BBBB\r\n") == 415)
        #expect(status(pipewire.replacingOccurrences(of: "AppleLossless", with: "mpeg4-generic/44100/2")) == 415)
        #expect(status(pipewire.replacingOccurrences(of: "352 0 16", with: "352 0 24")) == 415)
        #expect(status(pipewire.replacingOccurrences(of: "m=audio 0 RTP/AVP 96\r\n", with: "")) == 400)
        #expect(status(pipewire.replacingOccurrences(of: "352 0 16", with: "352 x 16")) == 400)
        #expect(status(pipewire.replacingOccurrences(of: "14 2 255", with: "14 2 70000")) == 400)
        #expect(status("\u{FF}") == 400)
        // The decoder's magic cookie: the `alac` atom, then the fmtp's parameters, big-endian.
        let alac = try RAOPAnnouncement(sdp: Array(pipewire.utf8))
        #expect(alac.alacParameters == [352, 0, 16, 40, 10, 14, 2, 255, 0, 0, 44100])
        #expect(alac.alacMagicCookie == [0, 0, 0, 36] + Array("alac".utf8) + [0, 0, 0, 0, 0, 0, 1, 0x60, 0, 16, 40, 10, 14, 2, 0, 255,
                                                                               0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xAC, 0x44])
        // With no fmtp, the usual parameters for what the rtpmap says.
        let bare = RAOPAnnouncement(encoding: .appleLossless, sampleRate: 48000, channelCount: 1)
        #expect(bare.alacMagicCookie.count == 36 && bare.alacMagicCookie[21] == 1 && bare.alacMagicCookie[32...] == [0, 0, 0xBB, 0x80])
    }

    @Test func packetsRoundTrip() throws {
        let audio = RAOPAudioPacket(sequence: 65535, timestamp: 0xFFFF_FF00, ssrc: 0x1234_5678, marker: true, payload: [1, 2, 3, 4])
        for packet in [RAOPPacket.audio(audio), .audio(RAOPAudioPacket(sequence: 7, timestamp: 9, ssrc: 1, payload: [5, 6], resent: true)),
                       .sync(RAOPSync(rtpTimeWithoutLatency: 100, ntpTime: NTPTimestamp(0xE000_0000_8000_0000), rtpTime: 77_275, isFirst: true)),
                       .timingReply(RAOPTimingReply(originate: NTPTimestamp(1), receive: NTPTimestamp(2), transmit: NTPTimestamp(3))),
                       .timingRequest(sendTime: NTPTimestamp(42)), .resendRequest(sequence: 65534, count: 3)] {
            #expect(RAOPPacket(packet.encoded) == packet, "\(packet)")
        }
        // pyatv's first sync packet, byte for byte: 0x90 0xD4 0x0007, then the three times.
        let sync = RAOPPacket([0x90, 0xD4, 0x00, 0x07, 0, 0, 0, 100, 0xE0, 0, 0, 0, 0x80, 0, 0, 0, 0, 1, 0x2D, 0xDB])
        #expect(sync == .sync(RAOPSync(rtpTimeWithoutLatency: 100, ntpTime: NTPTimestamp(0xE000_0000_8000_0000), rtpTime: 77_275, isFirst: true)))
        if case .sync(let value) = sync { #expect(value.latencyFrames == 77_175) }
        // Too short, wrong version, unknown type, or an RTP extension: none.
        #expect(RAOPPacket([0x80, 0x60, 0, 1, 0, 0, 0, 0, 0, 0, 0]) == nil)
        #expect(RAOPPacket([0x40, 0x60] + [UInt8](repeating: 0, count: 20)) == nil)
        #expect(RAOPPacket([0x80, 0x7F] + [UInt8](repeating: 0, count: 40)) == nil)
        #expect(RAOPPacket([0x90, 0x60] + [UInt8](repeating: 0, count: 20)) == nil)
        // Padding is taken off; padding longer than the packet is refused.
        #expect(RAOPPacket([0xA0, 0x60, 0, 1, 0, 0, 0, 2, 0, 0, 0, 3, 9, 9, 0, 2]) == .audio(RAOPAudioPacket(sequence: 1, timestamp: 2, ssrc: 3, payload: [9, 9])))
        #expect(RAOPPacket([0xA0, 0x60, 0, 1, 0, 0, 0, 2, 0, 0, 0, 3, 9, 9, 0, 200]) == nil)
    }

    @Test func ntpTimestampsAreExactToTheNanosecond() {
        for nanoseconds: Int64 in [0, 1, 999_999_999, 1_000_000_000, 123_456_789_012_345, 4_000_000_000 * 1_000_000_000] {
            #expect(NTPTimestamp(nanoseconds: nanoseconds).nanoseconds == nanoseconds)
        }
        #expect(NTPTimestamp(0x0000_0001_8000_0000).nanoseconds == 1_500_000_000)
    }

    @Test func payloadsDecodeToTheirSamples() throws {
        let l16 = RAOPAudioDecoder(announcement: RAOPAnnouncement(encoding: .l16, sampleRate: 44100, channelCount: 2))
        var samples: [Int16] = []
        #expect(try l16.decode([0x12, 0x34, 0xFF, 0xFE, 0x80, 0x00, 0x7F, 0xFF], into: &samples) == 2)
        #expect(samples == [0x1234, -2, -32768, 32767])
        #expect(throws: RAOPAudioDecoder.Failure.length(3)) { try l16.decode([1, 2, 3], into: &samples) }

        // An uncompressed ALAC frame, as a sender without an encoder builds it: CPE, tag 0,
        // 12 unused bits, no size, no shift, the escape bit, the samples, END.
        func alacFrame(_ values: [Int16], hasSize: Bool = false, frames: Int = 0, escape: Bool = true) -> [UInt8] {
            var bits: [Bool] = []
            func put(_ value: UInt32, _ count: Int) { for bit in (0..<count).reversed() { bits.append((value >> UInt32(bit)) & 1 == 1) } }
            put(1, 3); put(0, 4); put(0, 12); put(hasSize ? 1 : 0, 1); put(0, 2); put(escape ? 1 : 0, 1)
            if hasSize { put(UInt32(frames), 32) }
            for value in values { put(UInt32(UInt16(bitPattern: value)), 16) }
            put(7, 3)
            while bits.count % 8 != 0 { bits.append(false) }
            return stride(from: 0, to: bits.count, by: 8).map { start in bits[start..<start + 8].reduce(UInt8(0)) { $0 << 1 | ($1 ? 1 : 0) } }
        }
        let alac = RAOPAudioDecoder(announcement: RAOPAnnouncement(encoding: .appleLossless, sampleRate: 44100, channelCount: 2, framesPerPacket: 2))
        samples = []
        #expect(try alac.decode(alacFrame([1, -1, 300, -300]), into: &samples) == 2)
        #expect(samples == [1, -1, 300, -300])
        samples = []
        #expect(try alac.decode(alacFrame([5, 6], hasSize: true, frames: 1), into: &samples) == 1)
        #expect(samples == [5, 6])
        #expect(throws: RAOPAudioDecoder.Failure.compressedALAC) { try alac.decode(alacFrame([1, 2, 3, 4], escape: false), into: &samples) }
        #expect(throws: RAOPAudioDecoder.Failure.self) { try alac.decode(Array(alacFrame([1, 2, 3, 4]).prefix(5)), into: &samples) }
    }

    @Test func dmapGivesTheTrack() {
        func tag(_ code: String, _ value: [UInt8]) -> [UInt8] {
            Array(code.utf8) + [UInt8(value.count >> 24), UInt8(value.count >> 16 & 0xFF), UInt8(value.count >> 8 & 0xFF), UInt8(value.count & 0xFF)] + value
        }
        let item = tag("mlit", tag("minm", Array("Song".utf8)) + tag("asar", Array("Artist".utf8)) + tag("asal", Array("Album".utf8)) + tag("astm", [0, 0, 1, 0]))
        #expect(DMAPTags(item) == DMAPTags(title: "Song", artist: "Artist", album: "Album"))
        // pyatv sends the tags bare, without mlit.
        #expect(DMAPTags(tag("minm", Array("Bare".utf8))).title == "Bare")
        // A length past the end stops the reading; what came before stays.
        #expect(DMAPTags(tag("minm", Array("Kept".utf8)) + Array("asar".utf8) + [0xFF, 0, 0, 0]).title == "Kept")
    }
}
