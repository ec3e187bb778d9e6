/// A block of interleaved Float32 PCM with the timeline time of its first frame.
///
/// Used between non-real-time stages (decoder, resampler, player). Real-time code reads
/// from an `AudioRing` instead and never touches these.
public struct PCMBuffer: Sendable {
    public var format: AudioFormat
    public var samples: [Float]
    public var presentationTime: MediaTime

    public init(format: AudioFormat, samples: [Float] = [], presentationTime: MediaTime = .zero) {
        precondition(format.sampleFormat == .float32 && format.isInterleaved, "PCMBuffer holds interleaved Float32")
        precondition(samples.count % format.channelCount == 0, "sample count must be a whole number of frames")
        self.format = format
        self.samples = samples
        self.presentationTime = presentationTime
    }

    public var frameCount: Int { samples.count / format.channelCount }
    public var duration: MediaTime { format.duration(ofFrames: Int64(frameCount)) }
    public var isEmpty: Bool { samples.isEmpty }
}
