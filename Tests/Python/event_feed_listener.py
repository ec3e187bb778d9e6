"""A real WebSocket client on the house's event feed, for Tests/TuttiHouseHTTPTests.

Prints "connected", then each text message as "<CLOCK_MONOTONIC ns> <message>", one per line,
until the feed closes or the process is interrupted. The house's controller token comes in
TUTTI_TOKEN and is sent as a bearer token.
"""
import asyncio
import os
import sys
import time

import websockets


async def listen(url: str) -> None:
    token = os.environ.get("TUTTI_TOKEN")
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    async with websockets.connect(url, max_size=None, additional_headers=headers) as feed:
        print("connected", flush=True)
        async for message in feed:
            if isinstance(message, str):
                print(f"{time.monotonic_ns()} {message}", flush=True)


if __name__ == "__main__":
    try:
        asyncio.run(listen(sys.argv[1]))
    except KeyboardInterrupt:
        pass
