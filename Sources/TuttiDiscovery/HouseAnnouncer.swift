import CAvahi
import Glibc

/// Announces a house on the network through the Avahi daemon (over D-Bus): `_tutti._tcp` on its
/// port, with protocol and HTTP port in TXT, `_http._tcp` for its web UI, and `_raop._tcp` for
/// each group's AirPlay receiver (`update(airPlay:)` as groups come and go).
///
/// Avahi runs its own thread (`AvahiThreadedPoll`); every callback runs there, and `start` and
/// `stop` take its lock, so this object's state is only ever touched under that lock. The house
/// keeps running without it: with no daemon it waits for one (Avahi's `NO_FAIL` client), and a
/// daemon that restarts is reconnected to and announced to again. A name already taken on the
/// network becomes Avahi's alternative ("Tutti #2").
public final class HouseAnnouncer: @unchecked Sendable {
    private let poll: OpaquePointer
    private var client: OpaquePointer?
    private var group: OpaquePointer?
    private var announcement: HouseAnnouncement
    private let log: @Sendable (String) -> Void
    private var saidWaiting = false
    private var started = false
    private var retry: OpaquePointer?

    /// `log` gets one line per event (announced, renamed, waiting for the daemon), on Avahi's thread.
    public init(announcing announcement: HouseAnnouncement, log: @escaping @Sendable (String) -> Void) throws(DiscoveryError) {
        guard let poll = avahi_threaded_poll_new() else { throw DiscoveryError("cannot create Avahi's poll thread") }
        self.poll = poll
        self.announcement = announcement
        self.log = log
    }

    deinit {
        stop()
        avahi_threaded_poll_free(poll)
    }

    /// The name announced, which Avahi may have changed after a collision.
    public var name: String {
        avahi_threaded_poll_lock(poll)
        defer { avahi_threaded_poll_unlock(poll) }
        return announcement.name
    }

    /// Connects to the daemon (or waits for it) and announces. Call once; not from Avahi's thread.
    public func start() throws(DiscoveryError) {
        avahi_threaded_poll_lock(poll)
        connect()
        avahi_threaded_poll_unlock(poll)
        guard avahi_threaded_poll_start(poll) >= 0 else { throw DiscoveryError("cannot start Avahi's poll thread") }
        started = true
    }

    /// Announces these AirPlay receivers in place of those announced before (the house's own
    /// services stay). Any thread but Avahi's.
    public func update(airPlay: [AirPlayAnnouncement]) {
        avahi_threaded_poll_lock(poll)
        defer { avahi_threaded_poll_unlock(poll) }
        guard airPlay != announcement.airPlay else { return }
        announcement.airPlay = airPlay
        // Published again whole: an entry group is committed once. Without a client yet, the
        // connection publishes what is here when it comes.
        if let group { avahi_entry_group_reset(group) }
        publish()
    }

    /// Withdraws the announcement and stops Avahi's thread. Not from Avahi's thread.
    public func stop() {
        if started {
            avahi_threaded_poll_stop(poll)
            started = false
        }
        if let client { avahi_client_free(client) }  // and its entry group: the services go away
        if let retry { avahi_threaded_poll_get(poll)!.pointee.timeout_free(retry) }
        retry = nil
        client = nil
        group = nil
    }

    private var context: UnsafeMutableRawPointer { Unmanaged.passUnretained(self).toOpaque() }

    /// Under the poll lock or on Avahi's thread.
    private func connect() {
        var error: Int32 = 0
        // The callback can run inside avahi_client_new, before it returns; it stores the client.
        let made = avahi_client_new(avahi_threaded_poll_get(poll), AVAHI_CLIENT_NO_FAIL, Self.clientCallback, context, &error)
        client = made
        guard made == nil else { return }
        // NO_FAIL waits for the daemon, but not for a D-Bus system bus that is not there yet:
        // try again every few seconds, as a machine still booting brings both up.
        if !saidWaiting {
            log("avahi-daemon is not reachable (\(String(cString: avahi_strerror(error)))); announcing the house once it is (until then rooms need --server)")
            saidWaiting = true
        }
        let api = avahi_threaded_poll_get(poll)!
        var when = timeval()
        gettimeofday(&when, nil)
        when.tv_sec += 5
        if let retry {
            api.pointee.timeout_update(retry, &when)
        } else {
            retry = api.pointee.timeout_new(api, &when, Self.retryCallback, context)
        }
    }

    private static let retryCallback: AvahiTimeoutCallback = { _, context in
        let announcer = Unmanaged<HouseAnnouncer>.fromOpaque(context!).takeUnretainedValue()
        if announcer.client == nil { announcer.connect() }
    }

