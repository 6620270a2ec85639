#!/usr/bin/env python3
"""Redis work per post on the Redis engine, from counts that a busy machine
does not move much: `INFO commandstats` (calls, exact; usec, Redis's own time
inside each command) and `INFO cpu` (Redis's CPU seconds) before and after.

Starts its own redis-server (own port, no persistence) and one gateway
(`SWITCHBOARD_BIN`, default target/release/switchboard, else target/debug)
on it, creates one Bay with ROOMS conversations of 4 agents, then one agent
per room posts MESSAGES times over REST (keep-alive, sequential), and prints
per post: Redis commands by name, EVALSHA and all-command usec, Redis CPU.
    python3 bench/scripts/redis_cost_per_post.py [MESSAGES] [ROOMS] [CONCURRENCY]
With REDIS_CPU=1 GATEWAY_CPUS=0, Redis runs on a core of its own and the
gateway and this client on the other (see BENCHMARKS.md, "Group commit").
With CONCURRENCY > 1 (default 1) the measured posts go out over that many
keep-alive connections at once (each room's poster on one of them), so
Redis sees posts back to back instead of one at a time.
"""
import http.client, json, os, socket, subprocess, sys, tempfile, threading, time, urllib.request

MESSAGES = int(sys.argv[1]) if len(sys.argv) > 1 else 2000
ROOMS = int(sys.argv[2]) if len(sys.argv) > 2 else 50
CONCURRENCY = int(sys.argv[3]) if len(sys.argv) > 3 else 1
ADMIN = "bench-admin-token"
ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")


def binary():
    if os.environ.get("SWITCHBOARD_BIN"):
        return os.environ["SWITCHBOARD_BIN"]
    rel = os.path.join(ROOT, "target", "release", "switchboard")
    return rel if os.path.exists(rel) else os.path.join(ROOT, "target", "debug", "switchboard")


def free_port():
    s = socket.socket(); s.bind(("127.0.0.1", 0)); p = s.getsockname()[1]; s.close(); return p


def redis_info(port, section):
    s = socket.create_connection(("127.0.0.1", port), timeout=5)
    arg = section.encode()
    s.sendall(b"*2\r\n$4\r\nINFO\r\n$%d\r\n%s\r\n" % (len(arg), arg))
    data = b""
    while True:
        data += s.recv(65536)
        head = data.index(b"\r\n") if b"\r\n" in data else -1
        if head > 0 and len(data) >= head + 2 + int(data[1:head]):
            break
    s.close()
    return data.decode().splitlines()[1:]


def snapshot(port):
    stats = {}
    for line in redis_info(port, "commandstats"):
        if line.startswith("cmdstat_"):
            name, rest = line[8:].split(":", 1)
            f = dict(kv.split("=") for kv in rest.split(","))
            stats[name] = (int(f["calls"]), int(f["usec"]))
    cpu = {}
    for line in redis_info(port, "cpu"):
        if ":" in line:
            k, v = line.split(":", 1)
            cpu[k] = float(v)
    return stats, cpu["used_cpu_sys"] + cpu["used_cpu_user"]


def redis_cmd(port, *args):
    """One command over RESP; the raw reply bytes (enough for CONFIG SET)."""
    s = socket.create_connection(("127.0.0.1", port), timeout=5)
    s.sendall(b"*%d\r\n" % len(args) + b"".join(b"$%d\r\n%s\r\n" % (len(a.encode()), a.encode()) for a in args))
    data = s.recv(65536)
    s.close()
    return data


def slowlog_by_script(port):
    """Average µs per top-level command from SLOWLOG (every command logged),
    EVALSHA split by script: (name, calls, avg µs)."""
    out = subprocess.run(["redis-cli", "-p", str(port), "--json", "SLOWLOG", "GET", "100000"],
                         capture_output=True, check=True).stdout
    entries = json.loads(out)
    groups = {}
    for _, _, duration, cmd, *_ in entries:
        name = cmd[0].lower()
        if name == "evalsha":
            name = f"evalsha ({cmd[2]} keys, {len(cmd) - 3} args)"
        g = groups.setdefault(name, [0, 0])
        g[0] += 1; g[1] += duration
    return {n: {"calls": c, "avg_us": round(u / c, 1)} for n, (c, u) in groups.items() if n not in ("slowlog", "config", "info")}


def admin(base, path, body):
    req = urllib.request.Request(base + "/api/admin" + path, data=json.dumps(body).encode(),
                                 headers={"Authorization": f"Bearer {ADMIN}", "Content-Type": "application/json"})
    return json.load(urllib.request.urlopen(req))


