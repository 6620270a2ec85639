#!/usr/bin/env python3
"""Measures the server-side memory of idle WebSocket connections and of held
/updates long-polls.

Starts a release `switchboard` on the memory engine, creates N agents in one
GROUP conversation through the admin API, then:
  1. opens N WebSockets (one per agent, hello sent, `ready` received) and
     reads the server's RSS from /proc before and after;
  2. closes them and holds N `/updates?wait=30` calls (one per agent).
Prints RSS per connection in KiB. Usage:
  python3 bench/scripts/memory_per_connection.py [N]   (needs: pip install websockets)
"""
import asyncio, json, os, socket, subprocess, sys, time, urllib.request

N = int(sys.argv[1]) if len(sys.argv) > 1 else 2000
ADMIN = "bench-admin-token"
SETTLE_S = 12.0
BIN = os.path.join(os.path.dirname(__file__), "..", "..", "target", "release", "switchboard")


def free_port():
    s = socket.socket(); s.bind(("127.0.0.1", 0)); p = s.getsockname()[1]; s.close(); return p


def rss_kib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])


def admin(base, path, body):
    req = urllib.request.Request(base + "/api/admin" + path, data=json.dumps(body).encode(),
                                 headers={"Authorization": f"Bearer {ADMIN}", "Content-Type": "application/json"})
    return json.load(urllib.request.urlopen(req))


async def hold_ws(uri, token, ready, release):
    import websockets
    async with websockets.connect(uri, additional_headers={"Authorization": f"Bearer {token}"}, ping_interval=None) as ws:
        await ws.send(json.dumps({"t": "hello", "resume": None}))
        json.loads(await ws.recv())
        ready.append(1)
        await release.wait()


async def hold_poll(port, token, started):
    r, w = await asyncio.open_connection("127.0.0.1", port)
    w.write(f"GET /api/agent-api/updates?wait=30 HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {token}\r\n\r\n".encode())
    await w.drain()
    started.append(1)
    await r.read(1)
    w.close()


async def main():
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    env = dict(os.environ, SWITCHBOARD_ADMIN_TOKEN=ADMIN, RUST_LOG="warn",
               SWITCHBOARD_LIMITS__UPDATES_PER_MINUTE="1000000",
               SWITCHBOARD_LIMITS__MAX_CONNECTIONS_PER_IP="1000000")
    proc = subprocess.Popen([BIN, "serve", "--bind", f"127.0.0.1:{port}"], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        for _ in range(100):
            try:
                urllib.request.urlopen(base + "/healthz"); break
            except Exception:
                time.sleep(0.1)
        admin(base, "/bays", {"id": "m", "name": "m"})
        tokens = [admin(base, "/bays/m/participants", {"id": f"a{i}", "kind": "agent", "name": f"Agent {i}"})["token"] for i in range(N)]
        admin(base, "/bays/m/conversations", {"id": "room", "type": "GROUP", "members": [f"a{i}" for i in range(N)]})
        time.sleep(0.5)
        base_rss = rss_kib(proc.pid)

        ready, release = [], asyncio.Event()
        tasks = [asyncio.create_task(hold_ws(f"ws://127.0.0.1:{port}/api/agent-api/ws", t, ready, release)) for t in tokens]
        while len(ready) < N:
            await asyncio.sleep(0.1)
        # SETTLE_S: the allocator returns the pages the handshakes freed
        # (jemalloc's dirty-page decay is 10 s), so RSS is what the idle
        # connections hold, not the connect burst.
        await asyncio.sleep(SETTLE_S)
        ws_rss = rss_kib(proc.pid)
        release.set()
        await asyncio.gather(*tasks, return_exceptions=True)
        await asyncio.sleep(1.0)
        after_ws = rss_kib(proc.pid)

        started = []
        polls = [asyncio.create_task(hold_poll(port, t, started)) for t in tokens]
        while len(started) < N:
            await asyncio.sleep(0.1)
        await asyncio.sleep(SETTLE_S)
        poll_rss = rss_kib(proc.pid)
        for p in polls:
            p.cancel()
        print(json.dumps({
            "connections": N,
            "rss_base_kib": base_rss,
            "rss_with_idle_ws_kib": ws_rss,
            "ws_kib_per_connection": round((ws_rss - base_rss) / N, 2),
            "rss_after_ws_closed_kib": after_ws,
            "rss_with_held_updates_kib": poll_rss,
            "updates_kib_per_held_poll": round((poll_rss - after_ws) / N, 2),
        }, indent=2))
    finally:
        proc.kill()


asyncio.run(main())
