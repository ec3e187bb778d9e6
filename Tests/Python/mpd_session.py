"""A session of python-mpd2 (PyPI), the MPD client library of many front ends, against the
house's MPD port: library, queue, transport, outputs, volume and idle. It prints one JSON
object per step with the CLOCK_MONOTONIC time it was done, for MPDServerTests to find each
effect in the room's audio.

usage: mpd_session.py PORT
"""
import json
import sys
import threading
import time

from mpd import MPDClient

port = int(sys.argv[1])


def step(name, **values):
    print(json.dumps({"step": name, "mono_ns": time.monotonic_ns(), **values}), flush=True)


def client():
    c = MPDClient()
    c.timeout = 10
    c.connect("127.0.0.1", port)
    return c


mpd = client()
step("connected", version=mpd.mpd_version)
deadline = time.monotonic() + 30
while not any(o["outputname"] == "a" and o["outputenabled"] == "1" for o in mpd.outputs()):
    if time.monotonic() > deadline:
        raise SystemExit("room a never showed as an enabled output")
    time.sleep(0.1)

songs = [entry["file"] for entry in mpd.listallinfo() if "file" in entry]
step("library", files=songs, albums=mpd.list("album"))
mpd.clear()
first = mpd.addid(songs[0])
mpd.add(songs[1])
step("queue", titles=[song.get("title") for song in mpd.playlistinfo()], first_id=first)

# An idle client is woken by the play.
woken = {}
def wait_idle():
    waiter = client()
    woken["subsystems"] = waiter.idle("player")
    woken["mono_ns"] = time.monotonic_ns()
    waiter.disconnect()
idler = threading.Thread(target=wait_idle)
idler.start()
time.sleep(0.3)  # let it reach idle; it is woken whatever the timing
mpd.playid(first)
step("play")
idler.join(10)
step("woken", subsystems=woken.get("subsystems"), after_ms=(woken.get("mono_ns", 0) - time.monotonic_ns()) / 1e6)
time.sleep(2)  # the room plays: what the test measures
mpd.setvol(50)
step("setvol", volume=mpd.status().get("volume"))
time.sleep(1.5)
mpd.pause(1)
step("pause", state=mpd.status()["state"])
time.sleep(1.5)
mpd.pause(0)
step("resume", state=mpd.status()["state"])
time.sleep(1.5)
mpd.next()
deadline = time.monotonic() + 10
while mpd.currentsong().get("title") != "Song 2":
    if time.monotonic() > deadline:
        raise SystemExit("next never reached Song 2")
    time.sleep(0.05)
step("next", title=mpd.currentsong().get("title"))
time.sleep(1.5)
mpd.seekcur(10)
# The house cuts the seek into the stream a fraction of a second ahead, so that every room
# jumps together; status says where the rooms are, so it shows the seek once it is heard.
sought = time.monotonic()
while float(mpd.status().get("elapsed", "0")) < 9.9 and time.monotonic() - sought < 2:
    time.sleep(0.02)
step("seekcur", elapsed=float(mpd.status().get("elapsed", "0")), heard_after_ms=(time.monotonic() - sought) * 1000)
time.sleep(1)
mpd.disableoutput(0)
disabled = mpd.outputs()[0]["outputenabled"]
mpd.enableoutput(0)
step("outputs", disabled=disabled, enabled=mpd.outputs()[0]["outputenabled"])
try:
    mpd.deleteid(999)
    step("bad", error=None)
except Exception as error:  # python-mpd2's CommandError carries MPD's ACK
    step("bad", error=str(error))
step("stats", songs=mpd.stats().get("songs"), playlist_length=mpd.status().get("playlistlength"))

# Play modes: each shows in status, and an idle client hears "options".
changed = {}
def wait_options():
    waiter = client()
    changed["subsystems"] = waiter.idle("options")
    waiter.disconnect()
watcher = threading.Thread(target=wait_options)
watcher.start()
time.sleep(0.3)  # let it reach idle; it is woken whatever the timing
mpd.repeat(1)
mpd.random(1)
mpd.single(1)
mpd.consume(1)
watcher.join(10)
modes = mpd.status()
step("modes", repeat=modes["repeat"], random=modes["random"], single=modes["single"], consume=modes["consume"],
     woken=changed.get("subsystems"))
for mode in (mpd.single, mpd.consume, mpd.random, mpd.repeat):
    mode(0)
after = mpd.status()
step("modes off", modes=[after["repeat"], after["random"], after["single"], after["consume"]])

# Replay gain, as python-mpd2 sets and reads it: the mode shows in replay_gain_status.
mpd.replay_gain_mode("album")
album = mpd.replay_gain_status()
mpd.replay_gain_mode("off")
step("replay gain", album=str(album), off=str(mpd.replay_gain_status()))

# Crossfade, as MPD's: `crossfade N` sets it, status shows `xfade` only while it is on.
mpd.crossfade(4)
on = mpd.status().get("xfade")
try:
    mpd.crossfade(-1)
    negative = None
except Exception as error:
    negative = str(error)
mpd.crossfade(0)
step("crossfade", on=on, off=mpd.status().get("xfade"), negative=negative)

# Stored playlists: save, a second save of the name refused, list, load onto a cleared queue,
# shuffle, remove.
mpd.save("Evening")
try:
    mpd.save("Evening")
    refused = None
except Exception as error:
    refused = str(error)
saved = [entry["playlist"] for entry in mpd.listplaylists()]
files = mpd.listplaylist("Evening")
mpd.clear()
mpd.load("Evening")
loaded = [song.get("title") for song in mpd.playlistinfo()]
mpd.shuffle()
shuffled = sorted(song.get("title") for song in mpd.playlistinfo())
mpd.rm("Evening")
step("playlists", saved=saved, files=files, refused=refused, loaded=loaded, shuffled=shuffled,
     after_rm=[entry["playlist"] for entry in mpd.listplaylists()])
mpd.close()
mpd.disconnect()
