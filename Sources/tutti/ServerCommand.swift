import TuttiCommandLine
import ArgumentParser
import Foundation
import NIOCore
import NIOPosix
import TuttiCore
import TuttiMedia
import TuttiHouse
import TuttiHouseHTTP
import TuttiDiscovery
import TuttiHouseMPD
import TuttiHouseSnapcast
import TuttiHouseAirPlay
import TuttiSnapcastRooms
import TuttiAirPlayRooms
import TuttiMediaHTTP
import TuttiEngine
import TuttiPlayer
import TuttiProtocol
import TuttiSpeaker

struct Server: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Run the house: the queue, the timeline and the rooms.",
        discussion: """
            The house announces itself on the network through Avahi (_tutti._tcp, and _http._tcp for the web UI), so \
            `tutti speaker --name kitchen` and `tutti ctl status` find it with no --server. Or give its address: \
            `tutti speaker --server HOST:PORT`, `tutti ctl --server HOST:PORT …`; \
            or over HTTP: `curl http://HOST:7780/api/status`, `curl -X POST -d '{"files":["/music/a.flac"]}' \
            http://HOST:7780/api/transport/play` (docs/HTTP-API.md). `/api/events` is a WebSocket of every change.
            It listens on TCP (audio, control) and UDP (clock sync) on the same port. Audio is sent to every room \
            far ahead of the playhead (5 minutes by default) as fast as the network allows, so outages go unheard.
            """)

    @Option(help: "Address to listen on, e.g. 0.0.0.0:7700 or 127.0.0.1:0 (0 picks a free port).")
    var listen: HostPort = HostPort(argument: "0.0.0.0:7700")!

    @Option(help: ArgumentHelp("The house's name on the network (default: Tutti on <host name>).",
                               discussion: "Rooms and controllers choose by it with --house NAME when several houses are announced."))
    var name: String?

    @Option(help: ArgumentHelp("Announce the house through Avahi: on (default) or off.",
                               discussion: "A house that listens on loopback only is never announced."))
    var announce: String = "on"

    @Option(help: ArgumentHelp("Address of the HTTP API and its event WebSocket (default: the --listen host, port 7780), or `off`.",
                               discussion: "If the default address is taken (another house on this machine), the house runs without it and says so."))
    var http: String?

    @Option(name: .customLong("http-host"), help: ArgumentHelp(
        "A host name browsers may reach the web UI and API by (repeatable), besides localhost, this machine's names and addresses.",
        discussion: "Requests naming any other host are refused, so a web page cannot re-point its own name at the house (DNS rebinding). Give the name of a forwarded port or of your own DNS here."))
    var httpHosts: [String] = []

    @Option(help: ArgumentHelp("Address of the MPD protocol server (default: the --listen host, port 6600), or `off`.",
                               discussion: "MPD's clients (mpc, ncmpcpp, M.A.L.P., Cantata) control the house there: rooms are its outputs, setvol the group's volume. If the default address is taken (a real MPD), the house runs without it and says so."))
    var mpd: String?

    @Option(name: .customLong("snapcast-control"), help: ArgumentHelp("Address of Snapcast's control API (JSON-RPC, default 127.0.0.1:1705: this machine only), or `off`.",
                               discussion: "Snapcast's controllers (Snapweb, Snapdroid, Home Assistant's Snapcast integration) see the rooms as clients there. Snapcast's protocol has no authentication, so anyone who reaches this port controls the house: it listens on loopback unless given an address, e.g. --snapcast-control 0.0.0.0:1705 for a controller on another machine. If the default address is taken (a real snapserver), the house runs without it and says so."))
    var snapcastControl: String?

    @Option(help: ArgumentHelp("Address of the Snapcast stream port (default: the --listen host, port 1704), or `off`.",
                               discussion: "snapclient (Debian's, a Raspberry Pi's, the Android app) connects there as it would to snapserver and becomes a room: listed, grouped and given a volume like Tutti's own, in sync with them. If the default address is taken (a real snapserver), the house runs without it and says so."))
    var snapcast: String?

    @Option(help: ArgumentHelp("Address of the default group's AirPlay receiver (default: the --listen host, port 5000), or `off`. Each further group receives on the next free port.",
                               discussion: "An AirPlay sender streams to a group's receiver: AirPlay 1 (PipeWire's raop sink, pyatv's atvremote, iTunes and others that need no pairing), or AirPlay 2's realtime audio after a transient pairing, encrypted (pyatv; not Apple's buffered audio with PTP timing); a sender that pairs with a PIN (atvremote ... pair) is shown the PIN in this log and verified on every connection after (the state directory's airplay-pairings.json), and every room of the group plays it in sync, in place of the queue, which comes back paused when the sender stops. `tutti ctl groups` lists each group's address. If the default address is taken (shairport-sync), the house runs without them and says so."))
    var airplay: String?

    @Option(name: .customLong("airplay-access"), help: ArgumentHelp(
        "Which AirPlay senders a group plays: everyone on the network (default, as Apple's receivers) or paired (only senders paired with a PIN).",
        discussion: "With paired, AirPlay 1 senders and AirPlay 2's transient pairing are refused; a sender pairs once (atvremote ... --protocol raop pair: the PIN shows in this log) and is verified on every connection after."))
    var airPlayAccess = "everyone"

    @Option(name: .customLong("airplay-room"), help: ArgumentHelp(
        "NAME=HOST:PORT: an AirPlay 1 receiver (shairport-sync, an AV receiver, an AirPort Express) that plays as room NAME (repeatable).",
        discussion: "The house streams the room's group to it over RAOP (ALAC, with its own timing and sync packets), in sync with the other rooms; it is grouped, moved and given a volume like any room. Its port is the receiver's RTSP port (5000 for shairport-sync; `avahi-browse -rt _raop._tcp` lists them). Rooms named here are the household's: no admission is asked."))
    var airPlayRooms: [String] = []

    @Option(name: .customLong("find-airplay-rooms"), help: ArgumentHelp(
        "Look for AirPlay 1 receivers on the network (Avahi, _raop._tcp): on (default) or off.",
        discussion: "Each one found becomes a room that waits to be admitted (tutti ctl admit NAME, or Admit in the web UI) before it plays; Tutti houses' own groups are left out. A house that listens on loopback only does not look."))
    var findAirPlayRooms = "on"

    @Option(name: .customLong("music"), help: ArgumentHelp(
        "A directory of music for the library (repeatable): scanned at start (again only what changed), searchable from ctl, the API and the web UI."))
    var musicDirectories: [String] = []

    @Option(name: .customLong("allow-dir"), help: ArgumentHelp(
        "A directory whose files controllers may play (repeatable).",
        discussion: "Without it: your home directory, the system's temporary directory and the directory the house starts in. Other files are refused (so /etc/shadow cannot be played), and URLs other than http(s)."))
    var allowDirectories: [String] = []

    @Option(name: .customLong("max-connections"), help: ArgumentHelp(
        "Clients served at once on each port: rooms and controllers on the house's own, signed-in connections on HTTP, MPD and Snapcast clients on theirs; one more is refused with a line saying so.",
        discussion: "Besides these, a port holds at most 64 connections that have not yet proved they belong to the household (a speaker's hello, the controller token), each for 10 s; a newer one makes the oldest give way."))
    var maximumConnections = 100

    @Option(name: .customLong("mpd-timeout"), help: ArgumentHelp(
        "Seconds an MPD client may stay silent before it is closed (MPD's connection_timeout); a client in idle is exempt."))
    var mpdTimeout = 60

    @Option(name: .customLong("mpd-max-command-list"), help: ArgumentHelp(
        "Commands in one MPD command list; a longer list is refused whole with an ACK naming this limit."))
    var mpdMaximumCommandList = 10_000

    @Option(name: .customLong("mpd-password"), help: ArgumentHelp(
        "PASS@read,add,control,admin: an MPD password and what it grants (repeatable), as MPD's `password` setting.",
        discussion: "Without it, MPD clients on this machine may do everything and clients elsewhere only read. MPD sends its password in clear text."))
    var mpdPasswords: [String] = []

    @Option(name: .customLong("mpd-default-permissions"), help: ArgumentHelp(
        "What an MPD client may do before it sends a password, e.g. read or read,add,control (default: all on this machine, read elsewhere)."))
    var mpdDefaultPermissions: String?

    @Option(name: .customLong("allow-url-host"), help: ArgumentHelp(
        "A host whose URLs the house fetches wherever it points (repeatable), e.g. a radio relay on this machine.",
        discussion: "The house fetches http(s) URLs from the LAN and the internet, never from loopback, link-local (169.254.x.x, a cloud's metadata) or other local addresses, whether named by a URL, a redirect or an HLS playlist entry."))
    var allowURLHosts: [String] = []

    @Option(name: .customLong("state-dir"), help: ArgumentHelp(
        "Directory of the house's store (house.sqlite: the queue, volumes, groups and the playing stream, so a restarted house resumes where it was) and of its controller token.",
        discussion: "Without it the house keeps no store, and its controller token in ~/.local/state/tutti/house (XDG_STATE_HOME), where tutti ctl finds it."))
    var stateDirectory: String?

    @Option(name: .customLong("clock-drift-ppm"), parsing: .unconditional,
            help: ArgumentHelp("Simulated drift of the house's clock, in ppm: for tests on one machine, like the speaker's.", visibility: .hidden))
    var clockDriftPPM: Double = 0

    @Option(name: .customLong("buffer-seconds"), help: "How far ahead of the playhead rooms are filled.")
    var bufferSeconds: Double = 300

    @Option(help: "Codec on the wire: flac (lossless, default) or pcm-f32le.")
    var codec: String = "flac"

    func validate() throws {
        guard announce == "on" || announce == "off" else { throw ValidationError("--announce \(announce): use on or off") }
        guard findAirPlayRooms == "on" || findAirPlayRooms == "off" else { throw ValidationError("--find-airplay-rooms \(findAirPlayRooms): use on or off") }
        guard airPlayAccess == "everyone" || airPlayAccess == "paired" else { throw ValidationError("--airplay-access \(airPlayAccess): use everyone or paired") }
        if let name, name.isEmpty || name.utf8.count > 63 {
            throw ValidationError("--name must be 1 to 63 bytes (a DNS-SD instance name)")
        }
        if let http, http != "off", HostPort(argument: http) == nil {
            throw ValidationError("--http \(http): use HOST:PORT (0.0.0.0:7780) or off")
        }
        guard maximumConnections >= 1 else { throw ValidationError("--max-connections \(maximumConnections): at least 1") }
        guard mpdTimeout >= 1 else { throw ValidationError("--mpd-timeout \(mpdTimeout): at least 1 second") }
        guard mpdMaximumCommandList >= 1 else { throw ValidationError("--mpd-max-command-list \(mpdMaximumCommandList): at least 1") }
        for spec in mpdPasswords where MPDPermissions.password(spec) == nil {
            throw ValidationError("--mpd-password '\(spec)': use PASS@PERMISSIONS, the permissions among read,add,control,admin, e.g. secret@read,add,control")
        }
        if let mpdDefaultPermissions, MPDPermissions(list: mpdDefaultPermissions) == nil {
            throw ValidationError("--mpd-default-permissions \(mpdDefaultPermissions): a list of read, add, control and admin, e.g. read,add")
        }
        for host in httpHosts where host.isEmpty || host.contains(where: { $0 == "/" || $0 == " " || $0 == "@" }) {
            throw ValidationError("--http-host '\(host)': give a host name, such as music.home.arpa")
        }
        for (option, value, example) in [("--mpd", mpd, "0.0.0.0:6600"), ("--snapcast", snapcast, "0.0.0.0:1704"), ("--snapcast-control", snapcastControl, "0.0.0.0:1705"), ("--airplay", airplay, "0.0.0.0:5000")] {
            if let value, value != "off", HostPort(argument: value) == nil {
                throw ValidationError("\(option) \(value): use HOST:PORT (\(example)) or off")
            }
        }
        for spec in airPlayRooms where Self.airPlayRoom(spec) == nil {
            throw ValidationError("--airplay-room '\(spec)': use NAME=HOST:PORT, e.g. kitchen=192.168.1.30:5000")
        }
        for (option, directories) in [("--allow-dir", allowDirectories), ("--music", musicDirectories)] {
            for directory in directories {
                var isDirectory: ObjCBool = false
                guard FileManager.default.fileExists(atPath: directory, isDirectory: &isDirectory), isDirectory.boolValue else {
                    throw ValidationError("\(option) \(directory): not a directory")
                }
            }
        }
    }

    func run() async throws {
        // From the start: a SIGINT or SIGTERM while the house starts stops it once it has.
        TerminationSignals.install()
        // One house per state directory: a second refuses, naming the first, before it opens anything.
        var lock: StateDirectoryLock?
        if let stateDirectory {
            do { lock = try StateDirectoryLock(directory: stateDirectory) } catch {
                Terminal.standardError("tutti server: \(error)\n")
                throw ExitCode(2)
            }
        }
        raiseOpenFileLimit()
        var configuration = House.Configuration()
        (configuration.controllerToken, configuration.controllerTokenPath) = try controllerToken()
        (configuration.identity, configuration.admittedSpeakersPath) = try identity()
        let airPlayRoomSpecs = airPlayRooms.compactMap(Self.airPlayRoom)
        configuration.admittedSpeakers += airPlayRoomSpecs.map { Self.airPlayRoomIdentity($0, house: configuration.identity).publicKey }
        configuration.wireConnectionLimits.maximumTrusted = maximumConnections
        // The process's one HTTP client, for URLs in the queue.
        let client = MediaHTTPClient.make()
        configuration.network = HTTPInputOpener(client: client, clock: MonotonicClock(), policy: .house(allowing: allowURLHosts))
        configuration.stateDirectory = stateDirectory
        configuration.bufferDepthNanoseconds = Int64(bufferSeconds * 1e9)
        configuration.allowedDirectories = allowedDirectories
        let cwd = FileManager.default.currentDirectoryPath
        configuration.musicDirectories = musicDirectories.map { $0.hasPrefix("/") ? $0 : cwd + "/" + $0 }
        guard let codec = StreamCodec(wireName: codec) else { throw ValidationError("--codec \(codec): use flac or pcm-f32le") }
        configuration.codec = codec
        guard abs(clockDriftPPM) <= 1000 else { throw ValidationError("--clock-drift-ppm beyond ±1000 is not a clock") }
        let clock: any HostClock = clockDriftPPM == 0 ? MonotonicClock() : SkewedClock(base: MonotonicClock(), offsetNanoseconds: 0, driftPPM: clockDriftPPM)
        let server = HouseServer(clock: clock, host: listen.host, port: listen.port, configuration: configuration) { line in
            Terminal.standardError("tutti server: \(line)\n")
        }
        let port: Int
        do { port = try await server.start() } catch {
            Terminal.standardError("tutti server: cannot listen on \(listen): \(error)\n")
            throw ExitCode(2)
        }
        Terminal.standardOutput("tutti server: listening on \(HostPort(argument: "\(listen.host):\(port)")!) (TCP and UDP)\n")
        Terminal.standardError("tutti server: playing files under \(allowedDirectories.joined(separator: ", ")) (add others with --allow-dir)\n")
        server.house.startLibraryScan()
        let http = try await startHTTP(house: server.house)
        let mpdServer = try await startMPD(house: server.house)
        let snapcastControlServer = try await startSnapcastControl(house: server.house)
        let snapcastStreamServer = try await startSnapcastStream(house: server.house, housePort: port, clock: clock)
        let airPlayReceivers = try await startAirPlay(house: server.house, clock: clock, identity: server.house.configuration.identity)
        let airPlayRoomsRunning = try startAirPlayRooms(airPlayRoomSpecs, house: server.house, housePort: port, clock: clock)
        let airPlayRoomFinder = startFindingAirPlayRooms(named: airPlayRoomSpecs, house: server.house, housePort: port, clock: clock)
        let announcer = startAnnouncing(port: port, httpPort: http?.port)
        if let announcer, let airPlayReceivers { await announce(airPlayReceivers, with: announcer, identity: server.house.configuration.identity) }
        let signal = await waitForTermination()
        Terminal.standardError("tutti server: \(signal): stopping (the rooms keep what they hold; \(signal) again stops at once)\n")
        announcer?.stop()
        for room in airPlayRoomsRunning { room.stop() }
        await airPlayRoomFinder?.stop()
        await airPlayReceivers?.stop()
        await mpdServer?.stop()
        await snapcastControlServer?.stop()
        await snapcastStreamServer?.stop()
        await http?.server.stop()
        await server.stop()
        try? await client.shutdown()
        // Held until the house has stopped writing.
        withExtendedLifetime(lock) {}
    }

    /// Raises this process's soft limit of open files to its hard limit: each port may hold its
    /// connections plus 64 unproven ones, and a busy house reads many files, while Debian's soft
    /// limit is 1024.
    private func raiseOpenFileLimit() {
        var limit = rlimit()
        guard getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit) == 0, limit.rlim_cur < limit.rlim_max else { return }
        limit.rlim_cur = limit.rlim_max
        if setrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit) != 0 {
            Terminal.standardError("tutti server: cannot raise the limit of open files (\(String(cString: strerror(errno)))); a flood of connections may exhaust it sooner\n")
        }
    }

    /// The controller token of the state directory (or of the default one), made on the first
    /// start, and its file.
    private func controllerToken() throws -> (ControllerToken, String) {
        guard let directory = stateDirectory ?? ControllerTokenFile.defaultDirectory() else {
            Terminal.standardError("tutti server: nowhere to keep the controller token: HOME is not set; give --state-dir DIR\n")
            throw ExitCode(2)
        }
        let path = ControllerTokenFile.path(in: directory)
        do {
            let (token, created) = try ControllerTokenFile.readOrCreate(in: directory)
            if created {
                Terminal.standardError("tutti server: made the controller token \(path) (readable by you alone): tutti ctl on this machine uses it; "
                                       + "give it to controllers elsewhere, or sign a browser in with a code from tutti ctl pair-controller\n")
            }
            if ControllerTokenFile.isExposed(path) {
                Terminal.standardError("tutti server: \(path) can be read by other users of this machine, who can then control the house; chmod 600 it\n")
            }
            return (token, path)
        } catch {
            Terminal.standardError("tutti server: \(error)\n")
            throw ExitCode(2)
        }
    }

    /// The house's identity key (made on the first start) and where its admitted speakers are
    /// kept, in the state directory (or the default one). A broken file stops the start with
    /// one line: running on without it would forget every admitted speaker.
    private func identity() throws -> (IdentityKey, String) {
        guard let directory = stateDirectory ?? ControllerTokenFile.defaultDirectory() else {
            Terminal.standardError("tutti server: nowhere to keep the house's identity key: HOME is not set; give --state-dir DIR\n")
            throw ExitCode(2)
        }
        let admitted = StateFile.path(House.admittedSpeakersFileName, in: directory)
        do {
            let (identity, created) = try IdentityKeyFile.readOrCreate(in: directory)
            if created {
                Terminal.standardError("tutti server: made the house's identity key \(StateFile.path(IdentityKeyFile.fileName, in: directory)) (key \(identity.publicKey.fingerprint)): "
                                       + "speakers it admits remember it, and play from no other house\n")
            }
            if StateFile.exists(admitted) { try House.checkAdmittedSpeakers(admitted) }
            return (identity, admitted)
        } catch {
            Terminal.standardError("tutti server: \(error)\n")
            throw ExitCode(2)
        }
    }

    /// Whether `host` means every address of the machine, and so names none of them.
    private static func isWildcard(_ host: String) -> Bool { ["0.0.0.0", "::", "*"].contains(host) }

    /// A front end's address when none is given: the host the house listens on, so a house on
    /// loopback is on loopback everywhere.
    private func defaultAddress(port: Int) -> String { HostPort(argument: "\(listen.host):\(port)").map(\.description) ?? "0.0.0.0:\(port)" }

    /// Snapcast's control port when none is given: loopback (of the --listen host's family), as
    /// its protocol has no authentication.
    private var defaultSnapcastControlAddress: String { listen.host.contains(":") ? "[::1]:1705" : "127.0.0.1:1705" }

    /// The MPD protocol server, unless `--mpd off`.
    private func startMPD(house: House) async throws -> MPDServer? {
        try await startFrontEnd("MPD clients", option: "--mpd", value: mpd, defaultAddress: defaultAddress(port: 6600),
                                hint: { "mpc -p \($0) status" }) { address in
            var configuration = MPDServer.Configuration()
            configuration.host = address.host
            configuration.port = address.port
            configuration.maximumConnections = maximumConnections
            configuration.connectionTimeout = .seconds(mpdTimeout)
            configuration.maximumCommandListLength = mpdMaximumCommandList
            for spec in mpdPasswords {
                if let (password, permissions) = MPDPermissions.password(spec) { configuration.passwords[password] = permissions }
            }
            configuration.defaultPermissions = mpdDefaultPermissions.flatMap { MPDPermissions(list: $0) }
            let server = MPDServer(house: house, configuration: configuration)
            return (server, { try await server.start() }, { await server.stop() })
        }
    }

    /// Snapcast's control API, unless `--snapcast-control off`.
    private func startSnapcastControl(house: House) async throws -> SnapcastControlServer? {
        try await startFrontEnd("Snapcast controllers", option: "--snapcast-control", value: snapcastControl, defaultAddress: defaultSnapcastControlAddress,
                                hint: { "JSON-RPC on TCP port \($0)" }) { address in
            var configuration = SnapcastControlServer.Configuration()
            configuration.host = address.host
            configuration.port = address.port
            configuration.maximumConnections = maximumConnections
            let server = SnapcastControlServer(house: house, configuration: configuration)
            return (server, { try await server.start() }, { await server.stop() })
        }
    }

    /// Snapcast's stream port for snapclients, unless `--snapcast off`. Their rooms reach the
    /// house as speakers do, on its wire port (on loopback when it listens on every address).
    private func startSnapcastStream(house: House, housePort: Int, clock: any HostClock) async throws -> SnapcastStreamServer? {
        try await startFrontEnd("snapclients", option: "--snapcast", value: snapcast, defaultAddress: defaultAddress(port: 1704),
                                hint: { "snapclient -h HOST -p \($0)" }) { address in
            let houseHost = Self.isWildcard(listen.host) ? "127.0.0.1" : listen.host
            var configuration = SnapcastStreamServer.Configuration(houseHost: houseHost, housePort: housePort, houseIdentity: house.configuration.identity)
            configuration.sampleRate = 48000
            let server = SnapcastStreamServer(configuration: configuration, clock: clock) { line in
                Terminal.standardError("tutti server: \(line)\n")
            }
            return (server, { try await server.start(host: address.host, port: address.port) }, { await server.stop() })
        }
    }

    /// `NAME=HOST:PORT` of `--airplay-room`.
    static func airPlayRoom(_ spec: String) -> (name: String, address: HostPort)? {
        guard let equals = spec.firstIndex(of: "=") else { return nil }
        let name = String(spec[..<equals])
        guard !name.isEmpty, name.utf8.count <= 63, let address = HostPort(argument: String(spec[spec.index(after: equals)...])), address.port > 0 else { return nil }
        return (name, address)
    }

    /// An AirPlay room's identity as a speaker: derived from the house's, its name and its
    /// receiver, so it is the same across restarts and admitted by being named.
    static func airPlayRoomIdentity(_ spec: (name: String, address: HostPort), house: IdentityKey) -> IdentityKey {
        house.derived(for: "AirPlay room \(spec.name) at \(spec.address)")
    }

    /// The rooms of `--airplay-room`: each a speaker of the house (on its wire port, on
    /// loopback when it listens on every address) whose sound card is an AirPlay receiver.
    private func startAirPlayRooms(_ specs: [(name: String, address: HostPort)], house: House, housePort: Int, clock: any HostClock) throws -> [AirPlayRoom] {
        let houseHost = Self.isWildcard(listen.host) ? "127.0.0.1" : listen.host
        return try specs.map { spec in
            var configuration = AirPlayRoom.Configuration(houseHost: houseHost, housePort: housePort, name: spec.name,
                                                          receiverHost: spec.address.host, receiverPort: spec.address.port)
            configuration.identity = Self.airPlayRoomIdentity(spec, house: house.configuration.identity)
            configuration.houseKey = house.configuration.identity.publicKey
            let room = try AirPlayRoom(configuration: configuration, clock: clock, eventLoop: MultiThreadedEventLoopGroup.singleton.next()) { line in
                Terminal.standardError("tutti server: \(line)\n")
            }
            room.start(group: MultiThreadedEventLoopGroup.singleton)
            Terminal.standardError("tutti server: AirPlay room \(spec.name) plays on the receiver at \(spec.address)\n")
            return room
        }
    }

    /// Whether the house listens on loopback only (it is then neither announced nor looks for
    /// receivers on the network).
    private var listensOnLoopbackOnly: Bool {
        ["127.0.0.1", "::1", "localhost"].contains(listen.host) || listen.host.hasPrefix("127.")
    }

    /// AirPlay receivers found through Avahi, each a room waiting to be admitted, unless
    /// `--find-airplay-rooms off` or the house is on loopback only.
    private func startFindingAirPlayRooms(named: [(name: String, address: HostPort)], house: House, housePort: Int, clock: any HostClock) -> AirPlayRoomFinder? {
        guard findAirPlayRooms == "on", !listensOnLoopbackOnly else { return nil }
        var configuration = AirPlayRoomFinder.Configuration(houseHost: Self.isWildcard(listen.host) ? "127.0.0.1" : listen.host, housePort: housePort,
                                                            houseIdentity: house.configuration.identity)
        configuration.namedAddresses = Set(named.map { "\($0.address)" })
        let finder = AirPlayRoomFinder(configuration: configuration, clock: clock, browse: {
            try ServiceBrowser.browse(serviceType: AirPlayAnnouncement.serviceType).map {
                AirPlayRoomFinder.Receiver(serviceName: $0.name, host: $0.host, port: $0.port, textRecord: $0.textRecord)
            }
        }) { line in Terminal.standardError("tutti server: \(line)\n") }
        finder.start()
        return finder
    }

    /// The groups' AirPlay receivers, unless `--airplay off`: the default group's at the address
    /// given, the others' on the next free ports. Their schedules are on the house's clock,
    /// which the groups' anchors are.
    ///
    /// Senders that pair with a PIN are kept in the state directory's `airplay-pairings.json`;
    /// the PIN a sender asks for is shown in the log.
    private func startAirPlay(house: House, clock: any HostClock, identity: IdentityKey) async throws -> AirPlayGroupReceivers? {
        guard airplay != "off" else { return nil }
        let pairings: AirPlayPairings
        do {
            pairings = try AirPlayPairings(path: (stateDirectory ?? ControllerTokenFile.defaultDirectory()).map { StateFile.path("airplay-pairings.json", in: $0) })
        } catch {
            Terminal.standardError("tutti server: \(error)\n")
            throw ExitCode(2)
        }
        return try await startFrontEnd("AirPlay senders", option: "--airplay", value: airplay, defaultAddress: defaultAddress(port: 5000),
                                hint: { _ in "the default group; the others on the next ports: tutti ctl groups" }) { address in
            let receivers = AirPlayGroupReceivers(house: house, host: address.host, port: address.port, clock: clock,
                                                  onlyPairedSenders: airPlayAccess == "paired", accessory: { group, name in
                AirPlayAccessory.group(group, of: identity, pairings: pairings) { pin, sender in
                    Terminal.standardError("tutti server: AirPlay: \(sender) asks to pair with group \(name): PIN \(pin) (good for 2 minutes, one try)\n")
                }
            }) { line in
                Terminal.standardError("tutti server: \(line)\n")
            }
            return (receivers, { try await receivers.start() }, { await receivers.stop() })
        }
    }

    /// Starts a front end at the address given (`value`) or its default, unless `off`. An address
    /// given and taken stops the house; the default taken (the real MPD or snapserver on this
    /// machine) only leaves the house without it, and says so.
    private func startFrontEnd<Server>(_ what: String, option: String, value: String?, defaultAddress: String, hint: (Int) -> String,
                                       make: (HostPort) -> (Server, () async throws -> Int, () async -> Void)) async throws -> Server? {
        if value == "off" { return nil }
        guard let address = HostPort(argument: value ?? defaultAddress) else {
            throw ValidationError("\(option) \(value ?? ""): use HOST:PORT (\(defaultAddress)) or off")
        }
        let (server, start, stop) = make(address)
        do {
            let port = try await start()
            Terminal.standardOutput("tutti server: \(what) on \(HostPort(argument: "\(address.host):\(port)")!) (\(hint(port)))\n")
            return server
        } catch {
            await stop()
            let reason = (error as? IOError).map { String(cString: strerror($0.errnoCode)).lowercased() } ?? "\(error)"
            guard value == nil else {
                Terminal.standardError("tutti server: cannot serve \(what) on \(address): \(reason)\n")
                throw ExitCode(2)
            }
            Terminal.standardError("tutti server: cannot serve \(what) on \(address): \(reason); running without (choose another address with \(option) HOST:PORT)\n")
            return nil
        }
    }

    /// Announces the house through Avahi unless told not to or it listens on loopback only; a
    /// machine without avahi-daemon gets one line and a house that works with --server.
    private func startAnnouncing(port: Int, httpPort: Int?) -> HouseAnnouncer? {
        guard announce == "on" else { return nil }
        if listensOnLoopbackOnly {
            Terminal.standardError("tutti server: not announced on the network: listening on loopback only\n")
            return nil
        }
        let hostName = ProcessInfo.processInfo.hostName.split(separator: ".").first.map(String.init) ?? "this machine"
        let announcement = HouseAnnouncement(name: name ?? "Tutti on \(hostName)", port: port, httpPort: httpPort,
                                             protocolVersion: Int(WireProtocol.version))
        do {
            let announcer = try HouseAnnouncer(announcing: announcement) { line in Terminal.standardError("tutti server: \(line)\n") }
            try announcer.start()
            return announcer
        } catch {
            Terminal.standardError("tutti server: not announced on the network: \(error)\n")
            return nil
        }
    }

    /// Announces each group's AirPlay receiver beside the house, as groups come and go: named
    /// after its group (the default group after the house), under a device id derived from the
    /// house's identity key and the group's id, so a sender knows it again after a restart. Not
    /// when the receivers listen on loopback only.
    private func announce(_ receivers: AirPlayGroupReceivers, with announcer: HouseAnnouncer, identity: IdentityKey) async {
        if ["127.0.0.1", "::1", "localhost"].contains(receivers.host) || receivers.host.hasPrefix("127.") {
            Terminal.standardError("tutti server: AirPlay receivers not announced: they listen on loopback only\n")
            return
        }
        let houseName = announcer.name
        await receivers.onChange { listening in
            announcer.update(airPlay: listening.map { receiver in
                let group = AirPlayAccessory.groupIdentity(receiver.group, of: identity)
                return AirPlayAnnouncement(deviceID: AirPlayAccessory.deviceID(of: group), name: receiver.isDefault ? houseName : receiver.name,
                                           port: receiver.port, publicKey: group.publicKey.bytes)
            })
        }
    }

    /// `--allow-dir`, made absolute; without it, home, the temporary directory and the
    /// working directory.
    private var allowedDirectories: [String] {
        let cwd = FileManager.default.currentDirectoryPath
        guard allowDirectories.isEmpty else { return allowDirectories.map { $0.hasPrefix("/") ? $0 : cwd + "/" + $0 } }
        let temporary = String(NSTemporaryDirectory().dropLast(NSTemporaryDirectory().hasSuffix("/") && NSTemporaryDirectory().count > 1 ? 1 : 0))
        var directories = [FileManager.default.homeDirectoryForCurrentUser.path, temporary, cwd]
        directories = directories.reduce(into: []) { kept, directory in if !kept.contains(directory) { kept.append(directory) } }
        return directories
    }

    /// The HTTP API, unless `--http off`. An address given and taken stops the house; the
    /// default taken only leaves it without the API.
    private func startHTTP(house: House) async throws -> (server: HouseHTTPServer, port: Int)? {
        if http == "off" { return nil }
        guard let address = HostPort(argument: http ?? defaultAddress(port: 7780)) else {
            throw ValidationError("--http \(http!): use HOST:PORT (0.0.0.0:7780) or off")
        }
        var configuration = HouseHTTPServer.Configuration()
        configuration.host = address.host
        configuration.port = address.port
        configuration.allowedHostNames = httpHosts
        configuration.connectionLimits.maximumTrusted = maximumConnections
        let api = HouseHTTPServer(house: house, configuration: configuration)
        do {
            let port = try await api.start()
            // A browser must name the house by one of its names (`HostAllowList`): 0.0.0.0 is none.
            let wildcard = Self.isWildcard(address.host)
            let shortName = ProcessInfo.processInfo.hostName.split(separator: ".").first.map { "\($0).local" } ?? "localhost"
            let base = HostPort(argument: "\(wildcard ? shortName : address.host):\(port)")!
            Terminal.standardOutput("tutti server: web UI on http://\(base)/, API under /api (events: ws://\(base)/api/events); "
                                    + "sign in with a code from tutti ctl pair-controller, or Authorization: Bearer with the controller token\n")
            return (api, port)
        } catch {
            // NIO's bind error names the syscall; a user wants the reason.
            let reason = (error as? IOError).map { String(cString: strerror($0.errnoCode)).lowercased() } ?? "\(error)"
            guard http == nil else {
                Terminal.standardError("tutti server: cannot serve HTTP on \(address): \(reason)\n")
                throw ExitCode(2)
            }
            Terminal.standardError("tutti server: cannot serve HTTP on \(address): \(reason); running without the HTTP API (choose another address with --http HOST:PORT)\n")
            return nil
        }
    }
}

