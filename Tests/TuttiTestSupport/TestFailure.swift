/// A test's own failure, thrown with one line saying what did not happen (a room that never
/// appeared, a house that never reached a position).
public struct TestFailure: Error, CustomStringConvertible, Sendable {
    public let description: String
    public init(_ description: String) { self.description = description }
}
