/// One format's incremental parser, behind `AudioStreamParser` once the format is known.
protocol StreamFormatParser: AnyObject {
    /// Consumes all of `bytes` (buffering what cannot be parsed yet) and appends events.
    func push(_ bytes: UnsafeRawBufferPointer, into events: inout [ParsedEvent]) throws(MediaError)
    /// End of input: emits what was held back; throws when the stream ends before its header
    /// was complete.
    func finish(into events: inout [ParsedEvent]) throws(MediaError)
    /// Bytes skipped as not part of any packet (garbage, trailing tags, a cut final frame).
    var discardedByteCount: Int { get }
}

/// The `input` of errors from stream parsing.
let streamInputName = "audio stream"

func streamError(_ kind: MediaError.Kind, _ reason: String) -> MediaError {
    MediaError(kind, input: streamInputName, reason: reason)
}
