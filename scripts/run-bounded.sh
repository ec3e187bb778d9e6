#!/usr/bin/env bash
# Runs a test command with a deadline, so a test that waits forever fails the run instead of
# hanging it.
#
#   scripts/run-bounded.sh SECONDS LABEL -- COMMAND [ARGS...]
#
# The command's output is shown as it comes and kept in out/test-logs/LABEL.log. If the command
# is still running after SECONDS, this prints the Swift Testing tests that started and never
# finished, the stacks of every thread of each test process still alive (gdb, when installed),
# stops the command's whole process group, and exits 124. Otherwise it exits with the command's
# status.
set -uo pipefail

deadline=${1:?seconds}
label=${2:?label}
shift 2
[ "${1:-}" = "--" ] && shift

mkdir -p out/test-logs
log="out/test-logs/$label.log"
: > "$log"

# A process group of its own, so the whole tree (swift test, the xctest runner, the child
# processes tests start) can be stopped together.
# stdbuf: line-buffered output from the test process too (its stdio is a pipe here, which
# would otherwise hold back the last lines, and with them which tests were still running).
setsid stdbuf -oL -eL "$@" > >(tee -a "$log") 2>&1 &
leader=$!

finished=0
for ((waited = 0; waited < deadline; waited++)); do
  if ! kill -0 "$leader" 2>/dev/null; then finished=1; break; fi
  sleep 1
done

if [ "$finished" = 1 ]; then
  wait "$leader"
  status=$?
  # tee may still be flushing the last lines.
  sleep 0.2
  if [ "$status" != 0 ]; then
    # A test process killed by a signal prints nothing itself: say so, and which tests it was in.
    if [ "$status" -gt 128 ]; then
      echo "run-bounded: '$label' was killed by signal $((status - 128)) ($(kill -l $((status - 128)) 2>/dev/null))."
    else
      echo "run-bounded: '$label' exited with status $status."
    fi
    grep -a -E "◇ Test .* started\." "$log" | sed 's/\x1b\[[0-9;]*m//g' | tail -3 | sed 's/^/run-bounded: last started: /'
  fi
  exit "$status"
fi

echo
echo "run-bounded: '$label' still running after ${deadline} s; stopping it."
# Swift Testing prints "◇ Test NAME started." and, when it ends, "✔ Test NAME passed…",
# "✘ Test NAME failed…", "➜ Test NAME skipped…", "━ Test NAME passed … with a known issue" or
# "… was cancelled". A parameterized test ends as "Test NAME with N test cases passed"; its
# "Test case passing …" lines have no end line. "recorded an issue" is not an end: a test that
# failed an expectation may still be the one that hangs. Names are not unique across suites,
# so they are counted, and colour codes (on when TERM is set) are stripped first.
python3 - "$log" <<'PYTHON'
import re, sys
from collections import Counter
colour = re.compile(r"\x1b\[[0-9;]*m")
started, ended = Counter(), Counter()
order = []
for raw in open(sys.argv[1], encoding="utf-8", errors="replace"):
    line = colour.sub("", raw)
    if "Test case passing" in line or "Test run " in line:
        continue
    m = re.search(r"◇ Test (.+?) started\.", line)
    if m:
        started[m.group(1)] += 1
        order.append(m.group(1))
        continue
    m = re.search(r"[✔✘➜━] Test (.+?)(?: with \d+ test cases?)? (passed|failed|skipped|was cancelled)", line)
    if m:
        ended[m.group(1)] += 1
running = []
for name in dict.fromkeys(order):
    running += [name] * max(0, started[name] - ended[name])
print(f"run-bounded: {sum(started.values())} tests started, {len(running)} never finished:")
for name in running:
    print(f"  still running: {name}")
PYTHON

# The test runner is in a process group of its own (SwiftPM spawns it so), but in this session.
if command -v gdb >/dev/null; then
  for pid in $(pgrep -s "$leader" -f '\.xctest' || true); do
    echo "run-bounded: threads of test process $pid:"
    timeout 60 gdb -p "$pid" -batch -nx -ex "set pagination off" -ex "thread apply all bt 25" 2>/dev/null \
      | grep -E '^(Thread|#)' | head -600
  done
fi

# Everything in the session: swift test, the test runner, the child processes tests started.
pkill -TERM -s "$leader" 2>/dev/null
sleep 2
pkill -KILL -s "$leader" 2>/dev/null
exit 124