def main():
    rport, gport = free_port(), free_port()
    tmp = tempfile.mkdtemp()
    # REDIS_CPU (e.g. "1"): Redis pinned to a core of its own, the gateway
    # and this client on the others (GATEWAY_CPUS, e.g. "0"), so Redis's
    # time per post is not inflated by sharing a core with them.
    pin = lambda var: ["taskset", "-c", os.environ[var]] if os.environ.get(var) else []
    redis = subprocess.Popen(pin("REDIS_CPU") + ["redis-server", "--port", str(rport), "--bind", "127.0.0.1", "--save", "",
                              "--appendonly", "no", "--dir", tmp, "--loglevel", "warning"],
                             stdout=subprocess.DEVNULL)
    for _ in range(100):  # Redis listening before the gateway connects
        try:
            socket.create_connection(("127.0.0.1", rport), timeout=1).close(); break
        except OSError:
            time.sleep(0.05)
    env = dict(os.environ, SWITCHBOARD_ADMIN_TOKEN=ADMIN, RUST_LOG="warn",
               SWITCHBOARD_LIMITS__AGENT_REQUESTS_PER_MINUTE="1000000000",
               SWITCHBOARD_LIMITS__UPDATES_PER_MINUTE="1000000000",
               SWITCHBOARD_LIMITS__MAX_CONNECTIONS_PER_IP="0")
    env.pop("SWITCHBOARD_BIN", None)  # not a gateway setting
    if os.environ.get("GATEWAY_CPUS"):
        os.sched_setaffinity(0, {int(c) for c in os.environ["GATEWAY_CPUS"].split(",")})
    gw = subprocess.Popen([binary(), "serve", "--bind", f"127.0.0.1:{gport}", "--store", "redis",
                           "--redis-url", f"redis://127.0.0.1:{rport}"], env=env, stdout=subprocess.DEVNULL)
    base = f"http://127.0.0.1:{gport}"
    try:
        for _ in range(300):
            try:
                urllib.request.urlopen(base + "/healthz"); break
            except Exception:
                time.sleep(0.1)
        admin(base, "/bays", {"id": "b", "name": "b"})
        posters = []
        for r in range(ROOMS):
            members = [f"a{r}x{i}" for i in range(4)]
            toks = [admin(base, "/bays/b/participants", {"id": m, "kind": "agent", "name": m})["token"] for m in members]
            admin(base, "/bays/b/conversations", {"id": f"r{r}", "type": "GROUP", "members": members})
            posters.append((f"r{r}", toks[0]))
        conns = [http.client.HTTPConnection("127.0.0.1", gport) for _ in range(CONCURRENCY)]

        def post(i, conn=conns[0]):
            room, tok = posters[i % ROOMS]
            conn.request("POST", f"/api/agent-api/conversations/{room}/messages",
                         body=json.dumps({"content": f"message {i} " + "x" * 40}),
                         headers={"Authorization": f"Bearer {tok}", "Content-Type": "application/json"})
            res = conn.getresponse(); res.read()
            assert res.status == 201, res.status
        for i in range(ROOMS * 2):  # warm-up: every room's routing cached
            post(i)
        time.sleep(1.0)
        redis_cmd(rport, "CONFIG", "SET", "slowlog-max-len", "100000")
        redis_cmd(rport, "SLOWLOG", "RESET")
        s0, c0 = snapshot(rport)
        t0 = time.time()
        if CONCURRENCY == 1:
            for i in range(MESSAGES):
                post(i)
        else:
            def worker(k):
                for i in range(k, MESSAGES, CONCURRENCY):
                    post(i, conns[k])
            threads = [threading.Thread(target=worker, args=(k,)) for k in range(CONCURRENCY)]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
        elapsed = time.time() - t0
        time.sleep(0.5)
        s1, c1 = snapshot(rport)
        redis_cmd(rport, "CONFIG", "SET", "slowlog-log-slower-than", "0")
        for i in range(min(MESSAGES, 500)):  # a second pass, every command in SLOWLOG
            post(i)
        time.sleep(0.5)
        by_script = slowlog_by_script(rport)
        rows, calls_total, usec_total = [], 0, 0
        for name, (calls, usec) in s1.items():
            dc = calls - s0.get(name, (0, 0))[0]
            du = usec - s0.get(name, (0, 0))[1]
            if name == "info":
                continue
            if dc > 0:
                rows.append((name, dc, du))
                calls_total += dc
                # inner commands of scripts are inside EVALSHA's usec too
                if not name.startswith("eval"):
                    pass
        rows.sort(key=lambda r: -r[1])
        outer = sum(du for n, dc, du in rows if n in ("evalsha", "eval", "xread", "get", "set", "hget", "hmget", "ping"))
        result = {
            "messages": MESSAGES, "rooms": ROOMS, "concurrency": CONCURRENCY,
            "binary": os.path.basename(binary()),
            "posts_per_second": round(MESSAGES / elapsed),
            "redis_cpu_us_per_post": round((c1 - c0) * 1e6 / MESSAGES, 1),
            "commands_per_post": {n: round(dc / MESSAGES, 2) for n, dc, du in rows},
            "usec_per_post": {n: round(du / MESSAGES, 2) for n, dc, du in rows},
            "slowlog_second_pass": by_script,
            "evalsha_avg_us": round(sum(du for n, dc, du in rows if n == "evalsha") /
                                    max(1, sum(dc for n, dc, du in rows if n == "evalsha")), 2),
        }
        print(json.dumps(result, indent=2))
    finally:
        gw.kill(); redis.kill()


main()
