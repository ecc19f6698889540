#!/usr/bin/env python3
"""bench/sched/sched_sim on made-up per-query files whose limits are known by hand.

100 queries each cost the GPU 10 us a copy and the CPU 100 us. With --gpu-qps 5000 the device
alone sustains 5,000 q/s (200 us of work a query after scaling), so gpu must sustain at least
4,000 q/s and fail by 6,000; two CPU cores add 2 / 100 us = 20,000 q/s, so hybrid, whose idle
CPU workers steal from the GPU's queue, must sustain well over 1.5x gpu's rate. With the load
generator's loop closed (--connections 2 --path-us 1000) each request holds one of two
connections for over 1 ms, so gpu cannot sustain 2,000 q/s and its latency is over 1 ms. Exact
predictions (--noise 0) and the same seed make the run deterministic. A missing file, a file
without the us column and a bad --factor exit non-zero with a message. With --cpu-column us_first
the CPU's times come from that column (1,000 us here), so hybrid sustains about 7,000 q/s. With
--cpu-bias the CPU's predictions shrink: a cheap bound then takes queries it would not. With
--max-batch 1 and a batch latency of 1 ms, two dispatchers finish at most 2 / 1.2 ms = 1,667 jobs a
second (a 2 s step's backlog stays within the 500 ms deadline up to about 2,000 q/s), where batches
of up to 64 sustain 4,000 or more.

usage: sched_sim_test.py --sim PATH        Exit status: 0 pass, 1 fail.
"""
import argparse
import os
import re
import subprocess
import sys
import tempfile

from check_report import report

HEADER = "query,terms,shortest,second,total,us,postings_decoded,hits\n"


