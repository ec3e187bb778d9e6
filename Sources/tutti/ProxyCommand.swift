import TuttiCommandLine
import ArgumentParser
import Foundation
import Synchronization
import TuttiImpairment

struct Proxy: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Forward to a Tutti server through a deliberately bad network (delay, jitter, loss, outages).",
        discussion: """
            For tests and benchmarks on machines without netem: put the proxy between speakers and \
            a server to see how playback and clock sync cope with a worse network than the local one.
            Tutti's server uses TCP (audio, control) and UDP (clock sync) on one port number; the \
            proxy listens on one port for both and forwards TCP to TCP and UDP to UDP at --upstream, \
            in both directions. Point speakers at the --listen address instead of the server.

            Every UDP datagram and every TCP read chunk is delayed by --delay-ms plus a uniform \
            sample in ±--jitter-ms (never below zero), each way. TCP stays in order; UDP datagrams \
            may reorder, and each is lost with probability --udp-loss, each way. During an outage \
            (--outage-after, --outage-for) UDP datagrams are dropped and TCP bytes are held, then \
            delivered in order when it ends; connections stay open. Jitter and loss are drawn from \
            a generator seeded with --seed, so runs can be repeated.

            Prints the bound address on start (port 0 picks a free one, the same for TCP and UDP) \
            and the counters when stopped with Ctrl-C or SIGTERM.

            Example:
              tutti proxy --listen 127.0.0.1:7001 --upstream 127.0.0.1:7000 --delay-ms 20 --jitter-ms 5 --udp-loss 0.02
            """)

    @Option(help: ArgumentHelp("Address to listen on, TCP and UDP (port 0 picks a free one).", valueName: "host:port"))
    var listen: Endpoint

    @Option(help: ArgumentHelp("The server to forward to, TCP and UDP.", valueName: "host:port"))
    var upstream: Endpoint

    @Option(name: .customLong("delay-ms"), help: "One-way delay in milliseconds, each direction.")
    var delayMilliseconds: Double = 0

    @Option(name: .customLong("jitter-ms"), help: "Each delay varies uniformly by up to ± this many milliseconds.")
    var jitterMilliseconds: Double = 0

    @Option(name: .customLong("udp-loss"), help: "Probability (0…1) that a UDP datagram is dropped, each direction.")
    var udpLoss: Double = 0

    @Option(name: .customLong("outage-after"), help: "Start an outage this many seconds after starting.")
    var outageAfter: Double?

    @Option(name: .customLong("outage-for"), help: "Length of the outage in seconds.")
    var outageFor: Double?

    @Option(help: "Seed for jitter and loss.")
    var seed: UInt64 = 1

    struct Endpoint: ExpressibleByArgument, CustomStringConvertible {
        var host: String
        var port: Int

        /// "host:port", "[v6]:port".
        init?(argument: String) {
            let hostPart: Substring, portPart: Substring
            if argument.hasPrefix("["), let close = argument.firstIndex(of: "]") {
                hostPart = argument[argument.index(after: argument.startIndex)..<close]
                let rest = argument[argument.index(after: close)...]
                guard rest.hasPrefix(":") else { return nil }
                portPart = rest.dropFirst()
            } else {
                guard let colon = argument.lastIndex(of: ":") else { return nil }
                hostPart = argument[..<colon]
                portPart = argument[argument.index(after: colon)...]
                guard !hostPart.contains(":") else { return nil }
            }
            guard !hostPart.isEmpty, let port = Int(portPart), (0...65535).contains(port) else { return nil }
            host = String(hostPart)
            self.port = port
        }

        var description: String { host.contains(":") ? "[\(host)]:\(port)" : "\(host):\(port)" }
    }

    var impairment: ImpairmentProxy.Impairment {
        ImpairmentProxy.Impairment(delayNanoseconds: Int64((delayMilliseconds * 1e6).rounded()),
                                   jitterNanoseconds: Int64((jitterMilliseconds * 1e6).rounded()),
                                   udpLossProbability: udpLoss, seed: seed)
    }

    func validate() throws {
        guard delayMilliseconds.isFinite, (0...3_600_000).contains(delayMilliseconds) else {
            throw ValidationError("--delay-ms \(delayMilliseconds): must be between 0 and 3600000")
        }
        guard jitterMilliseconds.isFinite, (0...3_600_000).contains(jitterMilliseconds) else {
            throw ValidationError("--jitter-ms \(jitterMilliseconds): must be between 0 and 3600000")
        }
        guard udpLoss >= 0 && udpLoss <= 1 else { throw ValidationError("--udp-loss \(udpLoss): must be a probability between 0 and 1") }
        guard upstream.port != 0 else { throw ValidationError("--upstream \(upstream): needs a port") }
        switch (outageAfter, outageFor) {
        case (nil, nil): break
        case (let after?, let length?):
            guard after.isFinite, after >= 0 else { throw ValidationError("--outage-after \(after): must be a non-negative number of seconds") }
            guard length.isFinite, length > 0 else { throw ValidationError("--outage-for \(length): must be a positive number of seconds") }
        default:
            throw ValidationError("--outage-after and --outage-for go together")
        }
    }

    func run() throws {
        let proxy = ImpairmentProxy(listenHost: listen.host, listenPort: listen.port,
                                    upstreamHost: upstream.host, upstreamPort: upstream.port, impairment: impairment)

        // Stop on SIGINT or SIGTERM.
        let stopRequested = DispatchSemaphore(value: 0)
        TerminationSignals.onFirst { _ in stopRequested.signal() }

        let port: Int
        do { port = try blocking { try await proxy.start() } } catch {
            Terminal.standardError("tutti: proxy: \(error)\n")
            throw ExitCode(2)
        }
        if let after = outageAfter, let length = outageFor {
            proxy.scheduleOutage(after: .nanoseconds(Int64((after * 1e9).rounded())), duration: .nanoseconds(Int64((length * 1e9).rounded())))
        }
        let bound = Endpoint(host: listen.host, port: port)
        Terminal.standardOutput("tutti proxy: listening on \(bound) (TCP and UDP), forwarding to \(upstream)\n")

        stopRequested.wait()
        try? blocking { try await proxy.stop() }
        Terminal.standardOutput("tutti proxy: \(proxy.statistics)\n")
    }

    /// Runs async work from this synchronous command (the root command is not async).
    private func blocking<T: Sendable>(_ work: @escaping @Sendable () async throws -> T) throws -> T {
        let result = Mutex<Result<T, any Error>?>(nil)
        let done = DispatchSemaphore(value: 0)
        Task {
            let outcome: Result<T, any Error>
            do { outcome = .success(try await work()) } catch { outcome = .failure(error) }
            result.withLock { $0 = outcome }
            done.signal()
        }
        done.wait()
        return try result.withLock { $0! }.get()
    }
}

extension Proxy.Endpoint {
    init(host: String, port: Int) {
        self.host = host
        self.port = port
    }
}
