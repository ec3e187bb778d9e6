// Tests read device output with the same independent WAV parser the diagnostics use.
@_exported import TuttiDiagnostics
