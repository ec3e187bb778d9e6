// The playlist parser lives in TuttiMedia, which has no network dependencies, so that its fuzz
// target (Fuzz/, docs/FUZZING.md) builds without AsyncHTTPClient and BoringSSL. Re-exported
// here so that code importing only TuttiMediaHTTP sees the same HLS API as before.
@_exported import enum TuttiMedia.HLSPlaylist
@_exported import struct TuttiMedia.HLSVariant
@_exported import struct TuttiMedia.HLSMasterPlaylist
@_exported import struct TuttiMedia.HLSResource
@_exported import struct TuttiMedia.HLSSegment
@_exported import struct TuttiMedia.HLSMediaPlaylist
