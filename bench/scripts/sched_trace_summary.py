#!/usr/bin/env python3
"""Where a hybrid node put its queries, from its scheduler trace (search-node --tuning trace=FILE).

Per window of --window seconds (the trace's t_us), for the sampled jobs: how many, the share the
CPU engine ran, the shares the policy queued as cheap and moved to the GPU by its balance rule
(SchedJob::balanced), jobs stolen, the CPU's wait (p50, p99) and run time (mean), and a GPU job's
wait plus its batch's run time (p50) and batch size (mean). Then, over the whole trace, the CPU
model's error on the jobs the CPU ran (median and spread of log(actual / predicted), actual time
by predicted bin) and, with --every N (the node's --tuning trace_every), the CPU engine's cores
(its jobs' run time per second, times N).

Usage: bench/scripts/sched_trace_summary.py TRACE.csv[.gz] [--window S] [--every N]
Rows that do not parse are skipped with a message on stderr. Exit status: 0, or 2 when no row
parses.
"""
import argparse
import csv
import gzip
import math
import statistics
import sys

NEEDED = ("t_us", "pred_cpu_us", "cheap", "balanced", "stolen", "migrated", "ran_on", "wait_us", "run_us",
          "model_us", "gpu_batch", "ok")


def quantile(values, q):
    if not values:
        return 0.0
    v = sorted(values)
    return v[min(len(v) - 1, int(len(v) * q))]


def read(path):
    opener = gzip.open if path.endswith(".gz") else open
    rows = []
    with opener(path, "rt", newline="") as f:
        reader = csv.DictReader(f)
        missing = [c for c in NEEDED if c not in (reader.fieldnames or [])]
        if missing:
            print(f"{path}: not a scheduler trace (no column {', '.join(missing)})", file=sys.stderr)
            return rows
        for line, r in enumerate(reader, start=2):
            try:
                rows.append({
                    "t": float(r["t_us"]) / 1e6, "pred_cpu": float(r["pred_cpu_us"]), "cheap": r["cheap"] == "1",
                    "balanced": r["balanced"] == "1", "stolen": r["stolen"] == "1", "migrated": r["migrated"] == "1",
                    "cpu": r["ran_on"] == "cpu", "wait": float(r["wait_us"]), "run": float(r["run_us"]),
                    "model": float(r["model_us"]), "batch": float(r["gpu_batch"]), "ok": r["ok"] == "1"})
            except (TypeError, ValueError):
                print(f"{path}:{line}: skipped (not a trace row)", file=sys.stderr)
    return rows


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("trace")
    ap.add_argument("--window", type=float, default=1.0, help="seconds per row")
    ap.add_argument("--every", type=int, default=0, help="the node's --tuning trace_every (scales the CPU's cores)")
    a = ap.parse_args()
    if a.window <= 0:
        print("--window must be positive", file=sys.stderr)
        return 2
    rows = read(a.trace)
    if not rows:
        print(f"{a.trace}: no trace rows", file=sys.stderr)
        return 2
    t0 = min(r["t"] for r in rows)
    windows = {}
    for r in rows:
        windows.setdefault(int((r["t"] - t0) / a.window), []).append(r)
    print("| s | jobs | on the CPU | cheap | balanced | stolen | CPU wait p50 us | p99 | CPU run mean us "
          "| GPU wait+run p50 us | GPU batch mean |" + (" CPU engine cores |" if a.every > 0 else ""))
    print("|---" * (11 + (a.every > 0)) + "|")
    for w in sorted(windows):
        d = windows[w]
        c = [r for r in d if r["cpu"]]
        g = [r for r in d if not r["cpu"]]
        n = len(d)
        row = [f"{w * a.window:g}", str(n), f"{100 * len(c) / n:.0f}%", f"{100 * sum(r['cheap'] for r in d) / n:.0f}%",
               f"{100 * sum(r['balanced'] for r in d) / n:.0f}%", str(sum(r["stolen"] for r in d)),
               f"{quantile([r['wait'] for r in c], 0.5):.0f}", f"{quantile([r['wait'] for r in c], 0.99):.0f}",
               f"{statistics.mean([r['run'] for r in c]) if c else 0:.0f}",
               f"{quantile([r['wait'] + r['run'] for r in g], 0.5):.0f}",
               f"{statistics.mean([r['batch'] for r in g]) if g else 0:.1f}"]
        if a.every > 0:
            row.append(f"{a.every * sum(r['run'] for r in c) / 1e6 / a.window:.1f}")
        print("| " + " | ".join(row) + " |")
    learned = [r for r in rows if r["cpu"] and r["ok"] and not r["migrated"] and r["model"] > 0 and r["pred_cpu"] > 0]
    if learned:
        logs = [math.log(r["model"] / r["pred_cpu"]) for r in learned]
        print(f"\nCPU model on {len(learned)} jobs the CPU ran: actual / predicted median "
              f"{math.exp(statistics.median(logs)):.2f}, log spread {statistics.pstdev(logs):.2f}")
        bins = {}
        for r in learned:
            bins.setdefault(int(math.log2(max(r["pred_cpu"], 1.0))), []).append(r["model"])
        for b in sorted(bins):
            v = bins[b]
            print(f"- predicted {2 ** b}-{2 ** (b + 1)} us: {len(v)} jobs, actual median {statistics.median(v):.0f} us")
    all_pred = [r["pred_cpu"] for r in rows]
    print("all jobs' predicted CPU time p10/p30/p50/p70/p90 us: " +
          "/".join(f"{quantile(all_pred, q):.0f}" for q in (0.1, 0.3, 0.5, 0.7, 0.9)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
