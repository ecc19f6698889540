#!/usr/bin/env python3
"""Where a `searchctl loadgen --trace` run's tail comes from: its latency split into the wait for a
free connection (send_wait_ms, the load generator's own queue) and the server's part (the rest,
which includes opening a connection), and the bursts of arrivals that waited, with when they began
and ended and whether they reached the measured part of the run (BENCHMARKS.md, Fig. 7: a step's
start-up backlog outlasting its warm-up).

usage: loadgen_waits.py TRACE.csv[.gz]... [--min-wait-ms 10] [--gap-ms 50] [--bins SECONDS]
  A burst: arrivals that waited more than --min-wait-ms, each within --gap-ms of the one before.
  --bins S also prints the run's first S seconds in 10 ms bins of arrival time.
Prints, per trace, one summary line (measured queries; latency p50, p99, max; send wait p99; the
server's part p99, max), its bursts, and the bins. A row that does not parse is skipped and counted;
a file without the trace's columns is an error (exit 2). Traces with a release_lag_ms column (the
part of the wait before the load generator's loop released the arrival at all) also give its p99
and max in the summary, and each burst's largest lag: a burst whose lag is most of its wait is the
load generator behind its own schedule, not arrivals waiting for a free connection. Given several
such traces, a last line counts the traces with a burst whose own lag passed --min-wait-ms: in the
warm-up (and how many of those reached the measured part), and begun in the measured part.
"""
import argparse
import csv
import gzip
import sys

COLUMNS = ("arrival_s", "latency_ms", "send_wait_ms", "measured")


def pct(sorted_values, q):
    return sorted_values[min(len(sorted_values) - 1, int(q * len(sorted_values)))] if sorted_values else float("nan")


def read(path):
    opener = gzip.open if path.endswith(".gz") else open
    rows, bad = [], 0
    with opener(path, "rt", newline="") as f:
        r = csv.DictReader(f)
        missing = [c for c in COLUMNS if c not in (r.fieldnames or [])]
        if missing:
            raise ValueError(f"{path}: not a loadgen trace (no {', '.join(missing)} column)")
        has_lag = "release_lag_ms" in r.fieldnames
        for x in r:
            try:
                rows.append((float(x["arrival_s"]), float(x["latency_ms"]), float(x["send_wait_ms"]),
                             x["measured"].strip() == "1", float(x["release_lag_ms"]) if has_lag else None))
            except (TypeError, ValueError):
                bad += 1
    rows.sort()
    return rows, bad


def summarize(path, rows, bad, min_wait, gap, bins):
    meas = [x for x in rows if x[3]]
    lat = sorted(x[1] for x in meas)
    wait = sorted(x[2] for x in meas)
    server = sorted(x[1] - x[2] for x in meas)
    has_lag = bool(rows) and rows[0][4] is not None
    lag = sorted(x[4] for x in meas) if has_lag else []
    print(f"{path}: {len(meas)} measured; latency p50 {pct(lat, .5):.2f} p99 {pct(lat, .99):.2f} "
          f"max {lat[-1] if lat else float('nan'):.2f} ms; send wait p99 {pct(wait, .99):.2f} ms"
          + (f" (release lag p99 {pct(lag, .99):.2f} max {lag[-1] if lag else float('nan'):.2f} ms)" if has_lag else "")
          + f"; server p99 {pct(server, .99):.2f} max {server[-1] if server else float('nan'):.2f} ms"
          + (f"; {bad} rows skipped" if bad else ""))
    bursts = []
    for x in rows:
        if x[2] <= min_wait:
            continue
        if bursts and x[0] - bursts[-1][-1][0] <= gap:
            bursts[-1].append(x)
        else:
            bursts.append([x])
    lagged = set()  # where this trace's bursts of the load generator's own lag began: warm-up, crossing, measured
    for b in bursts:
        t0, t1 = b[0][0], b[-1][0]
        kind = "measured" if b[0][3] else ("crossing" if any(x[3] for x in b) else "warm-up")
        where = "warm-up, into the measured part" if kind == "crossing" else kind
        own = max(x[4] for x in b) if has_lag else 0.0
        if own > min_wait:
            lagged.add(kind)
        lag_note = f", the load generator's own lag up to {own:.1f} ms" if has_lag else ""
        print(f"  burst {t0:.3f}-{t1:.3f} s ({where}): {len(b)} arrivals waited, up to {max(x[2] for x in b):.1f} ms"
              + lag_note)
    if not bursts:
        print(f"  no arrival waited more than {min_wait:g} ms")
    if bins and rows:
        for i in range(int(round(bins / 0.01))):
            lo, hi = i * 0.01, (i + 1) * 0.01
            s = [x for x in rows if lo <= x[0] < hi]
            if not s:
                continue
            print(f"  {lo:.2f}-{hi:.2f} s: {len(s)} arrivals, wait max {max(x[2] for x in s):.1f} mean "
                  f"{sum(x[2] for x in s) / len(s):.1f} ms, server max {max(x[1] - x[2] for x in s):.1f} mean "
                  f"{sum(x[1] - x[2] for x in s) / len(s):.1f} ms")
    return lagged if has_lag else None


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("traces", nargs="+")
    ap.add_argument("--min-wait-ms", type=float, default=10.0)
    ap.add_argument("--gap-ms", type=float, default=50.0)
    ap.add_argument("--bins", type=float, default=0.0)
    a = ap.parse_args()
    tally = []
    for path in a.traces:
        try:
            rows, bad = read(path)
        except (OSError, ValueError) as e:
            print(f"loadgen_waits: {e}", file=sys.stderr)
            return 2
        lagged = summarize(path, rows, bad, a.min_wait_ms, a.gap_ms / 1000.0, a.bins)
        if lagged is not None:
            tally.append(lagged)
    if len(tally) > 1:
        warm = sum(1 for t in tally if t & {"warm-up", "crossing"})
        crossing = sum(1 for t in tally if "crossing" in t)
        measured = sum(1 for t in tally if "measured" in t)
        print(f"the load generator's own lag over {a.min_wait_ms:g} ms: in the warm-up of {warm} of {len(tally)} traces "
              f"({crossing} reaching the measured part), begun in the measured part of {measured}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
