#!/usr/bin/env python3
"""bench/scripts/serving_cost.sh end to end on a tiny shard: it starts a real search-node and
search-integrator, drives them with searchctl loadgen, answers every query and prints the
node's, the integrator's and the load generator's CPU per query as positive numbers; a build
directory without the binaries is refused with exit 2.

usage: serving_cost_test.py --source REPO --build BUILD_DIR        Exit status: 0 pass, 1 fail.
"""
import argparse
import json
import os
import re
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
    script = os.path.join(a.source, "bench", "scripts", "serving_cost.sh")
    failures = []
    with tempfile.TemporaryDirectory() as d:
        env = dict(os.environ, DOCS="5000", RATE="200", SECONDS_PER_RUN="1", CONNECTIONS="4",
                   BASE_PORT=str(free_port_block()), OUT_DIR=d)
        p = subprocess.run([script, os.path.abspath(a.build)], env=env, capture_output=True, text=True, timeout=240)
        if p.returncode != 0:
            failures.append(f"exit {p.returncode}: {p.stderr[-2000:]}")
        lines = p.stdout.strip().splitlines()
        summary = next((json.loads(l) for l in lines if l.startswith("{")), None)
        if summary is None or summary.get("queries", 0) <= 0 or summary.get("errors") != 0:
            failures.append("loadgen summary: " + p.stdout[-2000:])
        m = re.search(r"node ([0-9.]+), integrator ([0-9.]+), loadgen ([0-9.]+)", p.stdout)
        if not m or not all(float(x) > 0 for x in m.groups()):
            failures.append("cost line: " + p.stdout[-2000:])
        q = subprocess.run([script, d], env=env, capture_output=True, text=True, timeout=60)
        if q.returncode != 2 or "not built" not in q.stderr:
            failures.append(f"a build without binaries: exit {q.returncode}, {q.stderr}")
    return report("serving_cost_test", failures)


if __name__ == "__main__":
    sys.exit(main())
