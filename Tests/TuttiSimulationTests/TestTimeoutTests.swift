import Foundation
import Testing
import TuttiTestSupport

/// A bounded wait that runs out fails with every thread's stack on file, and prints where the
/// threads in Tutti's code were blocked: CI keeps only what a run prints.
@Suite struct TestTimeoutTests {
    @Test(.timeLimit(.minutes(1)))
    func aTimeoutRecordsWhereThreadsWereBlocked() async throws {
        let gate = DispatchSemaphore(value: 0)
        let timeout = await #expect(throws: TestTimeout.self) {
            try await onOwnThread("a gate nobody opens", timeout: .seconds(1), onTimeout: { gate.signal() }) {
                gate.wait()
            }
        }
        let description = timeout?.description ?? ""
        #expect(description.contains("timed out after 1.0 seconds waiting for a gate nobody opens"), "\(description)")
        guard let range = description.range(of: "; thread stacks in ") else {
            Issue.record("no stacks recorded (is gdb installed?): \(description)")
            return
        }
        let path = String(description[range.upperBound...])
        defer { try? FileManager.default.removeItem(atPath: path) }
        let summary = ThreadDump.summary(of: path)
        // The thread blocked at the gate is in this test's closure, and says where it waits.
        #expect(summary.contains("TuttiSimulationTests"), "\(summary)")
        #expect(summary.contains("wait") || summary.contains("futex"), "\(summary)")
    }
}
