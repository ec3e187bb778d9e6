#!/usr/bin/env bash
# Builds and runs the libFuzzer targets (docs/FUZZING.md).
#
#   scripts/fuzz.sh build                   build every target, instrumented (fuzzer + ASan)
#   scripts/fuzz.sh smoke [TARGET...]       replay the fail cases, then fuzz each target for
#                                           FUZZ_SMOKE_SECONDS (default 25) from its seeds, two
#                                           targets at a time; fails on any crash
#   scripts/fuzz.sh long TARGET             FUZZ_RUNS runs (default 10 000 000), corpus kept in
#                                           out/fuzz/TARGET/corpus; log out/fuzz/TARGET/long.log
#   scripts/fuzz.sh run TARGET [ARGS...]    the target's binary with the usual flags and ARGS
#                                           (a crash file to reproduce, -runs=N, …)
#   scripts/fuzz.sh merge TARGET            minimize the committed seeds plus out/fuzz/TARGET/corpus
#                                           back into Fuzz/Corpus/TARGET (review before committing)
#   scripts/fuzz.sh seeds                   regenerate every Fuzz/Corpus with the real encoders
#
# TARGET is a name like fuzz-wire or wire. FUZZ_CONFIG=debug|release picks the build
# (default release); FUZZ_SCRATCH the scratch path (default .build-fuzz), never the normal
# .build, whose flags differ. Crash inputs are written to out/fuzz/TARGET/; a crash
# found is a product bug: fix it and copy the input to Fuzz/FailCases/TARGET/.
set -euo pipefail
cd "$(dirname "$0")/.."

ALL_TARGETS=(fuzz-wire fuzz-clocksync fuzz-control fuzz-streamparser fuzz-chunkdecoder fuzz-hls fuzz-lines fuzz-mpd fuzz-icy fuzz-secure fuzz-snapcast fuzz-jsonrpc fuzz-httpbody fuzz-rtsp fuzz-raop fuzz-airplay2)
CONFIG=${FUZZ_CONFIG:-release}
SCRATCH=${FUZZ_SCRATCH:-.build-fuzz}
SMOKE_SECONDS=${FUZZ_SMOKE_SECONDS:-25}
RUNS=${FUZZ_RUNS:-10000000}
# libFuzzer reports crashes itself; Swift's backtracer would also catch the signal and can hold
# the target's output pipe open after it died.
export SWIFT_BACKTRACE=enable=no
# SwiftPM passes one -sanitize= per sanitizer, in an order that can change whenever it rewrites
# its build manifest, and the Swift driver hands the compiler only the last one: a module would
# get ASan without coverage, or coverage without ASan. The combined flag, passed after SwiftPM's,
# gives every Swift module both. (--sanitize=fuzzer is still needed: it makes SwiftPM compile
# with -parse-as-library and link libFuzzer's main.) lld: gold warns about an ASan symbol on
# every link.
BUILD=(swift build -c "$CONFIG" --scratch-path "$SCRATCH" --sanitize=fuzzer --sanitize=address -Xswiftc -sanitize=fuzzer,address -Xswiftc -use-ld=lld)

target_name() { case "$1" in fuzz-*) echo "$1" ;; *) echo "fuzz-$1" ;; esac; }

# Inputs larger than the largest seed only slow the search down; media heads need the most.
max_len() {
  case "$1" in
    fuzz-clocksync) echo 64 ;;
    fuzz-control | fuzz-jsonrpc | fuzz-httpbody) echo 2048 ;;
    fuzz-lines | fuzz-mpd | fuzz-icy | fuzz-secure) echo 1024 ;;
    fuzz-streamparser | fuzz-chunkdecoder | fuzz-raop) echo 8192 ;;
    *) echo 4096 ;;
  esac
}

binary() { echo "$SCRATCH/$CONFIG/$1"; }

# Leak detection stays on: memory that hostile input makes a decoder lose is a bug too. A
# timeout of 10 s per input catches hangs (the slowest seed runs in milliseconds); 2 GB of RSS
# is an allocation bomb.
flags() {
  local t=$1
  echo -timeout=10 -rss_limit_mb=2048 -max_len="$(max_len "$t")" \
       -dict=Fuzz/Dicts/"$t".dict -artifact_prefix=out/fuzz/"$t"/ -print_final_stats=1
}

build() {
  for t in "${ALL_TARGETS[@]}"; do
    "${BUILD[@]}" --product "$t"
  done
}

