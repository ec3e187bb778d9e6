import NIOCore
import Testing
@testable import TuttiSnapcastRooms
import TuttiProtocol

/// Snapcast's binary messages: the layout snapclient 0.26 reads and writes, and bad input
/// refused with a reason.
@Suite struct SnapcastMessageTests {
    func roundTrip(_ message: SnapcastMessage) throws -> SnapcastMessage? {
        var buffer = ByteBufferAllocator().buffer(capacity: 64)
        message.write(to: &buffer)
        return try SnapcastMessage.read(from: &buffer)
    }

    @Test func everyKindRoundTrips() throws {
        let time = SnapcastMessage.Time(seconds: 12, microseconds: 345_678)
        for payload: SnapcastMessage.Payload in [
            .codecHeader(codec: "pcm", header: SnapcastMessage.pcmHeader(sampleRate: 48000, channelCount: 2)),
            .wireChunk(timestamp: time, data: [1, 2, 3, 4]),
            .serverSettings(SnapcastServerSettings(bufferMs: 1000, latency: 20, muted: true, volume: 42)),
            .time(latency: .init(nanoseconds: -1_500_000)),
            .hello(SnapcastHello(hostName: "pi", id: "kitchen", instance: 2)),
            .clientInfo(volume: 55, muted: false),
        ] {
            let message = SnapcastMessage(id: 7, refersTo: 3, sent: time, received: time, payload: payload)
            #expect(try roundTrip(message) == message)
        }
    }

    /// The header snapserver's PCM encoder sends: RIFF, 16-bit, the rate and channels.
    @Test func pcmHeaderIsSnapserversWaveHeader() {
        let header = SnapcastMessage.pcmHeader(sampleRate: 48000, channelCount: 2)
        #expect(header.count == 44)
        #expect(Array(header[0..<4]) == Array("RIFF".utf8) && Array(header[8..<16]) == Array("WAVEfmt ".utf8))
        #expect(header[24] == 0x80 && header[25] == 0xBB && header[34] == 16 && header[22] == 2)
    }

    /// Time stamps are floored to the microsecond, also before zero.
    @Test func timesFloorToTheMicrosecond() {
        #expect(SnapcastMessage.Time(nanoseconds: 1_000_001_999) == .init(seconds: 1, microseconds: 1))
        #expect(SnapcastMessage.Time(nanoseconds: -1) == .init(seconds: -1, microseconds: 999_999))
        #expect(SnapcastMessage.Time(nanoseconds: -1_500_000).nanoseconds == -1_500_000)
    }

    @Test func aPartialMessageWaits() throws {
        var buffer = ByteBufferAllocator().buffer(capacity: 64)
        SnapcastMessage(payload: .wireChunk(timestamp: .init(seconds: 1, microseconds: 2), data: [9, 9])).write(to: &buffer)
        var partial = buffer.getSlice(at: 0, length: buffer.readableBytes - 1)!
        #expect(try SnapcastMessage.read(from: &partial) == nil)
        #expect(partial.readableBytes == buffer.readableBytes - 1)
    }

    @Test func badInputIsRefusedWithItsReason() {
        func header(kind: UInt16, size: UInt32, body: [UInt8] = []) -> ByteBuffer {
            var buffer = ByteBufferAllocator().buffer(capacity: 64)
            buffer.writeInteger(kind, endianness: .little)
            buffer.writeBytes([UInt8](repeating: 0, count: 20))
            buffer.writeInteger(size, endianness: .little)
            buffer.writeBytes(body)
            return buffer
        }
        var unknown = header(kind: 9, size: 0)
        #expect(throws: SnapcastMessageError("unknown message type 9")) { try SnapcastMessage.read(from: &unknown) }
        var huge = header(kind: 2, size: 2_000_000)
        #expect(throws: SnapcastMessageError("a message of type 2 of 2000000 bytes, over the 1000000 allowed")) { try SnapcastMessage.read(from: &huge) }
        let json = Array("not json".utf8)
        var hello = header(kind: 5, size: UInt32(4 + json.count), body: [UInt8(json.count), 0, 0, 0] + json)
        #expect(throws: SnapcastMessageError("the hello is not the JSON expected: not json")) { try SnapcastMessage.read(from: &hello) }
        var short = header(kind: 1, size: 4, body: [200, 0, 0, 0])
        #expect(throws: SnapcastMessageError("the codec header's name is cut short")) { try SnapcastMessage.read(from: &short) }
    }

    @Test func aClientsRoomIsItsHostIDOrHostName() {
        #expect(SnapcastHello(hostName: "pi", id: "kitchen").roomName == "kitchen")
        #expect(SnapcastHello(hostName: "pi", id: "00:00:00:00:00:00").roomName == "pi")
        #expect(SnapcastHello(hostName: "pi", id: "00:00:00:00:00:00", instance: 2).roomName == "pi#2")
    }
}
