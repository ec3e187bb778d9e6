import Foundation
import Testing
@testable import TuttiCore

@Suite struct SPSCRingTests {
    @Test func wrapsAroundAndReportsSpace() {
        let ring = AudioRing(channelCount: 2, capacityFrames: 5)
        let input: [Float] = (0..<8).map(Float.init)
        #expect(ring.write(input, frames: 4) == 4)
        #expect(ring.writableFrames == 1)
        var out = [Float](repeating: -1, count: 6)
        #expect(ring.read(into: &out, frames: 3) == 3)
        #expect(out == [0, 1, 2, 3, 4, 5])
        // Next write wraps past the end of storage.
        #expect(ring.write(input, frames: 4) == 4)
        #expect(ring.readableFrames == 5)
        var rest = [Float](repeating: -1, count: 10)
        #expect(ring.read(into: &rest, frames: 10) == 5)
        #expect(rest == [6, 7, 0, 1, 2, 3, 4, 5, 6, 7])
        #expect(ring.read(into: &rest, frames: 1) == 0)
        #expect(ring.discard(frames: 3) == 0)
    }

    /// A producer and a consumer thread move 20 million frames of a counting sequence through a
    /// small ring in random-sized blocks; every frame must arrive once, in order.
    @Test func concurrentProducerAndConsumerKeepOrder() async {
        let ring = AudioRing(channelCount: 2, capacityFrames: 1000)
        let total = 2_000_000
        let producer = Thread {
            var next = 0
            var block = [Float](repeating: 0, count: 2 * 300)
            var generator = SystemRandomNumberGenerator()
            while next < total {
                let count = min(Int.random(in: 1...300, using: &generator), total - next)
                for i in 0..<count { block[2 * i] = Float(next + i); block[2 * i + 1] = -Float(next + i) }
                var done = 0
                while done < count {
                    done += block.withUnsafeBufferPointer { ring.write($0.baseAddress! + 2 * done, frames: count - done) }
                    if done < count { sched_yield() }
                }
                next += count
            }
        }
        producer.start()
        var expected = 0
        var errors = 0
        var buffer = [Float](repeating: 0, count: 2 * 257)
        while expected < total {
            let got = ring.read(into: &buffer, frames: Int.random(in: 1...257))
            if got == 0 { sched_yield(); continue }
            for i in 0..<got where buffer[2 * i] != Float(expected + i) || buffer[2 * i + 1] != -Float(expected + i) { errors += 1 }
            expected += got
        }
        #expect(errors == 0)
        #expect(ring.totalFramesRead == total)
    }

    @Test func recordRingsCarryIntegers() {
        let ring = SPSCRing<Int64>(channelCount: 2, capacityFrames: 4, zero: 0)
        let record: [Int64] = [Int64.max, -7]
        #expect(ring.write(record, frames: 1) == 1)
        var out: [Int64] = [0, 0]
        #expect(ring.read(into: &out, frames: 1) == 1)
        #expect(out == record)
    }
}
