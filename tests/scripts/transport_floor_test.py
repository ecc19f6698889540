#!/usr/bin/env python3
"""bench/host/transport_floor end to end: it forks real echo servers and measures real round trips
over ZeroMQ (TCP and IPC) and a plain TCP socket; each mode and rate gives one row of positive,
ordered percentiles, also beside --idle-spinner (or, where the kernel refuses SCHED_IDLE, exit 2
saying so); bad flags exit 2 with the reason and print no row.

usage: transport_floor_test.py --tool PATH_TO_transport_floor        Exit status: 0 pass, 1 fail.
"""
import argparse
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from check_report import Checks, report  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tool", required=True)
    tool = ap.parse_args().tool
    check = Checks()
    p = subprocess.run([tool, "--seconds", "0.3", "--rates", "200,2000"], capture_output=True, text=True, timeout=60)
    check(p.returncode == 0, f"exit {p.returncode}: {p.stderr}")
    lines = p.stdout.strip().splitlines()
    check(bool(lines) and lines[0].split()[:4] == ["mode", "rate", "trips", "p50_us"], "header: " + p.stdout)
    rows = [l.split() for l in lines[1:]]
    check([(r[0], r[1]) for r in rows] == [(m, r) for m in ("zmq-tcp", "zmq-ipc", "tcp") for r in ("200", "2000")],
          "one row a mode and rate, in order: " + p.stdout)
    for r in rows:
        trips, p50, p90, p99, mean = int(r[2]), *map(float, r[3:7])
        check(trips > 0, f"{r[0]} at {r[1]}: no round trips")
        check(0 < p50 <= p90 <= p99, f"{r[0]} at {r[1]}: percentiles {p50} {p90} {p99}")
        check(mean > 0, f"{r[0]} at {r[1]}: mean {mean}")
    sp = subprocess.run([tool, "--idle-spinner", "--modes", "tcp", "--rates", "500", "--seconds", "0.3"],
                        capture_output=True, text=True, timeout=60)
    if sp.returncode == 2:
        check("SCHED_IDLE refused" in sp.stderr and "p50_us" not in sp.stdout, f"--idle-spinner: {sp.stderr!r}")
    else:
        srows = [l.split() for l in sp.stdout.strip().splitlines()[1:]]
        check(sp.returncode == 0 and len(srows) == 1 and srows[0][:2] == ["tcp", "500"] and int(srows[0][2]) > 0 and
              0 < float(srows[0][3]) <= float(srows[0][5]), f"--idle-spinner: exit {sp.returncode}, {sp.stdout!r}")
    for bad, says in ((["--modes", "udp"], "unknown mode udp"), (["--rates", "0"], "--rates"),
                      (["--seconds"], "needs a value"), (["--bytes", "2000000"], "--bytes")):
        q = subprocess.run([tool, *bad], capture_output=True, text=True, timeout=30)
        check(q.returncode == 2 and says in q.stderr and "p50_us" not in q.stdout,
              f"{bad}: exit {q.returncode}, stderr {q.stderr!r}, stdout {q.stdout!r}")
    return report("transport_floor_test", check.failures, p.stdout)


if __name__ == "__main__":
    sys.exit(main())