# Replays the committed fail cases, then fuzzes from the seeds for SMOKE_SECONDS. The first
# corpus directory receives new inputs: a fresh one, so the committed seeds stay as they are.
smoke_one() {
  local t bin log work status
  t=$(target_name "$1")
  bin=$(binary "$t")
  mkdir -p out/fuzz/"$t"
  log=out/fuzz/"$t"/smoke.log
  mapfile -t cases < <(find Fuzz/FailCases/"$t" -type f ! -name '.*' 2>/dev/null | sort)
  if [ "${#cases[@]}" -gt 0 ]; then
    # shellcheck disable=SC2046
    if ! "$bin" $(flags "$t") -runs=1 "${cases[@]}" > out/fuzz/"$t"/failcases.log 2>&1; then
      tail -40 out/fuzz/"$t"/failcases.log
      echo "fuzz: $t: a fail case crashes again (out/fuzz/$t/failcases.log)"
      return 1
    fi
  fi
  work=$(mktemp -d)
  status=0
  # shellcheck disable=SC2046
  "$bin" $(flags "$t") -max_total_time="$SMOKE_SECONDS" "$work" Fuzz/Corpus/"$t" > "$log" 2>&1 || status=$?
  rm -rf "$work"
  local runs speed counters
  # A target built without coverage still runs, and finds nothing.
  counters=$(grep -a -m1 -oE '[0-9]+ inline 8-bit counters' "$log" | awk '{print $1}' || true)
  if [ "${counters:-0}" -lt 10000 ]; then
    echo "fuzz: $t: only ${counters:-no} coverage counters: the build is not instrumented (scripts/fuzz.sh, BUILD)"
    return 1
  fi
  runs=$(grep -a 'stat::number_of_executed_units' "$log" | awk '{print $2}' || true)
  speed=$(grep -a 'stat::average_exec_per_sec' "$log" | awk '{print $2}' || true)
  if [ "$status" != 0 ]; then
    grep -a -A30 -E '==ERROR|Fatal error|deadly signal|SUMMARY' "$log" | head -60 || tail -40 "$log"
    echo "fuzz: $t: FAILED (status $status) after ${runs:-?} runs; input in out/fuzz/$t/ (crash-*, timeout-*, oom-*), log $log"
    return 1
  fi
  echo "fuzz: $t: ${runs:-?} runs in ${SMOKE_SECONDS} s (${speed:-?}/s), ${#cases[@]} fail cases replayed, no crash"
}

long_one() {
  local t bin
  t=$(target_name "$1")
  bin=$(binary "$t")
  mkdir -p out/fuzz/"$t"/corpus
  # shellcheck disable=SC2046
  "$bin" $(flags "$t") -runs="$RUNS" out/fuzz/"$t"/corpus Fuzz/Corpus/"$t" > out/fuzz/"$t"/long.log 2>&1 && status=0 || status=$?
  tail -3 out/fuzz/"$t"/long.log | sed "s|^|$t: |"
  grep -a -E 'stat::(number_of_executed_units|average_exec_per_sec)' out/fuzz/"$t"/long.log | sed "s|^|$t: |" || true
  [ "$status" = 0 ] || echo "fuzz: $t: FAILED (status $status); see out/fuzz/$t/long.log and out/fuzz/$t/"
  return "$status"
}

command=${1:-}
shift || true
case "$command" in
  build) build ;;
  smoke)
    targets=("$@")
    [ "${#targets[@]}" -gt 0 ] || targets=("${ALL_TARGETS[@]}")
    export -f smoke_one target_name binary flags max_len
    export CONFIG SCRATCH SMOKE_SECONDS
    start=$(date +%s)
    # Two at a time: one per core. xargs exits non-zero when any target failed.
    status=0
    printf '%s\n' "${targets[@]}" | xargs -P2 -I{} bash -c 'smoke_one "$@"' _ {} || status=1
    echo "fuzz: smoke pass of ${#targets[@]} targets $( [ $status = 0 ] && echo passed || echo FAILED ) in $(( $(date +%s) - start )) s"
    exit $status
    ;;
  long) long_one "${1:?target}" ;;
  run)
    t=$(target_name "${1:?target}")
    shift
    mkdir -p out/fuzz/"$t"
    # shellcheck disable=SC2046
    exec "$(binary "$t")" $(flags "$t") "$@"
    ;;
  merge)
    t=$(target_name "${1:?target}")
    next=Fuzz/Corpus/"$t".merged
    rm -rf "$next" && mkdir -p "$next" out/fuzz/"$t"/corpus
    # shellcheck disable=SC2046
    "$(binary "$t")" $(flags "$t") -merge=1 "$next" Fuzz/Corpus/"$t" out/fuzz/"$t"/corpus
    rm -rf Fuzz/Corpus/"$t" && mv "$next" Fuzz/Corpus/"$t"
    echo "fuzz: Fuzz/Corpus/$t now holds $(find Fuzz/Corpus/"$t" -type f | wc -l) inputs"
    ;;
  seeds)
    TUTTI_FUZZ_WRITE_SEEDS=1 swift test --scratch-path "${SWIFT_SCRATCH:-.build}" --filter FuzzSeedWriter
    ;;
  *)
    sed -n '2,21p' "$0"
    exit 2
    ;;
esac
