#!/usr/bin/env python3
"""bench/scripts/bench_hybrid_runs.sh with a stand-in for bench_hybrid.sh (BENCH): every run line gets
its label, schedulers, the common node flags followed by its own, and its settings (which win over
the common ones); comments and blank lines are skipped; the runs' CSVs are merged under one
header into the table plot_fig7.py prints; PIN=halves pins the node and its clients to CPU lists,
PIN=node:1 the node to the first core and its clients to the others; an unreadable runs file and
an unknown PIN are refused with exit 2; LOADGEN_PIN=N gives the clients' last N CPUs to the load
generator (LOADGEN_CPUS), and a count that would leave the integrator none is refused; a run that found the host noisy (its OUT_DIR/noisy, from
bench_hybrid.sh's MAX_STEAL_PCT) ends the call, its rows kept and no later run started, and an
earlier call's noisy mark in the same OUT_DIR does not end a later call; REPEATS=N runs the file's
runs N times over in order, and a count below 1 is refused with exit 2.

usage: bench_hybrid_runs_test.py --source REPO        Exit status: 0 pass, 1 fail.
"""
import argparse
import glob
import os
import subprocess
import sys
import tempfile

from check_report import report

HEADER = "scheduler,rate,achieved_qps,mean_ms,p50_ms,p95_ms,p99_ms,miss_ratio,queries"

# The stand-in: one row per scheduler of MODES, rate START_RATE, and what it was given.
FAKE_BENCH = r"""#!/usr/bin/env bash
mkdir -p "$OUT_DIR"
echo "HEADER" > "$OUT_DIR/fig7.csv"
for m in $MODES; do echo "$m-$LABEL,$START_RATE,$START_RATE,1,1,2,3,0,100" >> "$OUT_DIR/fig7.csv"; done
echo "docs=$1 work=$2 node_args=[$NODE_ARGS] start=$START_RATE keep=$KEEP loadgen=${LOADGEN_CPUS:-} pins=${NODE_CPUS:-}/${CLIENT_CPUS:-}" > "$OUT_DIR/given.txt"
[ "$LABEL" = noisy ] && echo "host steal 9.00% at gpu-noisy 50 q/s is over MAX_STEAL_PCT=1.5" > "$OUT_DIR/noisy"
exit 0
""".replace("HEADER", HEADER)

