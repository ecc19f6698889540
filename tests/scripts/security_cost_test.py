#!/usr/bin/env python3
"""bench/scripts/security_cost.sh end to end on a tiny generated index: it starts the cluster plain,
with API keys, with CurveZMQ and secure (scripts/cluster.sh --secure: keys and certificates from
docker/secrets-init.sh, HTTPS, API keys, CURVE), drives each with searchctl loadgen (HTTPS with the
CA and the key for the secure one), every query answered, and prints each variant's integrator CPU
a query as a positive number, the host's CPU-home pollers' share of a CPU, and each ratio to plain;
a build directory without the binaries is refused with exit 2.

usage: security_cost_test.py --source REPO --build BUILD_DIR        Exit status: 0 pass, 1 fail.
"""
import argparse
import os
import random
import re
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from local_ports import port_free  # noqa: E402
from check_report import report  # noqa: E402

VARIANTS = ["plain", "apikey", "curve", "secure"]


def free_base():
    """A base port whose clusters' ports are free: variant i uses BASE+100i, +1, +10..+13 (2 shards)."""
    for _ in range(200):
        base = random.randrange(20000, 55000, 4)
        if all(port_free(base + 100 * i + j) for i in range(len(VARIANTS)) for j in (0, 1, 10, 11, 12, 13)):
            return base
    raise RuntimeError("no free ports")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--source", required=True)
    ap.add_argument("--build", required=True)
    a = ap.parse_args()
    script = os.path.join(a.source, "bench", "scripts", "security_cost.sh")
    failures = []
    with tempfile.TemporaryDirectory() as d:
        env = dict(os.environ, INDEX=os.path.join(d, "none"), DOCS="3000", RATE="100", SECONDS_PER_RUN="1",
                   WARMUP_SECONDS="1", REPEATS="1", CONNECTIONS="4", VARIANTS=" ".join(VARIANTS),
                   BASE_PORT=str(free_base()), OUT_DIR=d)
        p = subprocess.run([script, os.path.abspath(a.build)], env=env, capture_output=True, text=True, timeout=400,
                           cwd=a.source)
        if p.returncode != 0:
            failures.append(f"exit {p.returncode}: {p.stdout[-1500:]} {p.stderr[-2000:]}")
        for v in VARIANTS:
            m = re.search(rf"^{v} 1 cpu_us_per_query ([0-9.]+) .* queries (\d+) ok (\d+) misses \d+ errors (\d+) "
                          rf"qps [0-9.]+ host_poll_pct ([0-9.]+)$", p.stdout, re.M)
            if not m:
                failures.append(f"no round line for {v}: {p.stdout[-2000:]}")
                continue
            cpu, queries, ok, errors = float(m.group(1)), int(m.group(2)), int(m.group(3)), int(m.group(4))
            if not (cpu > 0 and queries > 0 and ok == queries and errors == 0):
                failures.append(f"{v}: cpu {cpu}, queries {queries}, ok {ok}, errors {errors}")
            # The host's CPU-home pollers' share of a CPU over the span: at most every CPU's.
            if not 0 <= float(m.group(5)) <= 100 * os.cpu_count():
                failures.append(f"{v}: host_poll_pct {m.group(5)}")
            if v != "plain" and not re.search(rf"^{v}/plain integrator CPU a query .*: [0-9.]+ ", p.stdout, re.M):
                failures.append(f"no {v}/plain ratio line: {p.stdout[-1500:]}")
        # The secure cluster really was secure: its run dir holds the keys, its integrator served HTTPS.
        run = os.path.join(d, "run-secure")
        for f in ("secrets/ca.pem", "secrets/integrator/api-keys", "secrets/node-0/curve.key", "api-key"):
            if not os.path.isfile(os.path.join(run, f)):
                failures.append(f"the secure run dir has no {f}")
        log = open(os.path.join(d, "cluster-secure.log")).read() if os.path.exists(os.path.join(d, "cluster-secure.log")) else ""
        if "secure: https://localhost:" not in log:
            failures.append(f"cluster.sh --secure did not say it serves HTTPS: {log[-1000:]}")
        q = subprocess.run([script, d], env=env, capture_output=True, text=True, timeout=60, cwd=a.source)
        if q.returncode != 2 or "not built" not in q.stderr:
            failures.append(f"a build without binaries: exit {q.returncode}, {q.stderr}")
    return report("security_cost_test", failures)


if __name__ == "__main__":
    sys.exit(main())
