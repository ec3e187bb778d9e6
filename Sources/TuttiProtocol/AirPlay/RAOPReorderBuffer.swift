/// Puts a sender's audio packets back in order, asks once for each one missing, and gives up
/// on one that has not come while `patience` packets arrived after it (its frames are then
/// silence, at their place). UDP reorders and drops; the sender keeps what it sent for a
/// while and resends it when asked (`RAOPPacket.resendRequest`).
///
/// It lives beside the packets rather than in the receiver so the fuzz harness reaches it.
/// Sequence numbers wrap at 2^16; a packet more than half the space behind the next one
/// expected is old (a late duplicate) and dropped. Not thread-safe: one session's loop owns it.
public struct RAOPReorderBuffer: Sendable {
    /// What to do after a packet arrives.
    public struct Output {
        /// Packets now in order, each once; `nil` payload for one given up on.
        public var released: [(sequence: UInt16, packet: RAOPAudioPacket?)] = []
        /// Ranges to ask the sender for again (first sequence number, count).
        public var resend: [(sequence: UInt16, count: UInt16)] = []
    }

    /// Packets that may arrive after a missing one before it is given up on: 64 are 0.5 s of
    /// audio at 352 frames a packet, longer than a resend takes on a home network.
    public let patience: Int
    private var next: UInt16?
    private var held: [UInt16: RAOPAudioPacket] = [:]
    /// Missing sequence numbers already asked for.
    private var requested: Set<UInt16> = []
    public private(set) var duplicates = 0
    public private(set) var givenUp = 0
    public private(set) var resendsAsked = 0
    /// Packets dropped for being far ahead of the order, and jumps taken.
    public private(set) var farAhead = 0
    public private(set) var jumps = 0

    /// A packet further ahead than this is not a gap to fill: `patience` would give up on every
    /// packet before it anyway, and asking for them all would ask the sender for up to 32 767
    /// packets. It is held aside; `jumpRun` of them in a row, each the one after the last, are
    /// a sender that moved its numbers on, and the order starts again from the first of them. A
    /// single forged number (a stranger's datagram with the sender's address) changes nothing.
    public var maximumAhead: Int { 4 * patience }
    public static let jumpRun = 8
    private var pendingJump: [RAOPAudioPacket] = []

    public init(patience: Int = 64) {
        self.patience = patience
    }

    /// Forgets everything held (a flush): the order starts again at `next` (a flush's
    /// `RTP-Info: seq=`; packets before it are void), or at the next packet.
    public mutating func reset(next: UInt16? = nil) {
        self.next = next
        held.removeAll()
        requested.removeAll()
        pendingJump.removeAll()
    }

    public mutating func receive(_ packet: RAOPAudioPacket) -> Output {
        var output = Output()
        guard let expected = next else {
            next = packet.sequence &+ 1
            output.released.append((packet.sequence, packet))
            return output
        }
        let ahead = Int(packet.sequence &- expected)
        if ahead > maximumAhead && ahead < 32768 {
            farAhead += 1
            if let last = pendingJump.last, packet.sequence == last.sequence &+ 1 {
                pendingJump.append(packet)
            } else {
                pendingJump = [packet]
            }
            guard pendingJump.count >= Self.jumpRun else { return output }
            // The sender moved on: what was held comes out in order, what was missing is given
            // up on, and the order starts at the run.
            jumps += 1
            for offset in 0..<Int(UInt16(truncatingIfNeeded: maximumAhead)) where !held.isEmpty {
                let sequence = expected &+ UInt16(offset)
                let packet = held.removeValue(forKey: sequence)
                if packet == nil { givenUp += 1 }
                output.released.append((sequence, packet))
            }
            held.removeAll()
            requested.removeAll()
            let run = pendingJump
            pendingJump.removeAll()
            next = run[0].sequence &+ UInt16(run.count)
            for packet in run { output.released.append((packet.sequence, packet)) }
            return output
        }
        if ahead >= 32768 || held[packet.sequence] != nil {
            // Behind what was released, or held already: a duplicate, or a resend that came late.
            duplicates += 1
            return output
        }
        pendingJump.removeAll()
        held[packet.sequence] = packet
        requested.remove(packet.sequence)
        if ahead > 0 {
            // Ask for what is missing before it, once per number.
            var first: UInt16?
            var count: UInt16 = 0
            for offset in 0..<ahead {
                let sequence = expected &+ UInt16(offset)
                // A range does not wrap: senders look up `first + i` without wrapping it (pyatv).
                if sequence == 0, let start = first {
                    output.resend.append((start, count))
                    first = nil
                    count = 0
                }
                if held[sequence] == nil && !requested.contains(sequence) {
                    requested.insert(sequence)
                    if first == nil { first = sequence }
                    count += 1
                } else if let start = first {
                    output.resend.append((start, count))
                    first = nil
                    count = 0
                }
            }
            if let start = first { output.resend.append((start, count)) }
            resendsAsked += output.resend.reduce(0) { $0 + Int($1.count) }
        }
        release(into: &output)
        return output
    }

    private mutating func release(into output: inout Output) {
        while var expected = next {
            if let packet = held.removeValue(forKey: expected) {
                output.released.append((expected, packet))
            } else if held.count >= patience {
                // Waited long enough: its frames are silence.
                requested.remove(expected)
                givenUp += 1
                output.released.append((expected, nil))
            } else {
                return
            }
            expected &+= 1
            next = expected
        }
    }
}
