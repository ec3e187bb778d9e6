import TuttiFuzzHarness

// libFuzzer's entry point (built with --sanitize=fuzzer, docs/FUZZING.md). In a normal build
// this is an executable that does nothing: it is compiled so that harness drift breaks the build.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzTestOneInput(_ start: UnsafePointer<UInt8>?, _ count: Int) -> CInt {
    FuzzHarness.runOrCrash(FuzzHarness.airPlay2, start, count)
}
