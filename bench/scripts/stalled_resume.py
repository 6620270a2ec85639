#!/usr/bin/env python3
"""Server memory held by WebSocket clients that resume from far back and
then read nothing (BENCHMARKS.md, "Replays in pages").

Starts BIN on the memory engine, posts N_MSG messages of SIZE bytes to a
GROUP of N_RES agents while they are away, then has each agent reconnect
with `hello.resume` at its old cursor over a raw socket with a 4 KiB
receive buffer that is never read. Prints RSS before and 12 s after.
Usage: python3 bench/scripts/stalled_resume.py [BIN]   (default target/release/switchboard)
"""
import json, os, socket, subprocess, sys, time, urllib.request, base64
BIN = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..", "..", "target", "release", "switchboard")
N_RES = 5; N_MSG = 400; SIZE = 10000
ADMIN = "bench-admin-token"
def free_port():
    s = socket.socket(); s.bind(("127.0.0.1", 0)); p = s.getsockname()[1]; s.close(); return p
def rss(pid):
    for l in open(f"/proc/{pid}/status"):
        if l.startswith("VmRSS:"): return int(l.split()[1])
def req(base, method, path, token, body=None):
    r = urllib.request.Request(base + path, data=json.dumps(body).encode() if body is not None else None, method=method,
        headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"})
    return json.load(urllib.request.urlopen(r))
port = free_port(); base = f"http://127.0.0.1:{port}"
env = dict(os.environ, SWITCHBOARD_ADMIN_TOKEN=ADMIN, RUST_LOG="warn", SWITCHBOARD_LIMITS__UPDATES_PER_MINUTE="1000000",
           SWITCHBOARD_LIMITS__AGENT_REQUESTS_PER_MINUTE="1000000")
proc = subprocess.Popen([BIN, "serve", "--bind", f"127.0.0.1:{port}"], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
try:
    for _ in range(100):
        try: urllib.request.urlopen(base + "/healthz"); break
        except Exception: time.sleep(0.1)
    req(base, "POST", "/api/admin/bays", ADMIN, {"id": "m", "name": "m"})
    ids = ["poster"] + [f"r{i}" for i in range(N_RES)]
    tok = {i: req(base, "POST", "/api/admin/bays/m/participants", ADMIN, {"id": i, "kind": "agent", "name": i})["token"] for i in ids}
    req(base, "POST", "/api/admin/bays/m/conversations", ADMIN, {"id": "room", "type": "GROUP", "members": ids})
    cursors = {i: req(base, "GET", "/api/agent-api/updates?wait=0", tok[i])["cursor"] for i in ids[1:]}
    body = "x" * SIZE
    for n in range(N_MSG):
        req(base, "POST", "/api/agent-api/conversations/room/messages", tok["poster"], {"content": f"{n} {body}"})
    time.sleep(12); before = rss(proc.pid)
    socks = []
    for i in ids[1:]:
        s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096); s.connect(("127.0.0.1", port))
        key = base64.b64encode(os.urandom(16)).decode()
        s.sendall(f"GET /api/agent-api/ws HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\nAuthorization: Bearer {tok[i]}\r\n\r\n".encode())
        payload = json.dumps({"t": "hello", "resume": cursors[i]}).encode()
        mask = os.urandom(4); masked = bytes(b ^ mask[k % 4] for k, b in enumerate(payload))
        hdr = bytes([0x81, 0x80 | 126]) + len(payload).to_bytes(2, "big") if len(payload) > 125 else bytes([0x81, 0x80 | len(payload)])
        s.sendall(hdr + mask + masked); socks.append(s)
    time.sleep(12); after = rss(proc.pid)
    print(json.dumps({"bin": BIN, "rss_before_kib": before, "rss_with_stalled_resumers_kib": after, "kib_per_resumer": round((after - before) / N_RES)}))
finally:
    proc.kill()
