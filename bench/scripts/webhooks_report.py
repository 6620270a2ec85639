#!/usr/bin/env python3
"""Tables for BENCHMARKS.md "Webhook fan-out" from bench/results/webhooks.jsonl.

Every configuration shows the median of its runs and the min–max spread, so
the noise of the shared machine stays visible; the per-run list follows.

    python3 bench/scripts/webhooks_report.py [bench/results/webhooks.jsonl]
"""
import json
import statistics
import sys
from collections import OrderedDict

path = sys.argv[1] if len(sys.argv) > 1 else "bench/results/webhooks.jsonl"
runs = [json.loads(line) for line in open(path) if line.strip()]
groups = OrderedDict()
for r in runs:
    key = (r["label"], r["agents"], str(r["rate_msgs_per_s"]), r["messages"])
    groups.setdefault(key, []).append(r)


def spread(vals, fmt="{:,.0f}"):
    vals = [v for v in vals if v is not None]
    if not vals:
        return "–"
    med = fmt.format(statistics.median(vals))
    if len(vals) == 1:
        return med
    return "%s (%s–%s)" % (med, fmt.format(min(vals)), fmt.format(max(vals)))


def undelivered(r):
    """Deliveries missing at the measured cut-off."""
    return r.get("undelivered_at_cutoff", r["lost"])


def lost(r):
    """Deliveries that never came (None: unknown, the run predates the grace wait)."""
    if "undelivered_at_cutoff" in r or r["end"] == "all delivered":
        return r["lost"]
    return None


def gateway_cores(r):
    """CPU the gateway got during the measured window, in cores."""
    return r["gateway_cpu_s"] / r["measured_secs"] if r["measured_secs"] else None


groups = OrderedDict(
    sorted(groups.items(), key=lambda kv: (kv[0][0], kv[0][1], kv[0][2] == "max"))
)

print(
    "| engine | agents | msg/s | messages | runs | deliveries/s | steady deliveries/s "
    "| createdAt→receipt p50 ms | p99 ms | gateway CPU-s / 1,000 | Redis CPU-s / 1,000 "
    "| gateway cores got | undelivered at cut-off | lost | dup ids | body KiB | others_cores |"
)
print("|" + "---|" * 17)
for (label, agents, rate, msgs), rs in groups.items():
    engine = label.replace("switchboard (", "").rstrip(")")
    exp = sum(r["expected_deliveries"] for r in rs)
    losts = [lost(r) for r in rs]
    lost_txt = "%s / %s" % (
        "{:,}".format(sum(x for x in losts if x is not None)),
        "{:,}".format(exp),
    )
    if None in losts:
        lost_txt += " (%d run(s) unknown)" % losts.count(None)
    redis = spread([r["aux_cpu_s_per_1000"] for r in rs], "{:.3f}") if "redis" in engine else "–"
    others = ", ".join("%.2f" % r["others_cores"] for r in rs)
    print(
        "| %s | %s | %s | %s | %d | %s | %s | %s | %s | %s | %s | %s | %s | %s | %d | %.1f | %s |"
        % (
            engine,
            "{:,}".format(agents),
            rate,
            msgs,
            len(rs),
            spread([r["deliveries_per_s"] for r in rs]),
            spread([r["deliveries_per_s_steady"] for r in rs]),
            spread([r["latency_created"]["p50_ms"] for r in rs], "{:,.1f}"),
            spread([r["latency_created"]["p99_ms"] for r in rs], "{:,.1f}"),
            spread([r["gateway_cpu_s_per_1000"] for r in rs], "{:.3f}"),
            redis,
            spread([gateway_cores(r) for r in rs], "{:.2f}"),
            "{:,}".format(sum(undelivered(r) for r in rs)),
            lost_txt,
            sum(r["duplicates_by_webhook_id"] for r in rs),
            statistics.median([r["body_bytes_mean"] for r in rs]) / 1024,
            others,
        )
    )

print()
print("Per run:")
for r in runs:
    redis = r.get("redis") or {}
    idle = r.get("idle") or {}
    print(
        "- %s %d agents, rate %s × %d: %s/s (steady %s), createdAt p50/p99 %.1f/%.1f ms, "
        "scheduled p99 %.1f ms; CPU-s/1000 gateway %.3f, Redis %.3f, load generator %.3f; "
        "gateway got %.2f cores; undelivered at cut-off %d, after %s, lost %s; dup ids %d; "
        "order differs %s agents (vs seq %s); end '%s'; posts %d/%d in %.1f s; max gap %.0f ms; "
        "idle: gateway %s cores, Redis %s cmds/s %s conns/s; Redis cmds/delivery %s, "
        "conns opened %s; peak RSS %.0f MiB; others %.2f"
        % (
            r["label"],
            r["agents"],
            r["rate_msgs_per_s"],
            r["messages"],
            "{:,.0f}".format(r["deliveries_per_s"]),
            "{:,.0f}".format(r["deliveries_per_s_steady"]),
            r["latency_created"]["p50_ms"],
            r["latency_created"]["p99_ms"],
            r["latency_scheduled"]["p99_ms"],
            r["gateway_cpu_s_per_1000"],
            r["aux_cpu_s_per_1000"],
            r["client_cpu_s_per_1000"],
            gateway_cores(r) or 0,
            undelivered(r),
            r.get("delivered_after_cutoff", "–"),
            lost(r) if lost(r) is not None else "unknown",
            r["duplicates_by_webhook_id"],
            r.get("agents_order_differs", "–"),
            r.get("out_of_order_vs_seq", r.get("out_of_order")),
            r["end"],
            r["published_ok"],
            r["messages"],
            r["publish_secs"],
            r["max_gap_between_deliveries_ms"],
            idle.get("gateway_cpu_cores", "–"),
            idle.get("redis_commands_per_s", "–"),
            idle.get("redis_connections_per_s", "–"),
            redis.get("commands_per_delivery", "–"),
            redis.get("connections_opened", "–"),
            r["server_peak_rss_kib"] / 1024,
            r["others_cores"],
        )
    )
