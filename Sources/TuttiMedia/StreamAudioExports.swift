// The stream's codec, the chunk decoder, the drift resampler and `MediaError` live below this
// module, in TuttiStreamAudio, so that a room links them without FFmpeg; whoever imports
// TuttiMedia sees them as before.
@_exported import TuttiStreamAudio
