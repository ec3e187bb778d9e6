import TuttiCore

/// Where audio goes, as written on the command line.
///
/// - `alsa:<pcm>` (or `alsa` for "default"): real playback.
/// - `wav:<path>`: offline render to a WAV file, as fast as possible.
/// - `virtual:<path>`: a simulated, clock-paced sound card writing what it emitted to a WAV
///   file plus `<path>.timing.jsonl`.
/// - `null`: paced like `virtual`, writes nothing.
public enum DeviceSpec: Sendable, Equatable, CustomStringConvertible {
    case alsa(String)
    case wav(String)
    case virtual(String)
    case null

    public init(parsing text: String) throws(DeviceError) {
        let (kind, argument): (Substring, Substring?) = {
            guard let colon = text.firstIndex(of: ":") else { return (Substring(text), nil) }
            return (text[..<colon], text[text.index(after: colon)...])
        }()
        switch (kind, argument) {
        case ("alsa", nil): self = .alsa("default")
        case ("alsa", let name?) where !name.isEmpty: self = .alsa(String(name))
        case ("wav", let path?) where !path.isEmpty: self = .wav(String(path))
        case ("virtual", let path?) where !path.isEmpty: self = .virtual(String(path))
        case ("null", nil): self = .null
        default:
            throw DeviceError(device: text, reason: "unknown output; use alsa:<pcm>, wav:<path>, virtual:<path> or null")
        }
    }

    public var description: String {
        switch self {
        case .alsa(let name): "alsa:\(name)"
        case .wav(let path): "wav:\(path)"
        case .virtual(let path): "virtual:\(path)"
        case .null: "null"
        }
    }

    /// ALSA "default" when the machine has a sound card; otherwise a virtual card writing
    /// `tutti-virtual.wav` in the current directory, so playback works on headless machines.
    public static func machineDefault() -> (spec: DeviceSpec, notice: String?) {
        if ALSADevice.soundCardPresent { return (.alsa("default"), nil) }
        return (.virtual("tutti-virtual.wav"), "no sound card found; playing to virtual:tutti-virtual.wav (use --output to choose)")
    }

    /// Options that shape a device beyond its spec.
    public struct Options: Sendable {
        public var periodFrames: Int = 480
        public var bufferPeriods: Int = 4
        public var driftPPM: Double = 0
        /// Paces virtual devices and timestamps every device's position; `MonotonicClock` in
        /// production, a simulated clock in tests.
        public var clock: any SleepingClock
        public var reportingClock: SkewedClock? = nil
        public init(clock: any SleepingClock) { self.clock = clock }
    }

    public func makeDevice(format: AudioFormat, options: Options) throws(DeviceError) -> any OutputDevice {
        switch self {
        case .alsa(let name):
            // It reports in the clock the player reads (a simulated skew included), like `virtual:`.
            return try ALSADevice(clock: options.reportingClock ?? options.clock, pcmName: name, format: format, periodFrames: options.periodFrames, bufferPeriods: options.bufferPeriods)
        case .wav(let path):
            return WAVFileDevice(clock: options.clock, path: path, format: format)
        case .virtual(let path):
            return VirtualDevice(clock: options.clock, capturePath: path, format: format, periodFrames: options.periodFrames, bufferPeriods: options.bufferPeriods,
                                 driftPPM: options.driftPPM, reportingClock: options.reportingClock)
        case .null:
            return VirtualDevice(clock: options.clock, capturePath: nil, format: format, periodFrames: options.periodFrames, bufferPeriods: options.bufferPeriods,
                                 driftPPM: options.driftPPM, reportingClock: options.reportingClock)
        }
    }
}
