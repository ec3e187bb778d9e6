import CAvahi

/// Looks for services of one type on the network through the Avahi daemon (over D-Bus):
/// browses, and resolves each service found to an address, port and TXT record.
///
/// Synchronous, on the calling thread, with its own Avahi poll loop: the speaker and `ctl` ask
/// once before they connect, and the house asks for AirPlay receivers from a thread of its own,
/// so nothing here runs beside an event loop.
public enum ServiceBrowser {
    /// The services of `serviceType` announced now, by name. Returns once Avahi says it has
    /// reported everything it knows and each has been resolved, or at `timeoutSeconds`, with
    /// what it has by then. Throws when no Avahi daemon is reachable.
    public static func browse(serviceType: String, timeoutSeconds: Double = 2) throws(DiscoveryError) -> [DiscoveredService] {
        guard let poll = avahi_simple_poll_new() else { throw DiscoveryError("cannot create an Avahi poll loop") }
        defer { avahi_simple_poll_free(poll) }
        let state = BrowseState()
        let context = Unmanaged.passUnretained(state).toOpaque()
        var error: Int32 = 0
        guard let client = avahi_client_new(avahi_simple_poll_get(poll), AvahiClientFlags(rawValue: 0), nil, nil, &error) else {
            throw DiscoveryError("cannot look for \(serviceType) services: avahi-daemon is not reachable (\(String(cString: avahi_strerror(error))))")
        }
        defer { avahi_client_free(client) }  // frees the browser and any resolver still open
        state.client = client
        guard avahi_service_browser_new(client, Int32(AVAHI_IF_UNSPEC), Int32(AVAHI_PROTO_UNSPEC), serviceType, nil,
                                        AvahiLookupFlags(rawValue: 0), browseCallback, context) != nil else {
            throw DiscoveryError("cannot browse \(serviceType) through Avahi: \(String(cString: avahi_strerror(avahi_client_errno(client))))")
        }
        let deadline = ContinuousClock.now + .milliseconds(Int(timeoutSeconds * 1000))
        while !(state.reportedAll && state.pendingResolvers == 0), state.failure == nil {
            let remaining = ContinuousClock.now.duration(to: deadline)
            guard remaining > .zero else { break }
            // Wakes for any event; the sleep bound only lets the deadline be noticed.
            let milliseconds = remaining.components.seconds * 1000 + remaining.components.attoseconds / 1_000_000_000_000_000
            if avahi_simple_poll_iterate(poll, Int32(min(milliseconds, 100))) != 0 { break }
        }
        if let failure = state.failure { throw DiscoveryError(failure) }
        return state.services.sorted { $0.name < $1.name }
    }

    /// What the callbacks collect; touched only on the browsing thread, inside `iterate`.
    private final class BrowseState {
        var client: OpaquePointer?
        var services: [DiscoveredService] = []
        var pendingResolvers = 0
        var reportedAll = false
        var failure: String?

        func add(_ service: DiscoveredService) {
            if let index = services.firstIndex(where: { $0.name == service.name }) {
                // The same service on IPv4 and IPv6, or on two interfaces: keep IPv4.
                if services[index].host.contains(":") && !service.host.contains(":") { services[index] = service }
            } else {
                services.append(service)
            }
        }
    }

    private static let browseCallback: AvahiServiceBrowserCallback = { _, interface, proto, event, name, type, domain, _, context in
        let state = Unmanaged<BrowseState>.fromOpaque(context!).takeUnretainedValue()
        switch event {
        case AVAHI_BROWSER_NEW:
            guard let client = state.client else { return }
            if avahi_service_resolver_new(client, interface, proto, name, type, domain, Int32(AVAHI_PROTO_UNSPEC),
                                          AvahiLookupFlags(rawValue: 0), resolveCallback, context) != nil {
                state.pendingResolvers += 1
            }
        case AVAHI_BROWSER_ALL_FOR_NOW:
            state.reportedAll = true
        case AVAHI_BROWSER_FAILURE:
            state.failure = "browsing through Avahi failed: \(String(cString: avahi_strerror(avahi_client_errno(state.client))))"
        default:
            break  // REMOVE, CACHE_EXHAUSTED: nothing to do for a one-shot look
        }
    }

    private static let resolveCallback: AvahiServiceResolverCallback = { resolver, _, _, event, name, _, _, _, address, port, txt, flags, context in
        let state = Unmanaged<BrowseState>.fromOpaque(context!).takeUnretainedValue()
        defer {
            avahi_service_resolver_free(resolver)
            state.pendingResolvers -= 1
        }
        guard event == AVAHI_RESOLVER_FOUND, let name, var address = address?.pointee else { return }
        var text = [CChar](repeating: 0, count: Int(AVAHI_ADDRESS_STR_MAX))
        avahi_address_snprint(&text, text.count, &address)
        var entries: [String] = []
        var item = txt
        while let entry = item {
            let bytes = UnsafeRawBufferPointer(start: avahi_string_list_get_text(entry), count: avahi_string_list_get_size(entry))
            entries.append(String(decoding: bytes, as: UTF8.self))
            item = avahi_string_list_get_next(entry)
        }
        state.add(DiscoveredService(name: String(cString: name), host: String(decoding: text.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self),
                                    port: Int(port), textRecord: entries, isLocal: flags.rawValue & AVAHI_LOOKUP_RESULT_LOCAL.rawValue != 0))
    }
}