def write(path, us):
    with open(path, "w") as f:
        f.write(HEADER)
        for q in range(1, 101):
            f.write(f"{q},2,10,20,30,{us},30,10\n")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--sim", required=True)
    a = ap.parse_args()
    failures = []
    h_warm = None
    with tempfile.TemporaryDirectory() as d:
        cpu, gpu = os.path.join(d, "cpu.csv"), os.path.join(d, "gpu.csv")
        write(cpu, 100)
        write(gpu, 10)
        p = subprocess.run([a.sim, "--cpu", cpu, "--gpu", gpu, "--gpu-qps", "5000", "--cpu-workers", "2",
                            "--gpu-dispatchers", "2", "--start", "2000", "--factor", "1.25", "--steps", "16",
                            "--seconds", "2"], capture_output=True, text=True)
        if p.returncode != 0:
            failures.append(f"sched_sim failed: {p.stderr}")
        else:
            m = re.search(r"sustained \(at most 1.0% misses\): gpu (\d+) q/s; hybrid (\d+) q/s;", p.stdout)
            if not m:
                failures.append(f"no sustained line in:\n{p.stdout}")
            else:
                g, h = int(m.group(1)), int(m.group(2))
                h_warm = h
                if not 4000 <= g < 6000:
                    failures.append(f"gpu sustained {g} q/s, want 4,000-6,000 (the device's 5,000)")
                if h < 1.5 * g:
                    failures.append(f"hybrid sustained {h} q/s, not 1.5x gpu's {g}")
                if h > 5000 + 20000:
                    failures.append(f"hybrid sustained {h} q/s, past both processors' sum (25,000)")
            if "| hybrid / gpu |" not in p.stdout:
                failures.append("no table of rates within p99 bounds")
        # --cpu-column us_first: the same queries at 1,000 us a first run on the CPU: two cores then
        # add 2,000 q/s to the GPU's 5,000, so hybrid sustains no more than the first step past
        # 7,000 (7,629: a 2-second step's backlog stays within the deadline) and less than with
        # the warm column above.
        first = os.path.join(d, "first.csv")
        with open(first, "w") as f:
            f.write(HEADER.rstrip("\n") + ",us_first\n")
            for q in range(1, 101):
                f.write(f"{q},2,10,20,30,100,30,10,1000\n")
        p = subprocess.run([a.sim, "--cpu", first, "--gpu", gpu, "--gpu-qps", "5000", "--cpu-workers", "2",
                            "--gpu-dispatchers", "2", "--start", "2000", "--factor", "1.25", "--steps", "16",
                            "--seconds", "2", "--cpu-column", "us_first"], capture_output=True, text=True)
        m = re.search(r"sustained \(at most 1.0% misses\): gpu (\d+) q/s; hybrid (\d+) q/s;", p.stdout)
        if p.returncode != 0 or not m:
            failures.append(f"--cpu-column us_first: exit {p.returncode}, stdout {p.stdout!r}, stderr {p.stderr!r}")
        elif not 4000 <= int(m.group(2)) <= 7629 or (h_warm is not None and int(m.group(2)) >= h_warm):
            failures.append(f"--cpu-column us_first: hybrid sustained {m.group(2)} q/s, want 4,000-7,629 and "
                            f"below the warm column's {h_warm}")
        q = subprocess.run([a.sim, "--cpu", cpu, "--gpu", gpu, "--cpu-column", "us_first"], capture_output=True, text=True)
        if q.returncode == 0 or "needs columns query and us_first" not in q.stderr:
            failures.append(f"a file without us_first: exit {q.returncode}, stderr {q.stderr!r}")
        # --cpu-bias: the CPU's predictions are its times over the bias. With a fixed cheap bound of
        # 50 us, no balance or stealing and a GPU far faster, a 100 us query goes to the GPU (the
        # CPU runs only the 1 in 16 it explores), unless the model predicts a quarter of it (25 us):
        # then every query is cheap and runs on the CPU.
        shares = {}
        for bias in ("1", "4"):
            p = subprocess.run([a.sim, "--cpu", cpu, "--gpu", gpu, "--gpu-qps", "50000", "--cpu-workers", "2",
                                "--gpu-dispatchers", "2", "--start", "2000", "--steps", "1", "--seconds", "2",
                                "--modes", "hybrid", "--gpu-alone-us", "50", "--steal", "false", "--balance", "false",
                                "--cpu-bias", bias], capture_output=True, text=True)
            row = re.search(r"^\| 2000 \| [0-9.]+ \| [0-9.]+ \| [0-9.]+% \| ([0-9.]+)% \|", p.stdout, re.M)
            if p.returncode != 0 or not row:
                failures.append(f"--cpu-bias {bias}: exit {p.returncode}, stdout {p.stdout!r}, stderr {p.stderr!r}")
            else:
                shares[bias] = float(row.group(1))
        if shares and not (shares.get("1", 100) < 10 and shares.get("4", 0) > 99):
            failures.append(f"--cpu-bias: CPU shares {shares}, want under 10% with bias 1 and all with bias 4")
        # --max-batch: one job a batch pays the whole batch latency for each job.
        sustained = {}
        for mb in ("1", "64"):
            p = subprocess.run([a.sim, "--cpu", cpu, "--gpu", gpu, "--gpu-qps", "5000", "--gpu-dispatchers", "2",
                                "--gpu-latency-us", "1000", "--modes", "gpu", "--start", "1000", "--factor", "1.25",
                                "--steps", "12", "--seconds", "2", "--max-batch", mb], capture_output=True, text=True)
            m = re.search(r"sustained \(at most 1.0% misses\): gpu (\d+) q/s;", p.stdout)
            if p.returncode != 0 or not m:
                failures.append(f"--max-batch {mb}: exit {p.returncode}, stdout {p.stdout!r}, stderr {p.stderr!r}")
            else:
                sustained[mb] = int(m.group(1))
        if len(sustained) == 2 and not (sustained["1"] < 2500 and sustained["64"] >= 4000):
            failures.append(f"--max-batch: gpu sustained {sustained}, want under 2,500 with 1 and 4,000 or more with 64")
        # A closed loop: two connections, each held 1 ms outside the node plus the node's time.
        p = subprocess.run([a.sim, "--cpu", cpu, "--gpu", gpu, "--gpu-qps", "5000", "--gpu-dispatchers", "2",
                            "--modes", "gpu", "--connections", "2", "--path-us", "1000", "--start", "500",
                            "--factor", "1.25", "--steps", "12", "--seconds", "2"], capture_output=True, text=True)
        m = re.search(r"sustained \(at most 1.0% misses\): gpu (\d+) q/s;", p.stdout)
        first = re.search(r"^\| 500 \| ([0-9.]+) \|", p.stdout, re.M)
        if p.returncode != 0 or not m or not first:
            failures.append(f"closed loop: exit {p.returncode}, stdout {p.stdout!r}, stderr {p.stderr!r}")
        else:
            if not 500 <= int(m.group(1)) < 2000:
                failures.append(f"closed loop: gpu sustained {m.group(1)} q/s, want 500-2,000 (2 connections, > 1 ms each)")
            if float(first.group(1)) < 1.0:
                failures.append(f"closed loop: mean {first.group(1)} ms at 500 q/s, want at least the 1 ms path")
        for args, why in [(["--cpu", os.path.join(d, "absent.csv"), "--gpu", gpu], "cannot open"),
                          (["--cpu", cpu, "--gpu", gpu, "--factor", "1"], "--factor"),
                          ]:
            q = subprocess.run([a.sim, *args], capture_output=True, text=True)
            if q.returncode == 0 or why not in q.stderr:
                failures.append(f"{args}: exit {q.returncode}, stderr {q.stderr!r}, want a failure naming {why!r}")
        bad = os.path.join(d, "bad.csv")
        with open(bad, "w") as f:
            f.write("query,terms,time\n1,2,3\n")
        q = subprocess.run([a.sim, "--cpu", bad, "--gpu", gpu], capture_output=True, text=True)
        if q.returncode == 0 or "not a --per-query file" not in q.stderr:
            failures.append(f"a file without us: exit {q.returncode}, stderr {q.stderr!r}")
    return report("sched_sim_test", failures)


if __name__ == "__main__":
    sys.exit(main())
