"""Snapcast's JSON-RPC on an HTTP port, as Snapweb and Home Assistant's HTTP transport use it:
POST /jsonrpc (a request, a batch, a notification, bad JSON, an unknown method) and the
WebSocket /jsonrpc (a request answered; with --change, a client's volume set through POST and
the change pushed on the WebSocket). Run against the house and against snapserver 0.26 by
SnapcastControlTests, which holds them to the same answers.

usage: snapcast_jsonrpc_http.py HTTP_PORT [--change]
With TUTTI_TOKEN set (the house's controller token), every request carries it as a bearer
token, as the house requires; snapserver ignores the header.
"""
import asyncio
import json
import os
import sys
import urllib.error
import urllib.request

import websockets

port = int(sys.argv[1])
change = "--change" in sys.argv[2:]
base = f"127.0.0.1:{port}"
token = os.environ.get("TUTTI_TOKEN")
credential = {"Authorization": f"Bearer {token}"} if token else {}


def step(name, **values):
    print(json.dumps({"step": name, **values}), flush=True)


def post(body):
    request = urllib.request.Request(f"http://{base}/jsonrpc", data=body.encode(), method="POST",
                                     headers={"Content-Type": "application/json", **credential})
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            text = response.read().decode()
            return response.status, (json.loads(text) if text else None)
    except urllib.error.HTTPError as error:
        text = error.read().decode()
        return error.code, (json.loads(text) if text else None)


status, reply = post(json.dumps({"id": 1, "jsonrpc": "2.0", "method": "Server.GetRPCVersion"}))
step("version", status=status, reply=reply)
status, reply = post(json.dumps([{"id": 2, "jsonrpc": "2.0", "method": "Server.GetRPCVersion"},
                                 {"jsonrpc": "2.0", "method": "Server.GetRPCVersion"}]))
step("batch", status=status, ids=[r.get("id") for r in reply] if isinstance(reply, list) else reply)
status, reply = post(json.dumps({"jsonrpc": "2.0", "method": "Server.GetRPCVersion"}))
step("notification", status=status, reply=reply)
status, reply = post("{not json")
step("parse", status=status, code=(reply or {}).get("error", {}).get("code"))
status, reply = post(json.dumps({"id": 3, "jsonrpc": "2.0", "method": "Server.Nonsense"}))
step("unknown", status=status, id=(reply or {}).get("id"), code=(reply or {}).get("error", {}).get("code"))
status, reply = post(json.dumps({"id": 4, "jsonrpc": "2.0", "method": "Server.GetStatus"}))
server = reply["result"]["server"]
step("status", status=status, keys=sorted(server), snapserver=server["server"]["snapserver"]["version"])
clients = [c for g in server["groups"] for c in g["clients"]]


async def websocket():
    async with websockets.connect(f"ws://{base}/jsonrpc", additional_headers=credential) as ws:
        await ws.send(json.dumps({"id": 5, "jsonrpc": "2.0", "method": "Server.GetRPCVersion"}))
        reply = json.loads(await asyncio.wait_for(ws.recv(), 10))
        step("ws-version", reply=reply)
        if change and clients:
            client = clients[0]
            await asyncio.get_running_loop().run_in_executor(None, post, json.dumps(
                {"id": 6, "jsonrpc": "2.0", "method": "Client.SetVolume",
                 "params": {"id": client["id"], "volume": {"muted": False, "percent": 33}}}))
            # Until the update that shows the change (another may come first), within 10 s.
            deadline = asyncio.get_running_loop().time() + 10
            while True:
                left = deadline - asyncio.get_running_loop().time()
                message = json.loads(await asyncio.wait_for(ws.recv(), max(left, 0.001)))
                if message.get("method") != "Server.OnUpdate":
                    continue
                found = [c for g in message["params"]["server"]["groups"] for c in g["clients"] if c["id"] == client["id"]]
                if found and found[0]["config"]["volume"]["percent"] == 33:
                    step("ws-notified", method=message["method"], volume=33)
                    break

asyncio.run(websocket())
