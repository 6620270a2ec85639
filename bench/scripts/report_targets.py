#!/usr/bin/env python3
"""Prints the fan-out target tables (Markdown) from the JSON lines that
bench/scripts/fanout_targets.sh appended: the newest run of each system and
scenario, with Switchboard's ratio to each peer.

    python3 bench/scripts/report_targets.py [bench/results/targets.jsonl]
"""
import json
import sys

path = sys.argv[1] if len(sys.argv) > 1 else "bench/results/targets.jsonl"
runs = {}
for line in open(path):
    line = line.strip()
    if not line:
        continue
    d = json.loads(line)
    key = (d["scenario"], d.get("rate_msgs_per_s") if d["scenario"] == "s1" else d.get("mode"), d["system"])
    runs[key] = d  # the newest wins
systems = []
for (_, _, system) in runs:
    if system not in systems:
        systems.append(system)


def lat(d, k):
    return (d.get("latency") or {}).get(k)


def fmt(v, digits=1):
    return "–" if v is None else f"{v:,.{digits}f}"


def table(title, header, rows):
    """One Markdown table: `title`, then `header` cells and `rows`."""
    print(f"\n**{title}**\n")
    print("| " + " | ".join(header) + " |")
    print("|" + "---|" * len(header))
    for row in rows:
        print("| " + " | ".join(str(c) for c in row) + " |")


def each(scenario, variant):
    """(system, run) for every system that has a run of this kind."""
    return [(s, runs[(scenario, variant, s)]) for s in systems if (scenario, variant, s) in runs]


table("S1, 1,000 subscribers in one room",
      ["system", "rate msg/s", "p50 ms", "p99 ms", "p99.9 ms", "server CPU-s / M deliveries", "lost", "others' cores"],
      [[s, f"{rate:.0f}", fmt(lat(d, "p50_ms")), fmt(lat(d, "p99_ms")), fmt(lat(d, "p999_ms")),
        fmt(d["server_cpu_s_per_million"], 2), d["lost"], d["others_cores"]]
       for rate in (20.0, 100.0) for s, d in each("s1", rate)])
table("S1 maximum (p99 < 50 ms, zero loss)",
      ["system", "max msg/s", "deliveries/s", "first failing rate", "others' cores"],
      [[s, fmt(d["max_rate_msgs_per_s"], 0), fmt(d["max_deliveries_per_s"], 0),
        fmt(d.get("first_failing_rate"), 0), d["others_cores"]] for s, d in each("s1max", None)])
table("S2, 10,000 connections in 2,500 rooms of 4, 1 msg/s each",
      ["system", "posts accepted / scheduled", "delivered/s", "p50 ms", "p99 ms", "lost", "server CPU-s / M", "others' cores"],
      [[s, f"{d['published_ok']:,} / {d['publish_scheduled']:,}", fmt(d["deliveries_per_s"], 0),
        fmt(lat(d, "p50_ms")), fmt(lat(d, "p99_ms")), d["lost"], fmt(d["server_cpu_s_per_million"], 2),
        d["others_cores"]] for s, d in each("s2", None)])
table("S3, idle connections",
      ["system", "mode", "open at the end", "server KiB / connection"],
      [[s, mode, f"{d['still_open']:,}", fmt(d["kib_per_connection"], 2)]
       for mode in ("ws", "longpoll") for s, d in each("s3", mode)])
