import TuttiProtocol

extension RoomReport {
    /// Whether the room plays by its clock: it reports a clock bound (its estimate rests on
    /// enough history to play by) and no problem (a bound past the limit where a room says
    /// its clock is uncertain would be one). What tests wait for before they play; the sound
    /// the rooms emit is what they then check. Not a threshold on the bound, which is at least
    /// half the path's round trip: under a millisecond on loopback, over it behind a relay
    /// that models a home network.
    public var hasSettledClock: Bool {
        clockErrorMicroseconds != nil && problem == nil
    }
}
