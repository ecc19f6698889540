#!/usr/bin/env python3
"""What would an ideal CPU/GPU split of a query log sustain, against the GPU alone?

Reads two `searchctl bench --per-query` files of the same log: one from the CPU engine (each
query's time on one core, microseconds) and one from the GPU (each query's time per copy in a
batch of copies: its relative cost to the GPU). The GPU's capacity for the whole log is given
(--gpu-qps: e.g. `searchctl bench --engine gpu --batch 32 --threads 16`'s qps), so query i costs
the GPU gpu_us[i] / mean(gpu_us) / gpu_qps seconds.

For each number of CPU cores, the queries are ordered by their cpu/gpu cost ratio (the cheapest
for the CPU relative to the GPU first; for two resources this order gives the best split), and
for every k the first k go to the CPU and the rest to the GPU. The rate that split sustains is
the lowest of the GPU's (its share of the work against its capacity), the CPU's (its share
against cores x 1 s) and, with --host-cores, the host's: every query costs --host-us of host CPU
(integrator, load generator, the node's network threads), a GPU query --gpu-host-us more, and a
CPU query its CPU time (the CPU engine runs on the same cores). The best k is reported.

This is an upper bound for a scheduler that knew every query's costs exactly and let nothing
queue: it says how much a hybrid scheduler could gain on this log and hardware, not what one does.

usage: hybrid_split.py CPU_CSV GPU_CSV --gpu-qps Q [--cores 16 10 6 3] [--cpu-column us|us_first]
                       [--host-cores H --host-us U [--gpu-host-us X]] [--fit-check US]
--fit-check US fits the node's CPU cost model (node/cost_model.hpp), linear and power law, to every
query of the CPU file and says how well each predicts which queries take at most US.
Either file may be gzip-compressed (.gz). Rows whose numbers do not parse are skipped with a message on stderr; queries present in only
one file are left out and counted. Exit status: 0, or 2 when nothing is left to split.
"""
import argparse
import csv
import gzip
import math
import sys


def rows(path):
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt", newline="") as f:
        yield from enumerate(csv.DictReader(f), start=2)


def solve(a, b):
    """Solves a x = b (lists) by Gaussian elimination with partial pivoting, a little ridge."""
    n = len(b)
    a = [row[:] for row in a]
    b = b[:]
    for i in range(n):
        a[i][i] = a[i][i] * (1 + 1e-9) + 1e-18
    for c in range(n):
        p = max(range(c, n), key=lambda r: abs(a[r][c]))
        a[c], a[p] = a[p], a[c]
        b[c], b[p] = b[p], b[c]
        for r in range(c + 1, n):
            f = a[r][c] / a[c][c]
            for k in range(c, n):
                a[r][k] -= f * a[c][k]
            b[r] -= f * b[c]
    x = [0.0] * n
    for i in reversed(range(n)):
        x[i] = (b[i] - sum(a[i][k] * x[k] for k in range(i + 1, n))) / a[i][i]
    return x


def fit_check(path, bound_us, column="us"):
    """The node's cost model (node/cost_model.hpp) in its two forms, fitted to every query of a
    CPU --per-query file: median relative error, and the queries each predicts under bound_us."""
    data = []
    for _, r in rows(path):
        try:
            s, sec, tot, t, us = (float(r[k]) for k in ("shortest", "second", "total", "terms", column))
        except (KeyError, TypeError, ValueError):
            continue
        if us > 0:
            data.append((s, sec, tot, t, us))
    if len(data) < 8:
        print("fit check: fewer than 8 queries", file=sys.stderr)
        return
    def lin(s, sec, tot, t):  # CostModel::Features (postings in millions, nothing non-resident)
        skew = s * 1e-6 * math.log2(tot / s) if s > 0 and tot > s else 0.0
        return [1.0, s * 1e-6, sec * 1e-6, tot * 1e-6, t, skew, 0.0]
    def pw(s, sec, tot, t):  # CostModel::LogFeatures
        skew = s * math.log2(tot / s) if s > 0 and tot > s else 0.0
        return [1.0, math.log1p(s), math.log1p(sec), math.log1p(tot), t, math.log1p(skew), 0.0]
    truth = sum(1 for d in data if d[4] <= bound_us)
    print(f"fit check over {len(data)} queries: {truth} ({100.0 * truth / len(data):.1f}%) took at most "
          f"{bound_us:g} us")
    for name, feat, log in (("linear, weights 1/t^2", lin, False), ("power law (log t)", pw, True)):
        n = 7
        a = [[0.0] * n for _ in range(n)]
        b = [0.0] * n
        for s, sec, tot, t, us in data:
            x = feat(s, sec, tot, t)
            w = 1.0 if log else 1.0 / (us * us)
            y = math.log(us) if log else us
            for i in range(n):
                b[i] += w * x[i] * y
                for j in range(n):
                    a[i][j] += w * x[i] * x[j]
        th = solve(a, b)
        errs, picked, right = [], 0, 0
        for s, sec, tot, t, us in data:
            y = sum(c * v for c, v in zip(th, feat(s, sec, tot, t)))
            p = math.exp(y) if log else max(y, 1.0)
            errs.append(abs(p - us) / us)
            if p <= bound_us:
                picked += 1
                right += us <= bound_us
        errs.sort()
        print(f"- {name}: median relative error {100 * errs[len(errs) // 2]:.0f}%, predicts {picked} "
              f"({100.0 * picked / len(data):.1f}%) under the bound, {right} of them rightly")


