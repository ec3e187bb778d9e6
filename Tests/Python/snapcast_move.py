"""Home Assistant's Snapcast library (PyPI `snapcast`) moves a room between two playing groups
of a Tutti house, as the integration's "source" select does: the room's group is put on the
other group's stream (Group.SetStream), which moves the room into that group.

Usage: snapcast_move.py PORT ROOM STREAM_NAME

Prints one JSON line per step with its CLOCK_MONOTONIC time: "connected" (the groups it sees),
"moved" (just before the call), "grouped" (when an update shows the room in the stream's
group) and "heard" (2.5 s later, while both groups still play). Exits 1 with a "failed" line on
anything unexpected.
"""
import asyncio
import json
import sys
import time

import snapcast.control


def report(step, **fields):
    print(json.dumps({"step": step, "mono_ns": time.monotonic_ns(), **fields}), flush=True)


async def main(port, room, stream_name):
    loop = asyncio.get_running_loop()
    server = await snapcast.control.create_server(loop, "127.0.0.1", port)
    changed = asyncio.Event()
    server.set_on_update_callback(changed.set)

    def groups():
        return {g.name: sorted(server.client(c).friendly_name for c in g.clients) for g in server.groups}

    def group_of(name):
        return next(g for g in server.groups if any(server.client(c).friendly_name == name for c in g.clients))

    report("connected", groups=groups(), streams=sorted(s.friendly_name for s in server.streams))
    stream = next(s for s in server.streams if s.friendly_name == stream_name)
    report("moved", stream=stream.identifier)
    await group_of(room).set_stream(stream.identifier)
    deadline = loop.time() + 10
    # The house's stream of a group is named after it: the room is moved once that group lists it.
    while room not in groups().get(stream_name, []):
        changed.clear()
        try:
            await asyncio.wait_for(changed.wait(), timeout=max(deadline - loop.time(), 0.001))
        except asyncio.TimeoutError:
            report("failed", reason=f"no update shows {room} on {stream_name}: {groups()}")
            sys.exit(1)
    report("grouped", groups=groups())
    await asyncio.sleep(2.5)  # what the test measures: the room in its new group, both playing
    report("heard")
    server.stop()


asyncio.run(main(int(sys.argv[1]), sys.argv[2], sys.argv[3]))
