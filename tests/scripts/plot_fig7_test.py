#!/usr/bin/env python3
"""bench/scripts/plot_fig7.py on a made-up sweep: every well-formed row is kept (diagnostic columns may
hold "-"), a row whose latency is not a number is skipped with a message, and the summary tables
report the right sustained rates, '>=' bounds, hybrid/best-single ratios and p99 ratios, with
the host stalls that bench_hybrid.sh records named where they fall; series named MODE-LABEL are
set against the best cpu or gpu series of the file; repeated readings of a rate, in one CSV or
in several given together, are pooled into their median p99.

usage: plot_fig7_test.py --source REPO        Exit status: 0 pass, 1 fail.
"""
import argparse
import os
import subprocess
import sys
import tempfile

from check_report import report

HEADER = ("scheduler,rate,achieved_qps,mean_ms,p50_ms,p95_ms,p99_ms,miss_ratio,queries,"
          "host_steal_pct,host_stall_max_ms,host_resolve_ms")
ROWS = [
    # cpu saturates at 200 q/s (300 misses half its queries).
    # host_stall_max_ms: a number, or "-" where the sweep ran without host_jitter.
    "cpu,100,100,5,4,20,40,0,400,0.1,0.0,-",
    "cpu,200,200,9,8,60,80,0,800,0.2,0.0,-",
    "cpu,300,290,400,390,600,700,0.5,1200,0.0,-,-",
    # gpu never saturates within the sweep: its 400 is a lower bound.
    "gpu,100,100,1,1,2,3,0,400,0.0,0.0,0.1",
    "gpu,200,200,1,1,2,4,0,800,0.0,0.0,0.1",
    "gpu,400,400,2,2,3,8,0,1600,0.0,4.5,0.1",
    # hybrid holds 200, fails at 400.
    "hybrid,100,100,1,1,2,2,0,400,0.0,0.0,0.1",
    "hybrid,200,200,1,1,3,5,0,800,0.0,6.5,-",
    "hybrid,400,380,300,300,500,520,0.2,1600,1.5,0.0,-",
    # Not a number where the tables need one: skipped, with a message.
    "hybrid,500,480,x,300,500,520,0.2,1600,1.5,0.0,-",
]


