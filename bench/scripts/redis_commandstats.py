#!/usr/bin/env python3
"""Redis commands per post during a benchmark run.

    redis_commandstats.py sample PORT OUT     # every second, append INFO commandstats to OUT (until killed)
    redis_commandstats.py report OUT FROM TO POSTS_PER_S
                                              # diff the samples nearest FROM and TO (s since the first
                                              # sample) and print calls, calls/post and avg µs per command

Use it beside a run whose Redis listens on a known port (e.g. --aux "bench/peers/redis.sh run 6399"
and --redis-url redis://127.0.0.1:6399): the diff between two samples inside the measured window
leaves out set-up (participants, conversations, connects).
"""
import json
import socket
import sys
import time


def info(port):
    s = socket.create_connection(("127.0.0.1", port), timeout=2)
    s.sendall(b"*2\r\n$4\r\nINFO\r\n$12\r\ncommandstats\r\n")
    data = b""
    while True:
        chunk = s.recv(65536)
        if not chunk:
            break
        data += chunk
        if data.startswith(b"$"):
            n = int(data[1:data.index(b"\r\n")])
            if len(data) >= data.index(b"\r\n") + 2 + n:
                break
    s.close()
    stats = {}
    for line in data.decode().splitlines():
        if line.startswith("cmdstat_"):
            name, rest = line[8:].split(":", 1)
            fields = dict(kv.split("=") for kv in rest.split(","))
            stats[name] = {"calls": int(fields["calls"]), "usec": int(fields["usec"])}
    return stats


def sample(port, out):
    with open(out, "a") as f:
        while True:
            try:
                f.write(json.dumps({"t": time.time(), "stats": info(port)}) + "\n")
                f.flush()
            except OSError:
                pass
            time.sleep(1)


def report(out, t_from, t_to, posts_per_s):
    rows = [json.loads(l) for l in open(out)]
    t0 = rows[0]["t"]
    a = min(rows, key=lambda r: abs(r["t"] - t0 - t_from))
    b = min(rows, key=lambda r: abs(r["t"] - t0 - t_to))
    secs = b["t"] - a["t"]
    posts = posts_per_s * secs
    total = 0
    print(f"window {secs:.1f} s, ~{posts:.0f} posts")
    print("| command | calls | per post | avg µs |")
    print("|---|---|---|---|")
    for name in sorted(b["stats"], key=lambda n: -(b["stats"][n]["calls"] - a["stats"].get(n, {}).get("calls", 0))):
        calls = b["stats"][name]["calls"] - a["stats"].get(name, {}).get("calls", 0)
        usec = b["stats"][name]["usec"] - a["stats"].get(name, {}).get("usec", 0)
        if calls <= 0:
            continue
        total += calls
        print(f"| {name} | {calls:,} | {calls / posts:.2f} | {usec / calls:.1f} |")
    print(f"| **all** | {total:,} | {total / posts:.2f} | |")


if __name__ == "__main__":
    if sys.argv[1] == "sample":
        sample(int(sys.argv[2]), sys.argv[3])
    else:
        report(sys.argv[2], float(sys.argv[3]), float(sys.argv[4]), float(sys.argv[5]))
