"""Sends MPD command lines, one per line of stdin, over one raw connection (a TCP port on
127.0.0.1, or a Unix socket's path), and prints each command's whole reply, up to and
including its OK or ACK line, as one JSON line: {"command": ..., "reply": [lines]}.

usage: mpd_raw.py ADDRESS < commands
"""
import json
import socket
import sys

address = sys.argv[1]
if address.isdigit():
    connection = socket.create_connection(("127.0.0.1", int(address)), timeout=10)
else:
    connection = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    connection.settimeout(10)
    connection.connect(address)
lines = connection.makefile("r", encoding="utf-8", newline="\n")
greeting = lines.readline()
if not greeting.startswith("OK MPD "):
    raise SystemExit(f"not an MPD server: {greeting!r}")
for command in sys.stdin.read().splitlines():
    connection.sendall((command + "\n").encode())
    reply = []
    while True:
        line = lines.readline().rstrip("\n")
        reply.append(line)
        if line == "OK" or line.startswith("ACK ") or line == "":
            break
    print(json.dumps({"command": command, "reply": reply}), flush=True)