def run_plot(script, problems, case, *parts):
    """plot_fig7.py over one CSV per part (lists of rows under HEADER): its CompletedProcess. A
    non-zero exit status goes into problems, named by case."""
    with tempfile.TemporaryDirectory() as tmp:
        paths = []
        for i, rows in enumerate(parts):
            paths.append(os.path.join(tmp, f"fig7-{i}.csv"))
            with open(paths[-1], "w") as f:
                f.write(HEADER + "\n" + "\n".join(rows) + "\n")
        r = subprocess.run([sys.executable, script, *paths, os.path.join(tmp, "fig7.png")], capture_output=True,
                           text=True, env=dict(os.environ, MPLBACKEND="Agg"), timeout=60)
    if r.returncode != 0:
        problems.append(f"{case}: exit status {r.returncode}: {r.stderr}")
    return r


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--source", required=True)
    args = ap.parse_args()
    script = os.path.join(args.source, "bench", "scripts", "plot_fig7.py")
    problems = []
    r = run_plot(script, problems, "plain", ROWS)
    out, err = r.stdout, r.stderr
    if err.count("skipping a bad row") != 1 or "'rate': '500'" not in err:
        problems.append("expected exactly the rate-500 hybrid row to be skipped; stderr: " + err)
    for rate_row in ("| cpu | 100 |", "| cpu | 300 |", "| gpu | 400 |", "| hybrid | 200 |", "| hybrid | 400 |"):
        if rate_row not in out:
            problems.append(f"row {rate_row} missing from the table")
    for want in ("| cpu | 200 | 80.00 |", "| gpu | >= 400 | 8.00 |", "| hybrid | 200 | 5.00 |"):
        if want not in out:
            problems.append(f"sustained-rate line {want!r} missing")
    # At p99 <= 10 ms: gpu >= 400 (unsaturated), hybrid 200, so hybrid / best single is an upper
    # bound of 0.50x.
    if "| hybrid / best single | <= 0.50x |" not in out:
        problems.append("hybrid / best single at p99 <= 10 ms should read '<= 0.50x'")
    if "At the cpu scheduler's saturation rate (200 q/s, p99 80.00 ms):" not in out:
        problems.append("cpu saturation line missing")
    if "- gpu: p99 4.00 ms, 20.0x lower\n" not in out or "- hybrid: p99 5.00 ms, 16.0x lower" not in out:
        problems.append("p99 ratios at cpu's saturation rate wrong")
    # A host stall in a compared step is named beside it; the steps with stalls are summed up (the
    # "-" step is not a step with a recording).
    if "- hybrid: p99 5.00 ms, 16.0x lower (the host stalled up to 6.5 ms in that step)" not in out:
        problems.append("the host stall in hybrid's step at cpu's saturation rate is not named")
    if "(200 q/s, p99 80.00 ms):" not in out:
        problems.append("cpu's step had no host stall, yet one is named")
    if "Host stalls (host_jitter: wake-ups more than 4 ms late): in 2 of 8 steps, the latest 6.5 ms." not in out:
        problems.append("host stall summary wrong")
    # Labeled series (bench_hybrid.sh's LABEL: runs of one host with other node flags, merged):
    # every hybrid and griffin series is set against the best cpu or gpu series of the file, and
    # the p99s at each cpu series' saturation rate are compared.
    labeled = [
        "cpu-a,100,100,5,4,20,40,0,400,0.1,0.0,-",
        "cpu-a,200,200,400,390,600,700,0.5,800,0.0,0.0,-",
        "gpu-a,100,100,1,1,2,3,0,400,0.0,0.0,0.1",
        "gpu-a,200,200,1,1,2,4,0,800,0.0,0.0,0.1",
        "gpu-a,300,300,400,390,600,700,0.5,1200,0.0,0.0,0.1",
        "gpu-b,100,100,1,1,2,3,0,400,0.0,0.0,0.1",
        "gpu-b,200,200,400,390,600,700,0.5,800,0.0,0.0,0.1",
        "hybrid-a,100,100,1,1,2,2,0,400,0.0,0.0,0.1",
        "hybrid-a,200,200,1,1,2,2,0,800,0.0,0.0,0.1",
        "hybrid-a,300,300,1,1,2,2,0,1200,0.0,0.0,0.1",
        "hybrid-a,400,390,400,390,600,700,0.5,1600,0.0,0.0,0.1",
        "griffin-c,100,100,1,1,2,2,0,400,0.0,0.0,0.1",
        "griffin-c,200,200,400,390,600,700,0.5,800,0.0,0.0,0.1",
        # No step at cpu-a's saturation rate (100): compared at its first step above, 150.
        "griffin-d,80,80,1,1,2,1,0,400,0.0,0.0,0.1",
        "griffin-d,150,150,1,1,2,4,0,400,0.0,0.0,0.1",
        "griffin-d,250,250,400,390,600,700,0.5,800,0.0,0.0,0.1",
        # No step within any bound: "none", not a ratio of 0.
        "griffin-e,100,100,400,390,600,700,0.5,400,0.0,0.0,0.1",
        # 299.6 against gpu-a's 200: 1.498x, which must not read as 1.50x.
        "hybrid-f,100,100,1,1,2,2,0,400,0.0,0.0,0.1",
        "hybrid-f,299.6,299.6,1,1,2,2,0,1200,0.0,0.0,0.1",
        "hybrid-f,400,390,400,390,600,700,0.5,1600,0.0,0.0,0.1",
    ]
    lout = run_plot(script, problems, "labeled", labeled).stdout
    # Best single at every bound: gpu-a, 200 q/s (gpu-b holds only 100); hybrid-a holds 300.
    if "| hybrid-a / best single | 1.50x | 1.50x | 1.50x | 1.50x | 1.50x |" not in lout:
        problems.append("labeled: hybrid-a against the best of cpu-a, gpu-a and gpu-b should read 1.50x")
    if "| griffin-c / best single | 0.50x | 0.50x | 0.50x | 0.50x | 0.50x |" not in lout:
        problems.append("labeled: griffin-c against the best single series should read 0.50x")
    if "| hybrid-f / best single | 1.49x | 1.49x | 1.49x | 1.49x | 1.49x |" not in lout:
        problems.append("labeled: a ratio of 1.498x should read 1.49x (rounded down), not 1.50x")
    if "| griffin-e / best single | none | none | none | none | none |" not in lout:
        problems.append("labeled: a series with no step within a bound should read 'none' there")
    if ("At the cpu-a scheduler's saturation rate (100 q/s, p99 40.00 ms):" not in lout or
            "- hybrid-a: p99 2.00 ms, 20.0x lower" not in lout or "- gpu-b: p99 3.00 ms, 13.3x lower" not in lout):
        problems.append("labeled: the p99s at cpu-a's saturation rate are missing or wrong")
    if "- griffin-d: p99 4.00 ms at 150 q/s (its first step above), 10.0x lower" not in lout:
        problems.append("labeled: a series without a step at cpu-a's saturation rate is not compared at its next")
    if "- cpu-a:" in lout:
        problems.append("labeled: a cpu series is compared with itself")
    # Repeated readings (the same series run again, in one CSV or in several): each rate's
    # readings are pooled into their median p99 (the upper one of an even count), not the best.
    first = [
        "gpu-r,100,100,1,1,2,3,0,400,0.0,0.0,0.1",
        "gpu-r,200,200,1,1,2,4,0,800,0.0,0.0,0.1",
        "gpu-r,300,300,1,1,2,5,0,1200,0.0,0.0,0.1",
        "hybrid-r,400,400,1,1,2,12,0,1600,0.0,0.0,0.1",
    ]
    second = [
        "gpu-r,200,200,1,1,2,40,0,800,0.0,0.0,0.1",
        "gpu-r,200,200,1,1,2,9,0,800,0.0,0.0,0.1",
        "gpu-r,300,300,1,1,2,30,0,1200,0.0,5.0,0.1",
        "hybrid-r,400,400,1,1,2,8,0,1600,0.0,0.0,0.1",
        "hybrid-r,400,400,1,1,2,9,0,1600,0.0,0.0,0.1",
        "hybrid-r,500,500,400,390,600,700,0.5,2000,0.0,0.0,0.1",
    ]
    rout = run_plot(script, problems, "repeated", first, second).stdout
    if rout.count("| gpu-r | 200 | 200 | 1.00 |") != 3 or rout.count("| hybrid-r | 400 | 400 | 1.00 |") != 3:
        problems.append("repeated: every reading of both files should be listed")
    for want in ("- gpu-r at 200 q/s: 3 readings, p99 4.00-40.00 ms; used 9.00",
                 "- gpu-r at 300 q/s: 2 readings, p99 5.00-30.00 ms; used 30.00",
                 "- hybrid-r at 400 q/s: 3 readings, p99 8.00-12.00 ms; used 9.00"):
        if want not in rout:
            problems.append(f"repeated: pooled line {want!r} missing")
    # At p99 <= 10 and 25 ms gpu-r holds 200 (300's median is 30 ms; its best reading, 5 ms, must
    # not count) and hybrid-r 400 (median 9 ms): 2.00x. From 50 ms gpu-r holds 300: 1.33x.
    if "| gpu-r | 200 | 200 | >= 300 | >= 300 | >= 300 |" not in rout:
        problems.append("repeated: gpu-r's rates per bound should come from the median readings")
    if "| hybrid-r / best single | 2.00x | 2.00x | <= 1.33x | <= 1.33x | <= 1.33x |" not in rout:
        problems.append("repeated: hybrid-r / best single should read 2.00x at 10-25 ms and <= 1.33x above")
    if "in 1 of 10 steps" not in rout:
        problems.append("repeated: the host stall summary should count every reading")
    return report("plot_fig7_test", problems, out, lout + rout)


if __name__ == "__main__":
    sys.exit(main())
