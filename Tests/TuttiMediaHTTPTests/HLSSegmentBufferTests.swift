import Testing
import TuttiMedia
@testable import TuttiMediaHTTP
import TuttiTestSupport

/// The HLS byte buffer between the download task and the decoder thread: neither may be left
/// waiting for the other.
@Suite struct HLSSegmentBufferTests {
    /// One read takes all the media the downloader's limit allows at once (64 KiB is 4 s of a
    /// low variant), so the next read finds nothing ahead: the downloader, waiting for space,
    /// must be woken before the reader waits for its bytes. This hung the HLS test in CI once.
    @Test func aReadThatTakesTheWholeLimitWakesTheDownloader() async throws {
        let buffer = HLSSegmentBuffer(name: "test.m3u8", behindWindowBytes: 1 << 20)
        buffer.markOpened()
        buffer.append([UInt8](repeating: 1, count: 1000), seconds: 4)
        let downloader = Task {
            await buffer.waitForSpace(seconds: 4)
            buffer.append([UInt8](repeating: 2, count: 500), seconds: 2)
            buffer.finish()
        }
        try await waitUntil("the downloader to wait for space", timeout: .seconds(30)) { buffer.diagnosis.contains("waiting for less than") }
        let reads = try await onOwnThread("the reader to get the next segment", timeout: .seconds(30), onTimeout: { buffer.cancel() }) {
            var bytes = [UInt8](repeating: 0, count: 65536)
            var counts: [Int] = []
            var offset: Int64 = 0
            while true {
                let count = try bytes.withUnsafeMutableBytes { try buffer.read(into: $0, at: offset) }
                counts.append(count)
                if count == 0 { return counts }
                offset += Int64(count)
            }
        }
        #expect(reads == [1000, 500, 0])
        await downloader.value
    }
}
