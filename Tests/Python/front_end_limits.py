"""Drives the limits of the house's line-protocol front ends over raw sockets, for
Tests/TuttiHouseMPDTests/FrontEndLimitsTests.swift, against a `tutti server` started with
`--max-connections 3 --mpd-timeout 2 --mpd-max-command-list 100`.

    python3 front_end_limits.py MPD_PORT SNAPCAST_PORT

Prints one JSON object per step. Every wait is on the server's answer or its closing the
connection, with a timeout as a guard only.
"""
import json
import socket
import sys
import time

mpd_port, snapcast_port = int(sys.argv[1]), int(sys.argv[2])


def report(step, **fields):
    print(json.dumps({"step": step, **fields}), flush=True)


def connect(port, greeting=True):
    connection = socket.create_connection(("127.0.0.1", port), timeout=15)
    reader = connection.makefile("rb")
    first = reader.readline().decode() if greeting else None
    return connection, reader, first


def connect_admitted(port):
    """An MPD connection past the cap's refusals: a client that just left is counted until the
    server has seen it go (retried, guarded)."""
    deadline = time.monotonic() + 10
    while True:
        connection, reader, first = connect(port)
        if first.startswith("OK MPD"):
            return connection, reader, first
        connection.close()
        if time.monotonic() > deadline:
            raise SystemExit("not admitted within 10 s: " + first)


def command(connection, reader, line):
    """Sends one MPD command and returns its reply's lines up to OK or ACK ('' if closed)."""
    connection.sendall((line + "\n").encode())
    reply = []
    while True:
        text = reader.readline().decode()
        if text == "":
            reply.append("")
            return reply
        text = text.rstrip("\n")
        reply.append(text)
        if text == "OK" or text.startswith("ACK "):
            return reply


# 1. The connection cap: three served, a fourth refused with a line saying why, then served
#    again once one has gone.
held = [connect(mpd_port) for _ in range(3)]
fourth, fourth_reader, fourth_first = connect(mpd_port)
fourth_rest = fourth_reader.readline().decode()
report("cap", greetings=[h[2] for h in held], fourth=fourth_first, fourth_then=fourth_rest)
held.pop()[0].close()
candidate, candidate_reader, _ = connect_admitted(mpd_port)
report("cap-freed", reply=command(candidate, candidate_reader, "ping"))
candidate.close()
for connection, _, _ in held:
    connection.close()

# 2. A command list over the cap is refused whole; the connection goes on.
connection, reader, _ = connect_admitted(mpd_port)
connection.sendall(("command_list_begin\n" + "ping\n" * 101 + "command_list_end\n").encode())
refusal = reader.readline().decode().rstrip("\n")
after = command(connection, reader, "ping")
within = command(connection, reader, "command_list_begin\n" + "ping\n" * 99 + "command_list_end")
report("command-list", refusal=refusal, after=after, within=within)
connection.close()

# 3. The idle timeout: a silent client is closed after --mpd-timeout; one in idle is not.
idle, idle_reader, _ = connect_admitted(mpd_port)
idle.sendall(b"idle\n")
silent, silent_reader, _ = connect_admitted(mpd_port)
start = time.monotonic()
closed = silent_reader.readline()
silent_for = time.monotonic() - start
still = command(idle, idle_reader, "noidle")
report("timeout", silent_closed=closed == b"", silent_for=silent_for, idle_after=still,
       idle_waited=time.monotonic() - start)
idle.close()
silent.close()

# 4. A client that sends without reading the replies is closed when its unread commands pass
#    the bound; another client is answered meanwhile.
flood, _, _ = connect_admitted(mpd_port)
flood.settimeout(30)
chunk = b"status\n" * 10000
sent = 0
outcome = "not closed"
other, other_reader, _ = connect_admitted(mpd_port)
answered_in = None
try:
    while sent < 200 << 20:
        flood.sendall(chunk)
        sent += len(chunk)
        # Asked while the flood is still being read (its bound is 4 MB of unread commands).
        if answered_in is None and sent > 1 << 20:
            asked = time.monotonic()
            reply = command(other, other_reader, "ping")
            answered_in = time.monotonic() - asked if reply == ["OK"] else -1
except (BrokenPipeError, ConnectionResetError) as error:
    outcome = type(error).__name__
except socket.timeout:
    outcome = "send timed out"
report("flood", outcome=outcome, sent_mb=sent / (1 << 20), other_answered_in=answered_in)
flood.close()
other.close()

# 5. Snapcast control: a batch over its cap is refused whole; a fourth controller is refused.
controller, controller_reader, _ = connect(snapcast_port, greeting=False)
batch = [{"jsonrpc": "2.0", "id": n, "method": "Server.GetRPCVersion"} for n in range(1001)]
controller.sendall((json.dumps(batch) + "\r\n").encode())
big = json.loads(controller_reader.readline())
controller.sendall((json.dumps(batch[:3]) + "\r\n").encode())
small = json.loads(controller_reader.readline())
controllers = [connect(snapcast_port, greeting=False) for _ in range(2)]
extra, extra_reader, _ = connect(snapcast_port, greeting=False)
refused = extra_reader.readline().decode()
closed_after = extra_reader.readline() == b""
report("snapcast", big_batch=big, small_batch_ids=[reply.get("id") for reply in small], refused=refused, refused_closed=closed_after)
