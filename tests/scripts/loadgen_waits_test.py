#!/usr/bin/env python3
"""bench/scripts/loadgen_waits.py on a made-up loadgen trace whose bursts are known by hand.

Warm-up 0-1 s, measured 1-3 s. Arrivals every 10 ms; those at 0.00-0.04 s waited 80, 60, 40,
20 and 5 ms (one burst of four over 10 ms, in the warm-up), those at 0.95-1.02 s waited 30 ms
(a burst that reaches the measured part), the one at 1.50 s waited 12 ms (a measured burst of
one). Every answer's server part is 2 ms, but at 1.30 s it is 7 ms. One row does not parse.

usage: loadgen_waits_test.py --source REPO        Exit status: 0 pass, 1 fail.
"""
import gzip
import os
import tempfile

from check_report import Checks, report, run, script_under_test

HEADER = "arrival_s,latency_ms,http,ok,measured,query,send_wait_ms\n"


def trace_rows():
    waits = {0: 80, 1: 60, 2: 40, 3: 20, 4: 5, 95: 30, 96: 30, 97: 30, 98: 30, 99: 30, 100: 30, 101: 30, 102: 30,
             150: 12}
    rows = []
    for i in range(300):
        t = i / 100
        w = waits.get(i, 0.1)
        server = 7.0 if i == 130 else 2.0
        rows.append(f"{t:.6f},{w + server:.3f},200,1,{1 if t >= 1.0 else 0},{i % 7 + 1},{w:.3f}")
    rows.insert(50, "0.5,oops,200,1,0,1,0")
    return rows


def main():
    script = script_under_test("loadgen_waits.py")
    check = Checks()
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "trace.csv.gz")
        with gzip.open(path, "wt") as f:
            f.write(HEADER + "\n".join(trace_rows()) + "\n")
        rc, out, err = run(script, path, "--bins", "0.02")
        check(rc == 0, f"exit status {rc}: {err}")
        lines = out.splitlines()
        summary = lines[0] if lines else ""
        check("200 measured" in summary, f"measured count: {summary}")
        check("server p99 2.00 max 7.00 ms" in summary, f"server part: {summary}")
        check("send wait p99 30.00 ms" in summary, f"send wait p99: {summary}")
        check("1 rows skipped" in summary, f"skipped row: {summary}")
        bursts = [x.strip() for x in lines if x.strip().startswith("burst")]
        check(bursts == ["burst 0.000-0.030 s (warm-up): 4 arrivals waited, up to 80.0 ms",
                         "burst 0.950-1.020 s (warm-up, into the measured part): 8 arrivals waited, up to 30.0 ms",
                         "burst 1.500-1.500 s (measured): 1 arrivals waited, up to 12.0 ms"], f"bursts: {bursts}")
        binned = [x.strip() for x in lines if x.strip().startswith("0.0")]
        check(len(binned) == 2 and binned[0].startswith("0.00-0.01 s: 1 arrivals, wait max 80.0"), f"bins: {binned}")

        # A higher threshold leaves only the warm-up's first burst (80, 60, 40 ms); a file that is not a trace exits 2.
        rc, out, _ = run(script, path, "--min-wait-ms", "35")
        check(rc == 0 and out.count("burst") == 1 and "3 arrivals waited, up to 80.0 ms" in out, f"--min-wait-ms: {out}")
        other = os.path.join(d, "other.csv")
        with open(other, "w") as f:
            f.write("a,b\n1,2\n")
        rc, _, err = run(script, other)
        check(rc == 2 and "not a loadgen trace" in err, f"a file that is not a trace: {rc} {err}")

        # With the release_lag_ms column: a burst where the load generator's loop ran late (lag =
        # wait) is told apart from one that waited for a connection (lag 0).
        lagged = os.path.join(d, "lagged.csv")
        rows = []
        for i in range(200):
            t = 1.0 + i / 100
            w, lag = (25.0, 25.0) if 20 <= i < 23 else (15.0, 0.0) if 120 <= i < 122 else (0.1, 0.05)
            rows.append(f"{t:.6f},{w + 2:.3f},200,1,1,1,{w:.3f},{lag:.3f}")
        with open(lagged, "w") as f:
            f.write(HEADER.rstrip("\n") + ",release_lag_ms\n" + "\n".join(rows) + "\n")
        rc, out, err = run(script, lagged)
        lines = out.splitlines()
        check(rc == 0 and "(release lag p99 25.00 max 25.00 ms)" in lines[0], f"lag summary: {rc} {err} {out}")
        bursts = [x.strip() for x in lines if x.strip().startswith("burst")]
        check(bursts == ["burst 1.200-1.220 s (measured): 3 arrivals waited, up to 25.0 ms, "
                         "the load generator's own lag up to 25.0 ms",
                         "burst 2.200-2.210 s (measured): 2 arrivals waited, up to 15.0 ms, "
                         "the load generator's own lag up to 0.0 ms"], f"lag bursts: {bursts}")
        # A trace without the column prints no lag (the first trace's summary, above).
        check("release lag" not in summary, f"no lag column: {summary}")
        check("own lag over" not in out, f"one trace, no tally: {out}")

        # Several traces with the column: a last line counts those whose own-lag bursts began in the
        # warm-up (one of them reaching the measured part) and in the measured part. The first has a
        # lag burst in its warm-up only, the second one that crosses into the measured part, the
        # third the measured one above (lagged.csv), the fourth none (its only burst is a wait for a
        # connection, lag 0); the trace without the column is left out of the count.
        def lag_trace(name, bursts):
            rows = []
            for i in range(300):
                t = i / 100
                w, lag = bursts.get(i, (0.1, 0.05))
                rows.append(f"{t:.6f},{w + 2:.3f},200,1,{1 if t >= 1.0 else 0},1,{w:.3f},{lag:.3f}")
            out_path = os.path.join(d, name)
            with open(out_path, "w") as f:
                f.write(HEADER.rstrip("\n") + ",release_lag_ms\n" + "\n".join(rows) + "\n")
            return out_path
        early = lag_trace("early.csv", {i: (40.0, 40.0) for i in range(30, 33)})
        crossing = lag_trace("crossing.csv", {i: (30.0, 30.0) for i in range(98, 103)})
        waiting = lag_trace("waiting.csv", {i: (20.0, 0.0) for i in range(150, 152)})
        rc, out, err = run(script, early, crossing, lagged, waiting, path)
        last = out.splitlines()[-1] if out else ""
        check(rc == 0 and last == "the load generator's own lag over 10 ms: in the warm-up of 2 of 4 traces "
              "(1 reaching the measured part), begun in the measured part of 1", f"tally: {rc} {err} {last}")
    return report("loadgen_waits_test", check.failures, out)


if __name__ == "__main__":
    raise SystemExit(main())