RUNS = """# a comment
a|gpu hybrid|--tuning sched_cpu_cores=0|START_RATE=200

b|cpu||START_RATE=100 EXTRA=1
"""


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--source", required=True)
    args = ap.parse_args()
    script = os.path.join(args.source, "bench", "scripts", "bench_hybrid_runs.sh")
    problems = []
    with tempfile.TemporaryDirectory() as tmp:
        bench = os.path.join(tmp, "fake_bench.sh")
        with open(bench, "w") as f:
            f.write(FAKE_BENCH)
        os.chmod(bench, 0o755)
        runs = os.path.join(tmp, "runs.txt")
        with open(runs, "w") as f:
            f.write(RUNS)
        out = os.path.join(tmp, "out")
        env = dict(os.environ, BENCH=bench, OUT_DIR=out, NODE_ARGS="--log-level info", START_RATE="50",
                   PIN="halves", MPLBACKEND="Agg")
        env.pop("NODE_CPUS", None)
        r = subprocess.run(["bash", script, runs, "1000", os.path.join(tmp, "work")], capture_output=True,
                           text=True, env=env, timeout=120)
        if r.returncode != 0:
            problems.append(f"exit status {r.returncode}: {r.stdout} {r.stderr}")
        merged = open(os.path.join(out, "fig7.csv")).read().splitlines() if os.path.exists(
            os.path.join(out, "fig7.csv")) else []
        if merged[:1] != [HEADER] or merged.count(HEADER) != 1:
            problems.append(f"the merged CSV should have one header first: {merged}")
        rows = sorted(line.split(",")[0] + "@" + line.split(",")[1] for line in merged[1:])
        if rows != ["cpu-b@100", "gpu-a@200", "hybrid-a@200"]:
            problems.append(f"merged rows {rows}, expected cpu-b@100, gpu-a@200, hybrid-a@200")
        given = {}
        for n in (1, 2):
            path = os.path.join(out, f"r{n}", "given.txt")
            given[n] = open(path).read() if os.path.exists(path) else ""
        if "node_args=[--log-level info --tuning sched_cpu_cores=0]" not in given[1]:
            problems.append("run 1 should get the common node flags, then its own: " + given[1])
        if "node_args=[--log-level info ]" not in given[2] or "start=100" not in given[2]:
            problems.append("run 2 should get the common node flags and its START_RATE: " + given[2])
        for n in (1, 2):
            if "docs=1000" not in given[n] or "keep=1" not in given[n]:
                problems.append(f"run {n} should get DOCS and KEEP=1: {given[n]}")
            pins = given[n].split("pins=")[-1].strip()
            if pins.startswith("/") or pins.endswith("/"):
                problems.append(f"run {n} should be pinned (PIN=halves): {pins}")
        if os.path.exists(os.path.join(out, "r3")):
            problems.append("a comment or blank line was taken for a run")
        if "| hybrid-a / best single |" not in r.stdout:
            problems.append("plot_fig7.py's comparison of the merged runs is missing: " + r.stdout)
        # PIN=node:1: the first whole core for the node (its thread siblings), the other CPUs for the
        # clients (or, on a one-core machine, the same core, as with halves).
        allowed = sorted(int(d[len("/sys/devices/system/cpu/cpu"):].split("/")[0])
                         for d in glob.glob("/sys/devices/system/cpu/cpu[0-9]*/topology/thread_siblings_list"))
        one = os.path.join(tmp, "one.txt")
        with open(one, "w") as f:
            f.write("c|cpu||START_RATE=100\n")
        r1 = subprocess.run(["bash", script, one, "1000", os.path.join(tmp, "work")], capture_output=True, text=True,
                            env=dict(env, PIN="node:1", OUT_DIR=os.path.join(tmp, "out1")), timeout=120)
        given1 = open(os.path.join(tmp, "out1", "r1", "given.txt")).read() if r1.returncode == 0 else ""
        pins = given1.split("pins=")[-1].strip().split("/")
        if r1.returncode != 0 or len(pins) != 2 or not pins[0] or not pins[1]:
            problems.append(f"PIN=node:1 should pin the node and its clients: {r1.returncode} {given1} {r1.stderr}")
        else:
            node = [int(c) for c in pins[0].split(",")]
            clients = [int(c) for c in pins[1].split(",")]
            with open(f"/sys/devices/system/cpu/cpu{allowed[0]}/topology/thread_siblings_list") as f:
                first_core = set()
                for part in f.read().strip().split(","):
                    a, _, b = part.partition("-")
                    first_core.update(range(int(a), int(b or a) + 1))
            if set(node) != first_core:
                problems.append(f"PIN=node:1 should give the node the first core {sorted(first_core)}: {pins}")
            rest = [c for c in allowed if c not in first_core] or sorted(first_core)
            if clients != rest:
                problems.append(f"PIN=node:1 should give the clients {rest}: {pins}")
        # LOADGEN_PIN=2 over clients 4-7: the load generator on the last two, 6 and 7.
        lg_env = dict(env, NODE_CPUS="0,1,2,3", CLIENT_CPUS="4,5,6,7", LOADGEN_PIN="2", OUT_DIR=os.path.join(tmp, "outl"))
        lg_env.pop("PIN", None)
        rl = subprocess.run(["bash", script, one, "1000", os.path.join(tmp, "work")], capture_output=True, text=True,
                            env=lg_env, timeout=120)
        given_l = open(os.path.join(tmp, "outl", "r1", "given.txt")).read() if rl.returncode == 0 else ""
        if rl.returncode != 0 or "loadgen=6,7 pins=0,1,2,3/4,5,6,7" not in given_l:
            problems.append(f"LOADGEN_PIN=2 should give the load generator CPUs 6,7: {rl.returncode} {given_l} {rl.stderr}")
        rl4 = subprocess.run(["bash", script, one, "1000", os.path.join(tmp, "work")], capture_output=True, text=True,
                             env=dict(lg_env, LOADGEN_PIN="4"), timeout=60)
        if rl4.returncode != 2 or "LOADGEN_PIN must be a count below" not in rl4.stderr:
            problems.append(f"LOADGEN_PIN leaving the integrator no CPU should exit 2: {rl4.returncode} {rl4.stderr}")
        # A noisy host: the run that saw it ends the call; its rows are kept, no later run starts.
        noisy_runs = os.path.join(tmp, "noisy.txt")
        with open(noisy_runs, "w") as f:
            f.write("noisy|gpu||\nlater|gpu||\n")
        out_n = os.path.join(tmp, "outn")
        rn = subprocess.run(["bash", script, noisy_runs, "1000", os.path.join(tmp, "work")], capture_output=True,
                            text=True, env=dict(env, OUT_DIR=out_n), timeout=120)
        merged_n = open(os.path.join(out_n, "fig7.csv")).read() if os.path.exists(os.path.join(out_n, "fig7.csv")) else ""
        if rn.returncode != 0 or "gpu-noisy" not in merged_n or os.path.exists(os.path.join(out_n, "r2")):
            problems.append(f"a noisy run should end the call with its rows kept and no run after it: {rn.returncode} "
                            f"{merged_n!r} r2 exists: {os.path.exists(os.path.join(out_n, 'r2'))}")
        if "no later run" not in rn.stdout or "MAX_STEAL_PCT" not in rn.stdout:
            problems.append("a noisy run's end should say why: " + rn.stdout)
        # The same OUT_DIR again (a warm host's next call) with quiet runs: the earlier call's noisy
        # mark in r1 must not end this one.
        with open(noisy_runs, "w") as f:
            f.write("quiet|gpu||\nlater|gpu||\n")
        rq = subprocess.run(["bash", script, noisy_runs, "1000", os.path.join(tmp, "work")], capture_output=True,
                            text=True, env=dict(env, OUT_DIR=out_n), timeout=120)
        if rq.returncode != 0 or not os.path.exists(os.path.join(out_n, "r2", "given.txt")) or "no later run" in rq.stdout:
            problems.append(f"an earlier call's noisy mark ended a later call: {rq.returncode} {rq.stdout}")
        # REPEATS=2: the file's runs in order, twice (comments and blank lines still skipped), and
        # plot_fig7.py pools each series' two readings of a rate.
        out_r = os.path.join(tmp, "outr")
        rr = subprocess.run(["bash", script, runs, "1000", os.path.join(tmp, "work")], capture_output=True,
                            text=True, env=dict(env, OUT_DIR=out_r, REPEATS="2"), timeout=120)
        order = [open(os.path.join(out_r, f"r{n}", "given.txt")).read().split("start=")[1].split()[0]
                 if os.path.exists(os.path.join(out_r, f"r{n}", "given.txt")) else "-" for n in (1, 2, 3, 4)]
        if rr.returncode != 0 or order != ["200", "100", "200", "100"] or os.path.exists(os.path.join(out_r, "r5")):
            problems.append(f"REPEATS=2 should run a, b, a, b: {rr.returncode} {order} {rr.stderr}")
        if "- cpu-b at 100 q/s: 2 readings" not in rr.stdout or "- hybrid-a at 200 q/s: 2 readings" not in rr.stdout:
            problems.append("REPEATS=2: the repeated readings should be pooled in the table: " + rr.stdout)
        badrep = subprocess.run(["bash", script, one], capture_output=True, text=True, env=dict(env, REPEATS="0"),
                                timeout=60)
        if badrep.returncode != 2 or "REPEATS is a count" not in badrep.stderr:
            problems.append(f"REPEATS=0 should exit 2 with a message: {badrep.returncode} {badrep.stderr}")
        badpin = subprocess.run(["bash", script, one], capture_output=True, text=True, env=dict(env, PIN="node:x"),
                                timeout=60)
        if badpin.returncode != 2 or "PIN is halves or node:N" not in badpin.stderr:
            problems.append(f"an unknown PIN should exit 2 with a message: {badpin.returncode} {badpin.stderr}")
        bad = subprocess.run(["bash", script, os.path.join(tmp, "missing.txt")], capture_output=True, text=True,
                             env=env, timeout=60)
        if bad.returncode != 2 or "cannot read" not in bad.stderr:
            problems.append(f"a missing runs file should exit 2 with a message: {bad.returncode} {bad.stderr}")
    return report("bench_hybrid_runs_test", problems)


if __name__ == "__main__":
    sys.exit(main())
