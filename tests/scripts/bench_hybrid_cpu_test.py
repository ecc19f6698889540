#!/usr/bin/env python3
"""bench/scripts/bench_hybrid.sh end to end under the cpu scheduler on a tiny shard: a real search-node,
search-integrator and searchctl loadgen from a bundle-shaped folder of the build's binaries. Its sweep
answers every query, its CSV row carries the node's, the integrator's and the load generator's CPU a
query as plausible microseconds, and STOP_P99_MS ends the sweep after the first step above it (one row where
MAX_STEPS allows three).

usage: bench_hybrid_cpu_test.py --source REPO --build BUILD_DIR        Exit status: 0 pass, 1 fail.
"""
import argparse
import csv
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from local_ports import free_port_block  # noqa: E402
from check_report import report  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--source", required=True)
    ap.add_argument("--build", required=True)
    a = ap.parse_args()
    build = os.path.abspath(a.build)
    script = os.path.join(a.source, "bench", "scripts", "bench_hybrid.sh")
    failures = []
    with tempfile.TemporaryDirectory() as d:
        bundle = os.path.join(d, "bundle")
        os.makedirs(os.path.join(bundle, "bin"))
        os.makedirs(os.path.join(bundle, "lib"))
        for rel in ("tools/searchctl/searchctl", "node/search-node", "integrator/search-integrator"):
            path = os.path.join(build, rel)
            if not os.access(path, os.X_OK):
                return report("bench_hybrid_cpu_test", [f"{path} not built"])
            os.symlink(path, os.path.join(bundle, "bin", os.path.basename(rel)))
        out = os.path.join(d, "out")
        env = dict(os.environ, BUNDLE=bundle, MODES="cpu", START_RATE="200", FACTOR="2", MAX_STEPS="3",
                   SECONDS_PER_RATE="1", WARMUP="1", CONNECTIONS="4", WARM_PASS="0", JITTER="0",
                   STOP_P99_MS="0.001", BASE_PORT=str(free_port_block()), OUT_DIR=out)
        p = subprocess.run([script, "5000", os.path.join(d, "work")], env=env, capture_output=True, text=True,
                           timeout=240)
        if p.returncode != 0:
            failures.append(f"exit {p.returncode}: {p.stderr[-2000:]}")
        rows = []
        try:
            with open(os.path.join(out, "fig7.csv")) as f:
                rows = list(csv.DictReader(f))
        except OSError as e:
            failures.append(f"fig7.csv: {e}; output: {p.stdout[-2000:]}")
        if len(rows) != 1:
            failures.append(f"{len(rows)} steps, expected 1 (STOP_P99_MS=0.001 after the first): {rows}")
        for r in rows:
            if r["scheduler"] != "cpu" or float(r["achieved_qps"]) <= 0 or float(r["miss_ratio"]) != 0:
                failures.append(f"step: {r}")
            for col in ("node_cpu_us_per_q", "integrator_cpu_us_per_q", "loadgen_cpu_us_per_q"):
                try:  # a query's CPU on this machine: microseconds, not ns nor clock ticks read as them
                    ok = 1 < float(r[col]) < 100000
                except ValueError:
                    ok = False
                if not ok:
                    failures.append(f"{col} = {r[col]!r}, not a plausible number of microseconds (1 to 100,000)")
    return report("bench_hybrid_cpu_test", failures)


if __name__ == "__main__":
    sys.exit(main())
