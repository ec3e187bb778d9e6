"""Home Assistant's Snapcast library (PyPI `snapcast`) as a controller of a Tutti house.

Usage: snapcast_controller.py PORT

Connects as Home Assistant's integration does, then prints one JSON line per step: what it
sees, each command it sends, and the update it is pushed when another controller changes a
room (the test sets room b's volume to 70 through the house's own control port after the
"waiting" line). Then it mutes the house's group and unmutes it, and moves the snapclient
`snap1` out of the group and back, each step with its CLOCK_MONOTONIC time so the test finds
its effect on the rooms' cards. Exits 1 with a "failed" line on anything unexpected.
"""
import asyncio
import json
import sys
import time

import snapcast.control


def report(step, **fields):
    print(json.dumps({"step": step, **fields}), flush=True)


async def main(port):
    loop = asyncio.get_running_loop()
    server = await snapcast.control.create_server(loop, "127.0.0.1", port)
    report("connected", version=server.version,
           clients=sorted(c.identifier for c in server.clients),
           groups={g.identifier: sorted(g.clients) for g in server.groups},
           streams=sorted(s.identifier for s in server.streams))

    # The house pushes Server.OnUpdate after each change; a condition is waited for on them.
    changed = asyncio.Event()
    server.set_on_update_callback(changed.set)

    async def until(condition, what):
        try:
            while not condition():
                changed.clear()
                await asyncio.wait_for(changed.wait(), timeout=10)
        except asyncio.TimeoutError:
            report("failed", reason=f"no update where {what}")
            sys.exit(1)

    a = server.client("a")
    await a.set_volume(40)
    await a.set_latency(25)
    # Notifications of the first change may arrive after the second was sent: wait for both.
    await until(lambda: server.client("a").volume == 40 and server.client("a").latency == 25, "a is at 40 with 25 ms")
    report("set", room="a", volume=server.client("a").volume, latency=server.client("a").latency)

    # Room b out of the house's group (Group.SetClients), then back.
    await server.group("tutti").remove_client("b")
    report("removed", groups={g.identifier: sorted(g.clients) for g in server.groups})
    await server.group("tutti").add_client("b")
    report("added", groups={g.identifier: sorted(g.clients) for g in server.groups})

    # Another controller turns b to 70: the house pushes Server.OnUpdate.
    report("waiting")
    await until(lambda: server.client("b").volume == 70, "b is at 70")
    report("updated", b=server.client("b").volume)

    # Tutti's rooms and the snapclient alike: the whole group muted, then unmuted.
    group = server.group("tutti")
    before = {c: server.client(c).volume for c in group.clients}
    await group.set_muted(True)
    # The library marks the group muted at once; the rooms' volumes come with the house's update.
    await until(lambda: all(server.client(c).volume == 0 for c in before), "every room of the group is at 0")
    report("muted", mono_ns=time.monotonic_ns(), volumes={c: server.client(c).volume for c in server.group("tutti").clients})
    await asyncio.sleep(2)  # what the rooms play meanwhile is what the test measures
    await server.group("tutti").set_muted(False)
    await until(lambda: all(server.client(c).volume == v for c, v in before.items()), "every room is back at its volume")
    report("unmuted", mono_ns=time.monotonic_ns(), volumes={c: server.client(c).volume for c in server.group("tutti").clients})
    await asyncio.sleep(2)

    # The snapclient moved out of the house's group (into a group of its own), then back.
    await server.group("tutti").remove_client("snap1")
    report("moved", mono_ns=time.monotonic_ns(), groups={g.identifier: sorted(g.clients) for g in server.groups})
    await asyncio.sleep(2)
    await server.group("tutti").add_client("snap1")
    report("back", mono_ns=time.monotonic_ns(), groups={g.identifier: sorted(g.clients) for g in server.groups})
    await asyncio.sleep(2)
    server.stop()


asyncio.run(main(int(sys.argv[1])))
