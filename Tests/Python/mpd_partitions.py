"""MPD's partitions (MPD 0.22+) driven through python-mpd2, the same flow against the house
(its groups) or a real MPD 0.23 (with null outputs named a and b), for MPDServerTests and
MultiRoomGroupsTests to hold both to the same answers:

- before anything plays, an idle client woken by `newpartition`, and a partition refused
  removal while it has an output;
- the default partition plays SONG1 in a and b;
- `newpartition radio`; a second connection enters it, moves b in and plays SONG2;
- the radio's `setvol`, `pause` and resume (the default's status does not change);
- b moved back into the default partition while both play;
- MPD's refusals (a name taken, the default partition, a partition with clients, an unknown
  partition or output), and `listpartitions` at the end: default and radio.

It prints one JSON object per step with the CLOCK_MONOTONIC time it was done, for the test to
find each effect in the rooms' audio.

usage: mpd_partitions.py ADDRESS SONG1 SONG2 [--update]
ADDRESS: a TCP port on 127.0.0.1, or a Unix socket's path. --update: update the database first
(a real MPD's), and wait for it.
"""
import json
import sys
import threading
import time

from mpd import CommandError, MPDClient

address, song1, song2 = sys.argv[1], sys.argv[2], sys.argv[3]
update = "--update" in sys.argv[4:]


def step(name, **values):
    print(json.dumps({"step": name, "mono_ns": time.monotonic_ns(), **values}), flush=True)


def client():
    c = MPDClient()
    c.timeout = 10
    if address.isdigit():
        c.connect("127.0.0.1", int(address))
    else:
        c.connect(address)
    return c


def refusal(call, *arguments):
    """MPD's ACK for a call that must be refused, as python-mpd2 gives it."""
    try:
        call(*arguments)
    except CommandError as error:
        return str(error)
    return None


def enabled(outputs):
    return sorted(o["outputname"] for o in outputs if o["outputenabled"] == "1" and o.get("plugin") != "dummy")


mpd = client()
if update:
    mpd.update()
    deadline = time.monotonic() + 30
    while "updating_db" in mpd.status() or not mpd.listall(song2):
        if time.monotonic() > deadline:
            raise SystemExit("the database update never ended")
        time.sleep(0.05)
deadline = time.monotonic() + 30
while enabled(mpd.outputs()) != ["a", "b"]:
    if time.monotonic() > deadline:
        raise SystemExit(f"outputs a and b never showed: {mpd.outputs()}")
    time.sleep(0.1)

# Before anything plays: an idle client is woken by a new partition, and a partition with an
# output cannot go; once its output is back, it can.
# The waiter is connected (and answered) first: a change after that is one its idle hears,
# whether its idle is sent before the change or after it.
woken = {}
waiter = client()
waiter.ping()
def wait_idle():
    woken["subsystems"] = waiter.idle("partition")
    waiter.disconnect()
idler = threading.Thread(target=wait_idle)
idler.start()
mpd.newpartition("study")
idler.join(10)
step("woken", subsystems=woken.get("subsystems"))
mpd.partition("study")
mpd.moveoutput("a")
mpd.partition("default")
outputs_refusal = refusal(mpd.delpartition, "study")
mpd.moveoutput("a")
mpd.delpartition("study")

mpd.clear()
mpd.add(song1)
mpd.play()
step("album", partition=mpd.status().get("partition"))
time.sleep(2)

mpd.newpartition("radio")
step("created", taken=refusal(mpd.newpartition, "radio"), partitions=[p["partition"] for p in mpd.listpartitions()])
radio = client()
radio.partition("radio")
radio.moveoutput("b")
radio.clear()
radio.add(song2)
radio.play()
step("radio", radio_status=radio.status(), default_status=mpd.status(),
     radio_enabled=enabled(radio.outputs()), default_enabled=enabled(mpd.outputs()))
time.sleep(2.5)

default_volume = mpd.status().get("volume")
radio.setvol(50)
step("setvol", radio=radio.status().get("volume"), default=mpd.status().get("volume"), default_before=default_volume)
time.sleep(1.5)
radio.pause(1)
step("radio-paused", radio=radio.status()["state"], default=mpd.status()["state"])
time.sleep(1.5)
radio.pause(0)
step("radio-resumed", radio=radio.status()["state"])
time.sleep(2)

# b back to the album, while both play.
before = time.monotonic_ns()
mpd.moveoutput("b")
step("moved", before_ns=before, radio_enabled=enabled(radio.outputs()), default_enabled=enabled(mpd.outputs()),
     radio_state=radio.status()["state"])
time.sleep(2.5)
step("heard")
refused = {
    "default": refusal(mpd.delpartition, "default"),
    "clients": refusal(mpd.delpartition, "radio"),
    "unknown": refusal(mpd.partition, "cellar"),
    "output": refusal(mpd.moveoutput, "cellar"),
    "missing": refusal(mpd.delpartition, "cellar"),
    "outputs": outputs_refusal,
}
radio.partition("default")
step("refused", **refused)
step("final", partitions=[p["partition"] for p in mpd.listpartitions()],
     radio_queue=[s["file"] for s in (lambda c: (c.partition("radio"), c.playlistinfo())[1])(client())])
radio.disconnect()
mpd.disconnect()