    private static let clientCallback: AvahiClientCallback = { client, state, context in
        let announcer = Unmanaged<HouseAnnouncer>.fromOpaque(context!).takeUnretainedValue()
        announcer.client = client
        switch state {
        case AVAHI_CLIENT_S_RUNNING:
            announcer.saidWaiting = false
            announcer.publish()
        case AVAHI_CLIENT_S_COLLISION, AVAHI_CLIENT_S_REGISTERING:
            // The host name changes; services are announced again once it is running.
            if let group = announcer.group { avahi_entry_group_reset(group) }
        case AVAHI_CLIENT_CONNECTING:
            if !announcer.saidWaiting {
                announcer.log("avahi-daemon is not running; announcing the house once it is (until then rooms need --server)")
                announcer.saidWaiting = true
            }
        case AVAHI_CLIENT_FAILURE:
            let error = avahi_client_errno(client)
            announcer.group = nil
            if error == Int32(AVAHI_ERR_DISCONNECTED) {
                // The daemon went away: start over, waiting for it to come back.
                avahi_client_free(client)
                announcer.client = nil
                announcer.log("avahi-daemon went away; announcing again when it returns")
                announcer.connect()
            } else {
                announcer.log("Avahi failed: \(String(cString: avahi_strerror(error))); the house is no longer announced")
            }
        default:
            break
        }
    }

    private static let groupCallback: AvahiEntryGroupCallback = { group, state, context in
        let announcer = Unmanaged<HouseAnnouncer>.fromOpaque(context!).takeUnretainedValue()
        switch state {
        case AVAHI_ENTRY_GROUP_ESTABLISHED:
            let a = announcer.announcement
            announcer.log("announced on the network as '\(a.name)' (\(HouseAnnouncement.serviceType) port \(a.port)"
                          + (a.httpPort.map { ", \(HouseAnnouncement.webServiceType) port \($0)" } ?? "")
                          + a.airPlay.map { ", AirPlay '\($0.name)' port \($0.port)" }.joined() + ")")
        case AVAHI_ENTRY_GROUP_COLLISION:
            announcer.rename()
            if let group { avahi_entry_group_reset(group) }
            announcer.publish()
        case AVAHI_ENTRY_GROUP_FAILURE:
            announcer.log("announcing the house failed: \(String(cString: avahi_strerror(avahi_client_errno(avahi_entry_group_get_client(group)))))")
        default:
            break
        }
    }

    /// Avahi's next name for a taken one: "Tutti" → "Tutti #2".
    private func rename() {
        let old = announcement.name
        guard let alternative = avahi_alternative_service_name(old) else { return }
        announcement.name = String(cString: alternative)
        avahi_free(alternative)
        log("the name '\(old)' is taken on this network; announcing as '\(announcement.name)'")
    }

    /// Adds both services to the entry group and commits it. On Avahi's thread or under its lock.
    private func publish() {
        guard let client else { return }
        if group == nil { group = avahi_entry_group_new(client, Self.groupCallback, context) }
        guard let group else {
            log("cannot announce the house: \(String(cString: avahi_strerror(avahi_client_errno(client))))")
            return
        }
        guard avahi_entry_group_is_empty(group) != 0 else { return }
        for attempt in 0..<10 {
            let error = add(to: group)
            if error == 0 {
                let committed = avahi_entry_group_commit(group)
                if committed < 0 { log("cannot announce the house: \(String(cString: avahi_strerror(committed)))") }
                return
            }
            avahi_entry_group_reset(group)
            guard error == Int32(AVAHI_ERR_COLLISION), attempt < 9 else {
                log("cannot announce the house: \(String(cString: avahi_strerror(error)))")
                return
            }
            rename()
        }
    }

    private func add(to group: OpaquePointer) -> Int32 {
        var txt: UnsafeMutablePointer<AvahiStringList>?
        for entry in announcement.textRecord { txt = avahi_string_list_add(txt, entry) }
        defer { avahi_string_list_free(txt) }
        let noFlags = AvahiPublishFlags(rawValue: 0)
        var error = avahi_entry_group_add_service_strlst(group, Int32(AVAHI_IF_UNSPEC), Int32(AVAHI_PROTO_UNSPEC), noFlags, announcement.name,
                                                         HouseAnnouncement.serviceType, nil, nil, UInt16(announcement.port), txt)
        if error == 0, let httpPort = announcement.httpPort {
            error = avahi_entry_group_add_service_strlst(group, Int32(AVAHI_IF_UNSPEC), Int32(AVAHI_PROTO_UNSPEC), noFlags, announcement.name,
                                                         HouseAnnouncement.webServiceType, nil, nil, UInt16(httpPort), nil)
        }
        for receiver in announcement.airPlay where error == 0 {
            var raop: UnsafeMutablePointer<AvahiStringList>?
            for entry in receiver.textRecord { raop = avahi_string_list_add(raop, entry) }
            defer { avahi_string_list_free(raop) }
            error = avahi_entry_group_add_service_strlst(group, Int32(AVAHI_IF_UNSPEC), Int32(AVAHI_PROTO_UNSPEC), noFlags, receiver.serviceName,
                                                         AirPlayAnnouncement.serviceType, nil, nil, UInt16(receiver.port), raop)
            guard error == 0 else { break }
            var airPlay2: UnsafeMutablePointer<AvahiStringList>?
            for entry in receiver.airPlay2TextRecord { airPlay2 = avahi_string_list_add(airPlay2, entry) }
            defer { avahi_string_list_free(airPlay2) }
            error = avahi_entry_group_add_service_strlst(group, Int32(AVAHI_IF_UNSPEC), Int32(AVAHI_PROTO_UNSPEC), noFlags, receiver.name,
                                                         AirPlayAnnouncement.airPlay2ServiceType, nil, nil, UInt16(receiver.port), airPlay2)
        }
        return error
    }
}
