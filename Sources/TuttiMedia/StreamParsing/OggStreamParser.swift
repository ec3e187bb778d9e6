import CLibOgg

/// Ogg: pages and packets from libogg (`ogg_sync_*` checks each page's CRC, `ogg_stream_*`
/// joins packets that span pages). The first Opus or Vorbis logical stream is parsed; other
/// multiplexed streams (skeleton, video) are skipped. A chained stream (a new beginning-of-stream
/// page after the end of the current one) starts over with a new `.format` event.
///
/// Timestamps come from granule positions: the first audio page's granule minus the durations
/// of the packets that end on it gives the first packet's timestamp (libavformat's method), and
/// durations carry it from packet to packet.
final class OggStreamParser: StreamFormatParser {
    private let sync: UnsafeMutablePointer<ogg_sync_state>
    private let stream: UnsafeMutablePointer<ogg_stream_state>
    private let page: UnsafeMutablePointer<ogg_page>
    private let packet: UnsafeMutablePointer<ogg_packet>
    private var streamOpen = false
    private var serial: Int32 = 0
    private var codec: OggCodecState?
    private var described = false
    private var sawEndOfStream = false
    private var pagesSeen = 0
    private var offset: Int64 = 0
    private var timestamp: Int64?
    /// Audio packets of pages before the first granule position: waiting for their timestamps.
    private var waiting: [(bytes: [UInt8], duration: Int?)] = []
    private var unsupported: String?
    private(set) var discardedByteCount = 0

    init() {
        sync = .allocate(capacity: 1)
        stream = .allocate(capacity: 1)
        page = .allocate(capacity: 1)
        packet = .allocate(capacity: 1)
        ogg_sync_init(sync)
    }

    deinit {
        if streamOpen { ogg_stream_clear(stream) }
        ogg_sync_clear(sync)
        sync.deallocate()
        stream.deallocate()
        page.deallocate()
        packet.deallocate()
    }

    func push(_ bytes: UnsafeRawBufferPointer, into events: inout [ParsedEvent]) throws(MediaError) {
        guard !bytes.isEmpty else { return }
        guard let buffer = ogg_sync_buffer(sync, bytes.count) else { throw streamError(.unsupported, "out of memory") }
        UnsafeMutableRawPointer(buffer).copyMemory(from: bytes.baseAddress!, byteCount: bytes.count)
        ogg_sync_wrote(sync, bytes.count)
        while true {
            let available = Int(sync.pointee.fill - sync.pointee.returned)
            let start = sync.pointee.data + Int(sync.pointee.returned)
            let startsWithCapture = available >= 4 && start[0] == 0x4F && start[1] == 0x67 && start[2] == 0x67 && start[3] == 0x53
            let result = ogg_sync_pageseek(sync, page)
            if result == 0 { return }
            if result < 0 {
                // libogg skipped bytes: a page whose CRC does not match, or bytes that are no page.
                let at = offset
                offset += Int64(-result)
                discardedByteCount += -result
                if startsWithCapture {
                    throw streamError(.corrupt, "Ogg page checksum mismatch (page at byte \(at))")
                }
                throw streamError(.corrupt, "Ogg stream lost sync at byte \(at) (bytes between pages are not an Ogg page)")
            }
            offset += Int64(result)
            pagesSeen += 1
            try handlePage(into: &events)
        }
    }

    private func handlePage(into events: inout [ParsedEvent]) throws(MediaError) {
        let pageSerial = ogg_page_serialno(page)
        if ogg_page_bos(page) != 0 {
            if streamOpen && !sawEndOfStream { return }  // another multiplexed stream: not ours
            // A BOS page's body starts with the codec's identification packet.
            let body = [UInt8](UnsafeRawBufferPointer(start: page.pointee.body, count: page.pointee.body_len))
            guard let found = OggCodecState.identify(body) else {
                if unsupported == nil { unsupported = OggCodecState.unsupportedName(body) }
                return
            }
            if streamOpen { ogg_stream_clear(stream) }
            ogg_stream_init(stream, pageSerial)
            streamOpen = true
            serial = pageSerial
            codec = OggCodecState(codec: found)
            described = false
            sawEndOfStream = false
            timestamp = nil
            waiting.removeAll()
        }
        guard streamOpen, pageSerial == serial, !sawEndOfStream, let codec else { return }
        guard ogg_stream_pagein(stream, page) == 0 else { throw streamError(.corrupt, "Ogg page does not belong to its stream (libogg rejected it)") }
        var pagePackets: [(bytes: [UInt8], duration: Int?)] = []
        while true {
            let result = ogg_stream_packetout(stream, packet)
            if result == 0 { break }
            if result < 0 { throw streamError(.corrupt, "Ogg stream has a gap (page missing before page at byte \(offset - Int64(page.pointee.header_len + page.pointee.body_len)))") }
            let bytes = [UInt8](UnsafeRawBufferPointer(start: packet.pointee.packet, count: packet.pointee.bytes))
            if !codec.isComplete {
                if let description = try codec.addHeader(bytes) {
                    described = true
                    events.append(.format(description))
                }
                continue
            }
            pagePackets.append((bytes, codec.duration(of: bytes)))
        }
        let isLast = ogg_page_eos(page) != 0
        if isLast { sawEndOfStream = true }
        guard !pagePackets.isEmpty || (isLast && !waiting.isEmpty) else { return }
        if timestamp == nil {
            waiting += pagePackets
            pagePackets = []
            let granule = ogg_page_granulepos(page)
            let total = waiting.reduce(Int64(0)) { $0 + Int64($1.duration ?? 0) }
            if granule >= 0 && !isLast {
                timestamp = granule - total
            } else if isLast {
                // The stream's only audio page: its granule is cut to the end, so start at 0.
                timestamp = 0
            } else {
                return
            }
            pagePackets = waiting
            waiting = []
        }
        for (bytes, duration) in pagePackets {
            events.append(.packet(StreamPacket(bytes: bytes, frameCount: duration, timestamp: timestamp)))
            if let duration, let t = timestamp { timestamp = t + Int64(duration) }
        }
    }

    func finish(into events: inout [ParsedEvent]) throws(MediaError) {
        // Bytes of an incomplete last page, and packets waiting for a page that never came.
        discardedByteCount += Int(sync.pointee.fill - sync.pointee.returned)
        if !waiting.isEmpty {
            if timestamp == nil { timestamp = 0 }
            for (bytes, duration) in waiting {
                events.append(.packet(StreamPacket(bytes: bytes, frameCount: duration, timestamp: timestamp)))
                if let duration, let t = timestamp { timestamp = t + Int64(duration) }
            }
            waiting = []
        }
        guard let codec else {
            if let unsupported { throw streamError(.unsupported, "Ogg stream carries \(unsupported), not Opus or Vorbis") }
            if pagesSeen == 0 { throw streamError(.truncated, "Ogg stream ends before its first complete page") }
            throw streamError(.notAudio, "Ogg stream has no Opus or Vorbis stream")
        }
        if !described {
            throw streamError(.truncated, "Ogg stream ends before its \(codec.codec == .opus ? "Opus" : "Vorbis") headers were complete")
        }
    }
}
