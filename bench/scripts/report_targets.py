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


for rate in (20.0, 100.0):
    print(f"\n**S1, 1,000 subscribers, {rate:.0f} msg/s**\n")
    print("| system | p50 ms | p99 ms | p99.9 ms | server CPU-s / M deliveries | lost | others' cores |")
    print("|---|---|---|---|---|---|---|")
    for s in systems:
        d = runs.get(("s1", rate, s))
        if d:
            print(f"| {s} | {fmt(lat(d, 'p50_ms'))} | {fmt(lat(d, 'p99_ms'))} | {fmt(lat(d, 'p999_ms'))} | "
                  f"{fmt(d['server_cpu_s_per_million'], 2)} | {d['lost']} | {d['others_cores']} |")

print("\n**S1 maximum (p99 < 50 ms, zero loss)**\n")
print("| system | max msg/s | deliveries/s | first failing rate | others' cores |")
print("|---|---|---|---|---|")
for s in systems:
    d = runs.get(("s1max", None, s))
    if d:
        print(f"| {s} | {fmt(d['max_rate_msgs_per_s'], 0)} | {fmt(d['max_deliveries_per_s'], 0)} | "
              f"{fmt(d.get('first_failing_rate'), 0)} | {d['others_cores']} |")

print("\n**S2, 10,000 connections in 2,500 rooms of 4, 1 msg/s each**\n")
print("| system | posts accepted / scheduled | delivered/s | p50 ms | p99 ms | lost | server CPU-s / M | others' cores |")
print("|---|---|---|---|---|---|---|---|")
for s in systems:
    d = runs.get(("s2", None, s))
    if d:
        print(f"| {s} | {d['published_ok']:,} / {d['publish_scheduled']:,} | {fmt(d['deliveries_per_s'], 0)} | "
              f"{fmt(lat(d, 'p50_ms'))} | {fmt(lat(d, 'p99_ms'))} | {d['lost']} | "
              f"{fmt(d['server_cpu_s_per_million'], 2)} | {d['others_cores']} |")

print("\n**S3, idle connections**\n")
print("| system | mode | open at the end | server KiB / connection |")
print("|---|---|---|---|")
for mode in ("ws", "longpoll"):
    for s in systems:
        d = runs.get(("s3", mode, s))
        if d:
            print(f"| {s} | {mode} | {d['still_open']:,} | {fmt(d['kib_per_connection'], 2)} |")
