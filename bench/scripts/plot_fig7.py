#!/usr/bin/env python3
"""Draws Ding et al. 2009 Fig. 7 from bench/scripts/bench_hybrid.sh's CSV: mean and p99 latency against
arrival rate, one line per scheduler, and prints a markdown table with each scheduler's sustained
rate (highest with at most 1% deadline misses). Series may be named MODE-LABEL (bench_hybrid.sh's
LABEL; several runs' CSVs merged): each hybrid or griffin series is compared with the best cpu or
gpu series of the file, and every series' p99 with each cpu series' at its saturation rate (or, for
a series without a step there, at its first step above it).
Repeated readings: a series may hold several steps at one rate (the same LABEL in several runs of
bench/scripts/bench_hybrid_runs.sh, or several CSVs of one host given together). One host's readings of
the same step spread by 2x and more near a knee (BENCHMARKS.md, Fig. 7), so the best of them would
flatter whichever series was read more often: every rate's readings are pooled into the one whose
p99 is their median (the upper one of an even count: the worse of two), and the summary tables and
the plot use that reading. Each pooled rate is listed with its readings' p99 spread.
Without matplotlib only the table is printed.

usage: bench/scripts/plot_fig7.py FIG7.CSV [MORE.CSV ...] OUT.PNG
"""
import csv
import math
import sys


