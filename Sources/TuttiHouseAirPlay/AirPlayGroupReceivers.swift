import NIOCore
import NIOPosix
import TuttiCore
import TuttiHouse
import TuttiProtocol

/// Every group of the house as an AirPlay receiver: the default group's on the port given, each
/// further group's on the next free port after it (or any free port when given 0), made and
/// stopped as groups are made and removed. Each receiver plays into its group through a
/// `GroupAirPlaySink`, so two senders play into two groups at once; the house reports each
/// group's address (`GroupReport.airplay`, `tutti ctl groups --json`).
public actor AirPlayGroupReceivers {
    private let house: House
    /// The address the receivers listen on.
    public nonisolated let host: String
    private let port: Int
    private let clock: any HostClock
    private let log: @Sendable (String) -> Void
    private var receivers: [UInt32: (receiver: AirPlayReceiver, port: Int, name: String, isDefault: Bool)] = [:]
    private var changed: (@Sendable ([Listening]) -> Void)?

    /// A group's receiver, as the house's announcement names it.
    public struct Listening: Sendable, Equatable {
        public var group: UInt32
        public var name: String
        public var isDefault: Bool
        public var port: Int
    }

    /// Every receiver listening now, the default group's first.
    public var listening: [Listening] {
        receivers.map { Listening(group: $0.key, name: $0.value.name, isDefault: $0.value.isDefault, port: $0.value.port) }
            .sorted { ($0.isDefault ? 0 : 1, $0.group) < ($1.isDefault ? 0 : 1, $1.group) }
    }

    /// Calls `handler` with every receiver listening whenever they change (a group made,
    /// renamed or removed), and once now.
    public func onChange(_ handler: @escaping @Sendable ([Listening]) -> Void) {
        changed = handler
        handler(listening)
    }

    private func noteChange() { changed?(listening) }
    private var observer: Int?
    private var stopped = false
    /// A look at the groups is running, and another was asked for meanwhile.
    private var reconciling = false
    private var again = false
    /// Ports past the first tried for a group before giving up.
    static let portsTried = 64

    /// Each group's identity and pairings, for senders that pair with a PIN (nil: transient only).
    private let accessory: (@Sendable (_ group: UInt32, _ name: String) -> AirPlayAccessory)?

    /// Only senders paired with a PIN are played (`AirPlayReceiver.Configuration.onlyPairedSenders`).
    private let onlyPairedSenders: Bool

    public init(house: House, host: String, port: Int, clock: any HostClock, onlyPairedSenders: Bool = false,
                accessory: (@Sendable (_ group: UInt32, _ name: String) -> AirPlayAccessory)? = nil, log: @escaping @Sendable (String) -> Void) {
        self.house = house
        self.host = host
        self.port = port
        self.clock = clock
        self.onlyPairedSenders = onlyPairedSenders
        self.accessory = accessory
        self.log = log
    }

    /// The addresses of the receivers, by group id.
    public var ports: [UInt32: Int] { receivers.mapValues(\.port) }

    /// Starts the default group's receiver on the port given (throwing if it cannot listen
    /// there), then one for each other group, and follows the groups from then on. Returns the
    /// default group's port.
    public func start() async throws -> Int {
        let groups = try await currentGroups()
        guard let first = groups.first(where: \.isDefault) else { throw AirPlayReceiverError("the house has no default group") }
        let bound = try await startReceiver(for: first, ports: [port])
        for group in groups where !group.isDefault { await startReceiverOnNextFreePort(for: group) }
        observer = await house.observeChanges { [weak self] in
            guard let self else { return }
            Task { await self.reconcile() }
        }
        return bound
    }

    public func stop() async {
        stopped = true
        if let observer { house.stopObservingChanges(observer) }
        for (id, entry) in receivers {
            await entry.receiver.stop()
            house.setAirPlayAddress(nil, group: id)
        }
        receivers = [:]
    }

    private func currentGroups() async throws -> [GroupReport] {
        switch await house.perform(.groups) {
        case .success(let reply): return reply.groups?.groups ?? []
        case .failure(let refusal): throw AirPlayReceiverError("cannot list the house's groups: \(refusal)")
        }
    }

    /// Starts a receiver for each group that has none and stops those of groups removed.
    private func reconcile() async {
        if reconciling { again = true; return }
        reconciling = true
        defer { reconciling = false }
        repeat {
            again = false
            guard !stopped else { return }
            let groups: [GroupReport]
            do { groups = try await currentGroups() } catch { return log("AirPlay: \(error); the groups' receivers are left as they are") }
            let before = listening
            let ids = Set(groups.map(\.id))
            for (id, entry) in receivers where !ids.contains(id) {
                receivers[id] = nil
                house.setAirPlayAddress(nil, group: id)
                await entry.receiver.stop()
                log("AirPlay: the receiver of group \(entry.name) (port \(entry.port)) stopped: the group was removed")
            }
            for group in groups {
                if receivers[group.id] == nil {
                    if !stopped { await startReceiverOnNextFreePort(for: group) }
                } else {
                    // Renamed: the same receiver, announced under the new name.
                    receivers[group.id]?.name = group.name
                }
            }
            if listening != before { noteChange() }
        } while again
    }

    private func startReceiverOnNextFreePort(for group: GroupReport) async {
        let after = receivers.values.map(\.port).max() ?? port
        let candidates = port == 0 ? [0] : Array((after + 1)...(after + Self.portsTried)).filter { $0 <= 65535 }
        do {
            let bound = try await startReceiver(for: group, ports: candidates)
            log("AirPlay: group \(group.name) receives on \(host):\(bound)")
        } catch {
            log("AirPlay: group \(group.name) has no receiver: \(error)")
        }
    }

    /// A receiver for `group` on the first of `ports` it can listen on.
    private func startReceiver(for group: GroupReport, ports: [Int]) async throws -> Int {
        var lastError: any Error = AirPlayReceiverError("no port to try")
        for candidate in ports {
            let name = group.name, log = self.log
            var configuration = AirPlayReceiver.Configuration(host: host, port: candidate, clock: clock)
            configuration.accessory = accessory?(group.id, group.name)
            configuration.onlyPairedSenders = onlyPairedSenders
            let receiver = AirPlayReceiver(configuration: configuration,
                                           sink: GroupAirPlaySink(input: LiveInput(house: house, group: String(group.id)))) { line in
                log(group.isDefault ? line : "group \(name): \(line)")
            }
            let bound: Int
            do { bound = try await receiver.start() } catch {
                await receiver.stop()
                lastError = error
                continue
            }
            // Stopped, or the group given a receiver, while this one started (an actor's state
            // may change across an await).
            guard !stopped, receivers[group.id] == nil else {
                await receiver.stop()
                throw AirPlayReceiverError(stopped ? "the receivers were stopped" : "the group has a receiver already")
            }
            receivers[group.id] = (receiver, bound, group.name, group.isDefault)
            house.setAirPlayAddress("\(host):\(bound)", group: group.id)
            return bound
        }
        throw lastError
    }
}

/// Why the AirPlay receivers could not start.
public struct AirPlayReceiverError: Error, CustomStringConvertible {
    public var description: String
    public init(_ description: String) { self.description = description }
}
