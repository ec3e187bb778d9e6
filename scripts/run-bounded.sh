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
  exit "$status"
fi

echo
echo "run-bounded: '$label' still running after ${deadline} s; stopping it."
# Swift Testing prints "◇ Test NAME started." and, when it ends, "✔ Test NAME passed…",
# "✘ Test NAME failed…" or "➜ Test NAME skipped…". Names may contain spaces (display names).
python3 - "$log" <<'EOF'
import re, sys
started, ended = [], set()
for line in open(sys.argv[1], encoding="utf-8", errors="replace"):
    m = re.search(r"◇ Test (.+?) started\.", line)
    if m:
        started.append(m.group(1))
        continue
    m = re.search(r"[✔✘➜] Test (.+?) (passed|failed|skipped|recorded)", line)
    if m:
        ended.add(m.group(1))
running = [name for name in started if name not in ended]
print(f"run-bounded: {len(started)} tests started, {len(running)} never finished:")
for name in running:
    print(f"  still running: {name}")
EOF

if command -v gdb >/dev/null; then
  for pid in $(pgrep -f '\.xctest' || true); do
    echo "run-bounded: threads of test process $pid:"
    timeout 60 gdb -p "$pid" -batch -nx -ex "set pagination off" -ex "thread apply all bt 25" 2>/dev/null \
      | grep -E '^(Thread|#)' | head -600
  done
fi

kill -TERM -- "-$leader" 2>/dev/null
sleep 2
kill -KILL -- "-$leader" 2>/dev/null
exit 124
