import NIOCore
import NIOPosix
import TuttiCore
import TuttiProtocol

/// Finds the AirPlay 1 receivers announced on the network (`_raop._tcp`) and makes each an
/// `AirPlayRoom`, which knocks at the house like any new speaker: it waits, listed with its
/// code, until someone admits it, so a stranger's receiver on the LAN never plays the house's
/// music unasked.
///
/// Left out: a Tutti house's own groups (their TXT says `am=Tutti`: a room of a house playing
/// into a group of a house would loop), the receivers named with `--airplay-room` (by address),
/// and any receiver already made a room. A receiver that goes away keeps its room, which says so
/// in its report and tries again. Looked for at the start and every `interval`.
///
/// The lookup (`browse`, injected: Avahi in `tutti server`, a list in tests) blocks, so it runs
/// on NIO's thread pool; what it finds is acted on on the finder's event loop, which owns its
/// state.
public final class AirPlayRoomFinder: Sendable {
    /// A receiver as the network announces it.
    public struct Receiver: Sendable, Equatable {
        /// Its DNS-SD instance name: `DEVICEID@NAME` for AirPlay 1.
        public var serviceName: String
        public var host: String
        public var port: Int
        public var textRecord: [String]

        public init(serviceName: String, host: String, port: Int, textRecord: [String]) {
            (self.serviceName, self.host, self.port, self.textRecord) = (serviceName, host, port, textRecord)
        }

        /// What its AirPlay menu entry says: the name after `@`.
        public var roomName: String {
            guard let at = serviceName.firstIndex(of: "@") else { return serviceName }
            let name = String(serviceName[serviceName.index(after: at)...])
            return name.isEmpty ? serviceName : name
        }

        /// A Tutti house's group announces itself with `am=Tutti`.
        public var isTuttiGroup: Bool { textRecord.contains("am=Tutti") }

        /// Whether a room can play to it: no password (`pw=true`), unencrypted audio among its
        /// encryptions (`et`, 0), ALAC among its codecs (`cn`, 1). A field it does not give is
        /// taken as AirPlay 1's default.
        public var takesTuttisStream: Bool {
            func values(_ key: String) -> [String]? {
                textRecord.first { $0.hasPrefix(key + "=") }.map { $0.dropFirst(key.count + 1).split(separator: ",").map(String.init) }
            }
            if values("pw")?.first == "true" { return false }
            if let encryptions = values("et"), !encryptions.contains("0") { return false }
            if let codecs = values("cn"), !codecs.contains("1") { return false }
            return true
        }

        public var address: String { host.contains(":") ? "[\(host)]:\(port)" : "\(host):\(port)" }
    }

    public struct Configuration: Sendable {
        public var houseHost: String
        public var housePort: Int
        /// The house's identity: each room's is derived from it and the receiver's name and address.
        public var houseIdentity: IdentityKey
        /// Receivers already rooms by name (`--airplay-room`), as HOST:PORT.
        public var namedAddresses: Set<String> = []
        public var interval: TimeAmount = .seconds(30)

        public init(houseHost: String, housePort: Int, houseIdentity: IdentityKey) {
            self.houseHost = houseHost
            self.housePort = housePort
            self.houseIdentity = houseIdentity
        }
    }

    final class State {
        var rooms: [String: AirPlayRoom] = [:]
        var task: RepeatedTask?
        var lookupFailureLogged = false
        /// Receivers left out (and said so once).
        var refused: Set<String> = []
        var stopped = false
    }

    public let configuration: Configuration
    private let browse: @Sendable () throws -> [Receiver]
    private let clock: any HostClock
    private let eventLoop: any EventLoop
    private let group: any EventLoopGroup
    private let log: @Sendable (String) -> Void
    private let state: NIOLoopBoundBox<State>

    public init(configuration: Configuration, clock: any HostClock, group: any EventLoopGroup = MultiThreadedEventLoopGroup.singleton,
                browse: @escaping @Sendable () throws -> [Receiver], log: @escaping @Sendable (String) -> Void) {
        self.configuration = configuration
        self.browse = browse
        self.clock = clock
        self.group = group
        eventLoop = group.next()
        self.log = log
        state = NIOLoopBoundBox.makeBoxSendingValue(State(), eventLoop: eventLoop)
    }

    public func start() {
        eventLoop.execute {
            self.state.value.task = self.eventLoop.scheduleRepeatedTask(initialDelay: .zero, delay: self.configuration.interval) { _ in self.lookOnce() }
        }
    }

    /// Stops looking, and stops every room it made.
    public func stop() async {
        let rooms = try? await eventLoop.submit {
            let state = self.state.value
            state.stopped = true
            state.task?.cancel()
            return Array(state.rooms.values)
        }.get()
        for room in rooms ?? [] { room.stop() }
    }

    /// The rooms made so far, by receiver address.
    public func rooms() async -> [String: String] {
        (try? await eventLoop.submit { self.state.value.rooms.mapValues(\.configuration.name) }.get()) ?? [:]
    }

    private func lookOnce() {
        let browse = self.browse
        NIOThreadPool.singleton.runIfActive(eventLoop: eventLoop) { try browse() }.whenComplete { result in
            let state = self.state.value
            guard !state.stopped else { return }
            switch result {
            case .success(let receivers):
                state.lookupFailureLogged = false
                for receiver in receivers { self.consider(receiver) }
            case .failure(let error):
                if !state.lookupFailureLogged {
                    state.lookupFailureLogged = true
                    self.log("cannot look for AirPlay receivers (\(error)); trying again every \(self.configuration.interval.nanoseconds / 1_000_000_000) s (--airplay-room names one)")
                }
            }
        }
    }

    private func consider(_ receiver: Receiver) {
        let state = self.state.value
        let address = receiver.address
        guard !receiver.isTuttiGroup, !configuration.namedAddresses.contains(address), state.rooms[address] == nil else { return }
        guard receiver.takesTuttisStream else {
            if state.refused.insert(address).inserted {
                log("found the AirPlay receiver \(receiver.roomName) at \(address), which asks for a password, encryption or a codec a room does not send (\(receiver.textRecord.filter { $0.hasPrefix("pw=") || $0.hasPrefix("et=") || $0.hasPrefix("cn=") }.joined(separator: " "))); left out")
            }
            return
        }
        var room = AirPlayRoom.Configuration(houseHost: configuration.houseHost, housePort: configuration.housePort, name: receiver.roomName,
                                             receiverHost: receiver.host, receiverPort: receiver.port)
        room.identity = configuration.houseIdentity.derived(for: "AirPlay room \(receiver.roomName) found at \(address)")
        room.houseKey = configuration.houseIdentity.publicKey
        do {
            let made = try AirPlayRoom(configuration: room, clock: clock, eventLoop: group.next(), log: log)
            state.rooms[address] = made
            made.start(group: group)
            log("found the AirPlay receiver \(receiver.roomName) at \(address): it waits to be admitted as a room (tutti ctl admit '\(receiver.roomName)')")
        } catch {
            log("found the AirPlay receiver \(receiver.roomName) at \(address), but its room cannot reach the house (\(error))")
        }
    }
}