def load(path, column="us"):
    """query number -> microseconds (the column `column`), from a --per-query CSV."""
    out = {}
    for n, row in rows(path):
        if n == 2 and column not in row:
            print(f"hybrid_split: {path} has no column {column!r}", file=sys.stderr)
            sys.exit(2)
        try:
            q = int(row["query"])
            us = float(row[column])
        except (KeyError, TypeError, ValueError):
            print(f"{path}:{n}: skipped (no query number or time)", file=sys.stderr)
            continue
        if not us > 0:
            print(f"{path}:{n}: skipped (time {us} is not positive)", file=sys.stderr)
            continue
        out[q] = us
    return out


def best_split(cpu, gpu, gpu_qps, cores, host_cores=None, host_us=0.0, gpu_host_us=0.0):
    """(rate, k, mean CPU us of the k) for the best prefix split of the queries by cpu/gpu ratio."""
    ids = sorted(cpu, key=lambda i: cpu[i] / gpu[i])
    n = len(ids)
    mean_g = sum(gpu[i] for i in ids) / n
    gpu_s = {i: gpu[i] / mean_g / gpu_qps for i in ids}  # GPU seconds per query
    gpu_left = sum(gpu_s.values())
    cpu_sum = 0.0  # CPU microseconds of the first k
    best = (0.0, 0, 0.0)
    for k in range(n + 1):
        limits = []
        if gpu_left > 1e-15:
            limits.append(n / gpu_left)
        if cpu_sum > 0:
            limits.append(n * cores * 1e6 / cpu_sum)
        if host_cores is not None:
            host = n * host_us + (n - k) * gpu_host_us + cpu_sum
            if host > 0:
                limits.append(n * host_cores * 1e6 / host)
        rate = min(limits) if limits else 0.0
        if rate > best[0]:
            best = (rate, k, cpu_sum / k if k else 0.0)
        if k < n:
            i = ids[k]
            gpu_left -= gpu_s[i]
            cpu_sum += cpu[i]
    return best


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("cpu_csv")
    ap.add_argument("gpu_csv")
    ap.add_argument("--gpu-qps", type=float, required=True, help="the GPU's rate over the whole log alone")
    ap.add_argument("--cores", type=int, nargs="+", default=[16, 10, 6, 3], help="CPU cores for the CPU engine")
    ap.add_argument("--host-cores", type=float, help="cores of the host everything shares (off: no host limit)")
    ap.add_argument("--host-us", type=float, default=0.0, help="host CPU every query costs, us")
    ap.add_argument("--gpu-host-us", type=float, default=0.0, help="host CPU a GPU query costs on top, us")
    ap.add_argument("--cpu-column", default="us",
                    help="the CPU file's time column: us (the faster of two runs, caches warm) or us_first (the "
                         "first run, as a served query finds the caches; files from searchctl bench since "
                         "2026-11-26)")
    ap.add_argument("--fit-check", type=float, metavar="US",
                    help="also fit the node's CPU cost model, linear and power law, to the CPU file and say how "
                         "many queries each predicts under US microseconds")
    a = ap.parse_args()
    if not a.gpu_qps > 0 or any(c <= 0 for c in a.cores):
        ap.error("--gpu-qps and --cores must be positive")
    cpu, gpu = load(a.cpu_csv, a.cpu_column), load(a.gpu_csv)
    common = set(cpu) & set(gpu)
    dropped = len(set(cpu) ^ set(gpu))
    if not common:
        print("hybrid_split: no query is in both files", file=sys.stderr)
        return 2
    cpu = {i: cpu[i] for i in common}
    gpu = {i: gpu[i] for i in common}
    n = len(common)
    gpu_alone = a.gpu_qps
    if a.host_cores is not None:
        gpu_alone = min(gpu_alone, a.host_cores * 1e6 / max(a.host_us + a.gpu_host_us, 1e-9))
    mean_cpu = sum(cpu.values()) / n
    print(f"queries: {n}" + (f" ({dropped} in only one file, left out)" if dropped else ""))
    print(f"CPU engine, one core: mean {mean_cpu:.0f} us, median {sorted(cpu.values())[n // 2]:.0f} us")
    print(f"GPU alone: {gpu_alone:.0f} q/s" + (" (host-bound)" if gpu_alone < a.gpu_qps else ""))
    if a.host_cores is not None:
        print(f"host: {a.host_cores:g} cores, {a.host_us:g} us a query, {a.gpu_host_us:g} more on the GPU path")
    print()
    print("| CPU cores | CPU alone q/s | best split q/s | x GPU alone | queries on the CPU | their mean CPU us |")
    print("|---|---|---|---|---|---|")
    for c in a.cores:
        rate, k, mean_k = best_split(cpu, gpu, a.gpu_qps, c, a.host_cores, a.host_us, a.gpu_host_us)
        cpu_alone = c * 1e6 / mean_cpu
        if a.host_cores is not None:
            cpu_alone = min(cpu_alone, a.host_cores * 1e6 / (a.host_us + mean_cpu))
        print(f"| {c} | {cpu_alone:.0f} | {rate:.0f} | {rate / gpu_alone:.2f}x | {k} ({100.0 * k / n:.1f}%) "
              f"| {mean_k:.0f} |")
    if a.fit_check is not None:
        print()
        fit_check(a.cpu_csv, a.fit_check, a.cpu_column)
    return 0


if __name__ == "__main__":
    sys.exit(main())
