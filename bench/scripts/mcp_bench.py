#!/usr/bin/env python3
"""Measures `/api/mcp` against the REST routes it shares code with.

Starts a release `switchboard` on the memory engine, creates a Bay with one
human and N agents in one GROUP through the admin API, then:
  1. latency: one agent calls `get_room_context` and `send_message` over MCP
     (the official Python SDK, one session) and the same REST routes
     (`GET …/context`, `POST …/messages`) with a keep-alive HTTP client,
     CALLS times each, sequentially; prints p50/p99 in ms;
  2. memory: N MCP sessions (one per agent) each hold `wait_for_messages`
     (timeout 50 s), and separately N held `/updates?wait=30`, each kind
     on a fresh server of its own (so pages one kind freed cannot hide the
     other's); reads the server's RSS from /proc before and while they are
     held; prints KiB per held call.
Usage:
  python3 bench/scripts/mcp_bench.py [N] [CALLS]   (needs: pip install mcp)
"""
import asyncio, json, os, socket, subprocess, sys, time, urllib.request

import httpx2
from mcp.client.session import ClientSession
from mcp.client.streamable_http import create_mcp_http_client, streamable_http_client

N = int(sys.argv[1]) if len(sys.argv) > 1 else 200
CALLS = int(sys.argv[2]) if len(sys.argv) > 2 else 500
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


def pct(samples, p):
    s = sorted(samples)
    return round(s[min(len(s) - 1, int(len(s) * p))] * 1000, 2)


async def session(url, token, body):
    """Runs `body(session)` inside one MCP session of `token`."""
    client = create_mcp_http_client(headers={"Authorization": f"Bearer {token}"},
                                    timeout=httpx2.Timeout(30.0, read=120.0))
    async with client:
        async with streamable_http_client(url, http_client=client) as streams:
            async with ClientSession(streams[0], streams[1]) as s:
                await s.initialize()
                return await body(s)


async def latency(base, token):
    url = base + "/api/mcp"
    out = {}

    async def mcp_calls(s):
        for tool, args in [("get_room_context", {"conversationId": "room"}),
                           ("send_message", {"conversationId": "room", "content": "bench"})]:
            times = []
            for _ in range(CALLS):
                t = time.perf_counter()
                r = await s.call_tool(tool, args)
                times.append(time.perf_counter() - t)
                assert not r.is_error, r
            out[f"mcp_{tool}"] = {"p50_ms": pct(times, 0.5), "p99_ms": pct(times, 0.99)}

    await session(url, token, mcp_calls)
    async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}) as http:
        for name, call in [
            ("rest_get_context", lambda: http.get(base + "/api/agent-api/conversations/room/context")),
            ("rest_post_message", lambda: http.post(base + "/api/agent-api/conversations/room/messages",
                                                    json={"content": "bench"})),
        ]:
            times = []
            for _ in range(CALLS):
                t = time.perf_counter()
                r = await call()
                times.append(time.perf_counter() - t)
                assert r.status_code < 300, r.text
            out[name] = {"p50_ms": pct(times, 0.5), "p99_ms": pct(times, 0.99)}
    return out


async def hold_poll(port, token, started):
    r, w = await asyncio.open_connection("127.0.0.1", port)
    w.write(f"GET /api/agent-api/updates?wait=30 HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {token}\r\n\r\n".encode())
    await w.drain()
    started.append(1)
    await r.read(1)
    w.close()


async def held_waits(base, pid, tokens):
    """RSS per MCP session holding `wait_for_messages`."""
    url = base + "/api/mcp"
    before = rss_kib(pid)
    opened, release = [], asyncio.Event()

    async def hold(s):
        opened.append(1)
        waiting = asyncio.create_task(s.call_tool("wait_for_messages", {"timeout": 50}))
        await release.wait()
        waiting.cancel()

    tasks = [asyncio.create_task(session(url, t, hold)) for t in tokens]
    while len(opened) < len(tokens):
        await asyncio.sleep(0.1)
    await asyncio.sleep(SETTLE_S)
    held = rss_kib(pid)
    release.set()
    await asyncio.gather(*tasks, return_exceptions=True)
    n = len(tokens)
    return {"held": n, "rss_before_kib": before, "rss_held_kib": held,
            "kib_per_held_wait": round((held - before) / n, 2)}


async def held_polls(port, pid, tokens):
    """RSS per held `/updates`."""
    before = rss_kib(pid)
    started = []
    polls = [asyncio.create_task(hold_poll(port, t, started)) for t in tokens]
    while len(started) < len(tokens):
        await asyncio.sleep(0.1)
    await asyncio.sleep(SETTLE_S)
    held = rss_kib(pid)
    for p in polls:
        p.cancel()
    n = len(tokens)
    return {"held": n, "rss_before_kib": before, "rss_held_kib": held,
            "kib_per_held_poll": round((held - before) / n, 2)}


class Server:
    """A release `switchboard` on the memory engine with the bench's Bay."""

    def __enter__(self):
        self.port = free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        env = dict(os.environ, SWITCHBOARD_ADMIN_TOKEN=ADMIN, RUST_LOG="warn",
                   SWITCHBOARD_LIMITS__UPDATES_PER_MINUTE="1000000",
                   SWITCHBOARD_LIMITS__AGENT_REQUESTS_PER_MINUTE="1000000",
                   SWITCHBOARD_LIMITS__MAX_CONNECTIONS_PER_IP="1000000",
                   SWITCHBOARD_LIMITS__MAX_HELD_POLLS_PER_IP="1000000")
        self.proc = subprocess.Popen([BIN, "serve", "--bind", f"127.0.0.1:{self.port}"], env=env,
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        base = self.base
        for _ in range(100):
            try:
                urllib.request.urlopen(base + "/healthz"); break
            except Exception:
                time.sleep(0.1)
        admin(base, "/bays", {"id": "m", "name": "m"})
        admin(base, "/bays/m/participants", {"id": "ana", "kind": "user", "name": "Ana"})
        self.tokens = [admin(base, "/bays/m/participants",
                             {"id": f"a{i}", "kind": "agent", "name": f"Agent {i}"})["token"]
                       for i in range(N)]
        admin(base, "/bays/m/conversations", {"id": "room", "type": "GROUP",
                                              "members": ["ana"] + [f"a{i}" for i in range(N)]})
        time.sleep(0.5)
        return self

    def __exit__(self, *_):
        self.proc.kill()
        self.proc.wait()


async def main():
    result = {"calls": CALLS}
    with Server() as s:
        result["latency"] = await latency(s.base, s.tokens[0])
    with Server() as s:
        result["mcp_wait"] = await held_waits(s.base, s.proc.pid, s.tokens)
    with Server() as s:
        result["updates"] = await held_polls(s.port, s.proc.pid, s.tokens)
    print(json.dumps(result, indent=2))


asyncio.run(main())