def main():
    if len(sys.argv) < 3:
        print(__doc__, file=sys.stderr)
        return 2
    rows = []
    for path in sys.argv[1:-1]:
        with open(path, newline="") as f:
            for r in csv.DictReader(f):
                # The columns the table and plot use must be numbers; the diagnostic ones after them
                # may be "-" (a phase with no samples at that step) and are kept as they are.
                try:
                    row = {k: v for k, v in r.items()}
                    for k in ("rate", "achieved_qps", "mean_ms", "p50_ms", "p95_ms", "p99_ms", "miss_ratio"):
                        row[k] = float(r[k])
                    rows.append(row)
                except (KeyError, TypeError, ValueError):
                    print(f"plot_fig7: skipping a bad row: {r}", file=sys.stderr)
    readings = {}
    for r in rows:
        readings.setdefault(r["scheduler"], []).append(r)
    print("| scheduler | rate q/s | achieved q/s | mean ms | p50 ms | p95 ms | p99 ms | deadline misses |")
    print("|---|---|---|---|---|---|---|---|")
    for s, rs in readings.items():
        for r in rs:
            print(f"| {s} | {r['rate']:.0f} | {r['achieved_qps']:.0f} | {r['mean_ms']:.2f} | {r['p50_ms']:.2f} | "
                  f"{r['p95_ms']:.2f} | {r['p99_ms']:.2f} | {100 * r['miss_ratio']:.2f}% |")
    print()
    # One reading a rate: the median of its readings by p99 (the upper median of an even count).
    by = {}
    pooled = []
    for s, rs in readings.items():
        at_rate = {}
        for r in rs:
            at_rate.setdefault(r["rate"], []).append(r)
        by[s] = []
        for rate in sorted(at_rate):
            group = sorted(at_rate[rate], key=lambda r: r["p99_ms"])
            by[s].append(group[len(group) // 2])
            if len(group) > 1:
                pooled.append((s, rate, group))
    if pooled:
        print("Repeated readings, pooled into their median p99 (the upper one of an even count):")
        for s, rate, group in pooled:
            print(f"- {s} at {rate:.0f} q/s: {len(group)} readings, p99 {group[0]['p99_ms']:.2f}-"
                  f"{group[-1]['p99_ms']:.2f} ms; used {group[len(group) // 2]['p99_ms']:.2f}")
        print()
    # A rate that is the highest its scheduler was run at is a lower bound of its limit: the sweep
    # ended (MAX_STEPS) before that scheduler saturated. Marked ">=".
    top = {s: max(r["rate"] for r in rs) for s, rs in by.items()}
    unsaturated = set()

    def cell(s, rate):
        if rate < top[s]:
            return f"{rate:.0f}"
        unsaturated.add(s)
        return f">= {rate:.0f}"

    print("| scheduler | sustained rate (<= 1% misses) | p99 ms there |")
    print("|---|---|---|")
    for s, rs in by.items():
        ok = [r for r in rs if r["miss_ratio"] <= 0.01]
        best = max(ok, key=lambda r: r["rate"]) if ok else None
        print(f"| {s} | {cell(s, best['rate'])} | {best['p99_ms']:.2f} |" if best else f"| {s} | - | - |")
    # Ding's comparison at equal tail latency: each scheduler's highest arrival rate whose p99 stays
    # under a bound (and misses at most 1%), and how that compares with the better of cpu and gpu.
    bounds = (10, 25, 50, 100, 250)
    print()
    print("| scheduler | " + " | ".join(f"rate at p99 <= {b} ms" for b in bounds) + " |")
    print("|---|" + "---|" * len(bounds))
    at = {}
    for s, rs in by.items():
        cells = []
        for b in bounds:
            ok = [r["rate"] for r in rs if r["p99_ms"] <= b and r["miss_ratio"] <= 0.01]
            at[(s, b)] = max(ok) if ok else 0
            cells.append(cell(s, at[(s, b)]) if ok else "-")
        print(f"| {s} | " + " | ".join(cells) + " |")
    # A scheduler's series is named MODE or MODE-LABEL (bench_hybrid.sh's LABEL, e.g. runs of one
    # host with other node flags): each hybrid and griffin series is set against the best of every
    # cpu and gpu series in the file.
    mode_of = {s: s.split("-", 1)[0] for s in by}
    singles = [s for s in by if mode_of[s] in ("cpu", "gpu")]
    for s in by:
        if mode_of[s] not in ("hybrid", "griffin") or not singles:
            continue
        cells = []
        for b in bounds:
            single_s = max(singles, key=lambda x: at.get((x, b), 0))
            single = at.get((single_s, b), 0)
            if single <= 0:
                cells.append("-")
                continue
            if at.get((s, b), 0) <= 0:  # no step of this series met the bound: below every ratio
                cells.append("none")
                continue
            # An unsaturated numerator makes the ratio a lower bound, an unsaturated denominator an
            # upper one; both: unknown either way.
            low = at[(s, b)] >= top[s]
            high = single >= top[single_s]
            mark = "?" if low and high else ">= " if low else "<= " if high else ""
            # Rounded down, so that a ratio just short of a target (1.498x) never reads as it (1.50x).
            cells.append(f"{mark}{math.floor(at[(s, b)] / single * 100 + 1e-9) / 100:.2f}x")
        print(f"| {s} / best single | " + " | ".join(cells) + " |")
    if unsaturated:
        print()
        print(">= : the sweep's last rate; " + ", ".join(sorted(unsaturated)) +
              " did not saturate within the sweep (raise MAX_STEPS to find the limit).")
    # p99 at the cpu scheduler's saturation rate (its highest rate with at most 1% misses).
    # A step's host stalls (bench/scripts/bench_hybrid.sh's host_jitter column), where recorded: a p99
    # next to one may be the host's, not the scheduler's.
    def stall(r):
        try:
            return float(r.get("host_stall_max_ms") or "-")
        except ValueError:
            return None

    def stall_note(r):
        x = stall(r)
        return f" (the host stalled up to {x:.1f} ms in that step)" if x else ""

    for c in (s for s in by if mode_of[s] == "cpu"):
        cpu_ok = [r for r in by[c] if r["miss_ratio"] <= 0.01]
        if not cpu_ok:
            continue
        sat = max(cpu_ok, key=lambda r: r["rate"])
        print()
        print(f"At the {c} scheduler's saturation rate ({sat['rate']:.0f} q/s, p99 {sat['p99_ms']:.2f} ms)"
              f"{stall_note(sat)}:")
        for s, rs in by.items():
            if mode_of[s] == "cpu":
                continue
            same = [r for r in rs if r["rate"] == sat["rate"]]
            if same:
                print(f"- {s}: p99 {same[0]['p99_ms']:.2f} ms, {sat['p99_ms'] / max(same[0]['p99_ms'], 1e-9):.1f}x lower"
                      f"{stall_note(same[0])}")
                continue
            # No step at that rate: the series' first step above it, a harder test (more load),
            # never one below.
            above = [r for r in rs if r["rate"] > sat["rate"]]
            if above:
                r = min(above, key=lambda r: r["rate"])
                print(f"- {s}: p99 {r['p99_ms']:.2f} ms at {r['rate']:.0f} q/s (its first step above), "
                      f"{sat['p99_ms'] / max(r['p99_ms'], 1e-9):.1f}x lower{stall_note(r)}")
    stalls = [stall(r) for r in rows if stall(r) is not None]
    if stalls:
        print()
        print(f"Host stalls (host_jitter: wake-ups more than 4 ms late): in {sum(1 for x in stalls if x > 0)} of "
              f"{len(stalls)} steps, the latest {max(stalls):.1f} ms.")
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("plot_fig7: matplotlib not found; no plot", file=sys.stderr)
        return 0
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.2))
    for ax, key, title in ((axes[0], "mean_ms", "mean latency"), (axes[1], "p99_ms", "p99 latency")):
        for s, rs in by.items():
            ax.plot([r["rate"] for r in rs], [r[key] for r in rs], marker="o", label=s)
        ax.set_xlabel("arrival rate (queries/s, Poisson)")
        ax.set_ylabel("ms")
        ax.set_yscale("log")
        ax.set_title(title)
        ax.grid(True, which="both", alpha=0.3)
        ax.legend()
    fig.suptitle("Latency vs arrival rate per scheduler (Ding et al. 2009 Fig. 7)")
    fig.tight_layout()
    fig.savefig(sys.argv[-1], dpi=110)
    print(f"\nplot: {sys.argv[-1]}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
