#!/usr/bin/env bash
# Runs a command beside a private D-Bus system bus and Avahi daemon, in a network namespace of
# its own, so that discovery tests announce and browse for real without reaching (or being
# reached by) the machine's network or its own avahi-daemon:
#
#   scripts/avahi-sandbox.sh COMMAND [ARGS...]
#
# Inside: loopback, and one veth interface (10.77.0.1/24) that Avahi serves; a
# dbus-daemon on a socket in a temporary directory (DBUS_SYSTEM_BUS_ADDRESS points the command's
# processes there); avahi-daemon, with its runtime directory on a private tmpfs (a mount
# namespace) so that it never meets the machine's. TUTTI_AVAHI_SANDBOX=1 tells the tests they run
# inside. Needs root (CI runs as root) or unprivileged user namespaces. Both daemons stop with the
# command; its exit status is the script's.
set -euo pipefail

if [ "${1:-}" != "--inside" ]; then
  [ $# -ge 1 ] || { echo "usage: $0 COMMAND [ARGS...]" >&2; exit 2; }
  for tool in dbus-daemon avahi-daemon unshare ip; do
    command -v "$tool" >/dev/null || { echo "avahi-sandbox: $tool is not installed (make deps installs it)" >&2; exit 2; }
  done
  userns=()
  [ "$(id -u)" = 0 ] || userns=(--user --map-root-user)
  exec unshare "${userns[@]}" --net --mount --fork -- "$0" --inside "$@"
fi
shift

dir=$(mktemp -d /tmp/tutti-avahi.XXXXXX)
cleanup() {
  [ -n "${avahi_pid:-}" ] && kill "$avahi_pid" 2>/dev/null || true
  [ -n "${dbus_pid:-}" ] && kill "$dbus_pid" 2>/dev/null || true
  wait 2>/dev/null || true
  rm -rf "$dir"
}
trap cleanup EXIT

# Private mounts: nothing here leaks back to the machine.
mount --make-rprivate /
mkdir -p /run/avahi-daemon
mount -t tmpfs tmpfs /run/avahi-daemon

ip link set lo up
# A veth pair is the LAN (a dummy interface would do, but not every kernel has the module).
ip link add tutti0 type veth peer name tutti1
ip addr add 10.77.0.1/24 dev tutti0
ip link set tutti1 up
ip link set tutti0 up

cat > "$dir/bus.conf" <<CONF
<!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-BUS Bus Configuration 1.0//EN"
 "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
<busconfig>
  <type>system</type>
  <listen>unix:path=$dir/system_bus_socket</listen>
  <auth>EXTERNAL</auth>
  <policy context="default">
    <allow user="*"/>
    <allow own="*"/>
    <allow send_type="method_call"/>
    <allow send_destination="*"/>
    <allow receive_sender="*"/>
  </policy>
</busconfig>
CONF
dbus-daemon --config-file="$dir/bus.conf" --nofork --nopidfile >"$dir/dbus.log" 2>&1 &
dbus_pid=$!
export DBUS_SYSTEM_BUS_ADDRESS="unix:path=$dir/system_bus_socket"
for _ in $(seq 100); do [ -S "$dir/system_bus_socket" ] && break; sleep 0.05; done
[ -S "$dir/system_bus_socket" ] || { echo "avahi-sandbox: dbus-daemon did not start:" >&2; cat "$dir/dbus.log" >&2; exit 1; }

cat > "$dir/avahi.conf" <<CONF
[server]
host-name=tutti-sandbox
use-ipv4=yes
use-ipv6=no
allow-interfaces=tutti0
enable-dbus=yes
ratelimit-interval-usec=0
[wide-area]
enable-wide-area=no
[publish]
publish-hinfo=no
publish-workstation=no
CONF
start_avahi() {
  : > "$dir/avahi.log"
  avahi-daemon --file="$dir/avahi.conf" --no-drop-root --no-chroot --no-rlimits --no-proc-title >"$dir/avahi.log" 2>&1 &
  avahi_pid=$!
  # Ready once it owns its bus name and has announced its host name.
  for _ in $(seq 200); do
    grep -q 'Server startup complete' "$dir/avahi.log" && return 0
    kill -0 "$avahi_pid" 2>/dev/null || break
    sleep 0.05
  done
  echo "avahi-sandbox: avahi-daemon did not start:" >&2; cat "$dir/avahi.log" >&2
  return 1
}
start_avahi || exit 1

# SIGUSR1 (to TUTTI_AVAHI_SANDBOX_PID) restarts the daemon, as an upgrade or a crash would:
# tests check that a house announces itself again.
restart_avahi() {
  kill "$avahi_pid" 2>/dev/null; wait "$avahi_pid" 2>/dev/null
  start_avahi || echo "avahi-sandbox: restart failed" >&2
}
trap restart_avahi USR1

export TUTTI_AVAHI_SANDBOX=1 TUTTI_AVAHI_SANDBOX_PID=$$
set +e
"$@" &
command_pid=$!
# `wait` returns early for each trapped signal; wait again until the command itself ends.
while true; do
  wait "$command_pid"
  status=$?
  kill -0 "$command_pid" 2>/dev/null || break
done
set -e
exit $status
