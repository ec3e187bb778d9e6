"""Home Assistant's Snapcast library (PyPI `snapcast`) as a controller of a Tutti house.

Usage: snapcast_controller.py PORT

Connects as Home Assistant's integration does, then prints one JSON line per step: what it
sees, each command it sends, and the update it is pushed when another controller changes a
room (the test sets room b's volume to 70 through the house's own control port after the
"waiting" line). Then it mutes the house's default group and unmutes it, and moves the
snapclient `snap1` out of the group and back, each step with its CLOCK_MONOTONIC time so the
test finds its effect on the rooms' cards. Exits 1 with a "failed" line on anything unexpected.

Clients and groups are named as the house names its rooms and groups; their ids are the
house's ids, which the script looks up by name, as a user picks them by name.
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

    def client(name):
        return next(c for c in server.clients if c.friendly_name == name)

    def group(name):
        return next(g for g in server.groups if g.name == name)

    def groups():
        return {g.name: sorted(server.client(c).friendly_name for c in g.clients) for g in server.groups}

    report("connected", version=server.version,
           clients=sorted(c.friendly_name for c in server.clients),
           groups=groups(),
           streams=sorted(s.friendly_name for s in server.streams))

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

    a = client("a")
    await a.set_volume(40)
    await a.set_latency(25)
    # Notifications of the first change may arrive after the second was sent: wait for both.
    await until(lambda: client("a").volume == 40 and client("a").latency == 25, "a is at 40 with 25 ms")
    report("set", room="a", volume=client("a").volume, latency=client("a").latency)

    # Room b out of the house's default group (Group.SetClients), then back.
    await group("default").remove_client(client("b").identifier)
    await until(lambda: "b" in groups(), "b is in a group of its own")
    report("removed", groups=groups())
    await group("default").add_client(client("b").identifier)
    await until(lambda: "b" not in groups(), "b's own group, empty, is no longer shown")
    report("added", groups=groups())

    # Another controller turns b to 70: the house pushes Server.OnUpdate.
    report("waiting")
    await until(lambda: client("b").volume == 70, "b is at 70")
    report("updated", b=client("b").volume)

    # Tutti's rooms and the snapclient alike: the whole group muted, then unmuted.
    members = [server.client(c).friendly_name for c in group("default").clients]
    before = {name: client(name).volume for name in members}
    await group("default").set_muted(True)
    # The library marks the group muted at once; the rooms' volumes come with the house's update.
    await until(lambda: all(client(name).volume == 0 for name in before), "every room of the group is at 0")
    report("muted", mono_ns=time.monotonic_ns(), volumes={name: client(name).volume for name in members})
    await asyncio.sleep(2)  # what the rooms play meanwhile is what the test measures
    await group("default").set_muted(False)
    await until(lambda: all(client(name).volume == v for name, v in before.items()), "every room is back at its volume")
    report("unmuted", mono_ns=time.monotonic_ns(), volumes={name: client(name).volume for name in members})
    await asyncio.sleep(2)

    # The snapclient moved out of the house's group (into a group of its own), then back.
    await group("default").remove_client(client("snap1").identifier)
    await until(lambda: "snap1" in groups(), "snap1 is in a group of its own")
    report("moved", mono_ns=time.monotonic_ns(), groups=groups())
    await asyncio.sleep(2)
    await group("default").add_client(client("snap1").identifier)
    await until(lambda: "snap1" not in groups(), "snap1 is back")
    report("back", mono_ns=time.monotonic_ns(), groups=groups())
    await asyncio.sleep(2)
    server.stop()


asyncio.run(main(int(sys.argv[1])))
