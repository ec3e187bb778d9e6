"""MPD's permissions through python-mpd2, for Tests/TuttiHouseMPDTests/MPDPermissionsTests.swift,
against a `tutti server --mpd-password secret@read,add,control --mpd-default-permissions read`.

    python3 mpd_permissions.py PORT

Prints one JSON object per step: what was answered, or the ACK python-mpd2 raised.
"""
import json
import sys

from mpd import CommandError, MPDClient


def report(step, **fields):
    print(json.dumps({"step": step, **fields}), flush=True)


def attempt(call):
    try:
        return {"ok": call()}
    except CommandError as error:
        return {"ack": str(error)}


client = MPDClient()
client.timeout = 10
client.connect("127.0.0.1", int(sys.argv[1]))
report("before", status=attempt(lambda: client.status()["state"]), clear=attempt(client.clear),
       setvol=attempt(lambda: client.setvol(10)), commands=client.commands(), notcommands=client.notcommands())
report("wrong", password=attempt(lambda: client.password("guess")), clear=attempt(client.clear))
report("right", password=attempt(lambda: client.password("secret")), clear=attempt(client.clear),
       newpartition=attempt(lambda: client.newpartition("attic")), commands=client.commands())
client.close()
client.disconnect()
