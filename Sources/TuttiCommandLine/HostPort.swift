import ArgumentParser

/// `HOST:PORT` on the command line (`[::1]:5000` for IPv6).
public struct HostPort: ExpressibleByArgument, CustomStringConvertible, Sendable {
    public var host: String
    public var port: Int

    public init?(argument: String) {
        guard let colon = argument.lastIndex(of: ":"), let port = Int(argument[argument.index(after: colon)...]),
              (0...65535).contains(port) else { return nil }
        var host = String(argument[..<colon])
        if host.hasPrefix("[") && host.hasSuffix("]") { host = String(host.dropFirst().dropLast()) }
        guard !host.isEmpty else { return nil }
        self.host = host
        self.port = port
    }

    public var description: String { host.contains(":") ? "[\(host)]:\(port)" : "\(host):\(port)" }
    public static var defaultValueDescription: String { "HOST:PORT" }
}
