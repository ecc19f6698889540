#!/usr/bin/env python3
"""bench/scripts/hybrid_split.py on made-up per-query files whose best split is known by hand.

Four queries cost the GPU the same; two cost the CPU 100 us, two 100,000 us. With the GPU at 100
q/s alone and one CPU core, the best split sends the two cheap ones to the CPU: the GPU's half of
the work then sustains 200 q/s and the CPU's 4 x 1e6 / 200 = 20,000, so 200 q/s, 2.00x. A host
of one core at 1,000 us a query does not bind there (952 q/s) but caps the GPU alone at 1,000.
A bad row is skipped with a message, a query in only one file is left out, and files with no
query in common exit 2.

usage: hybrid_split_test.py --source REPO        Exit status: 0 pass, 1 fail.
"""
import os
import sys
import tempfile

from check_report import Checks, report, run, script_under_test

HEADER = "query,terms,shortest,second,total,us,postings_decoded,hits\n"


def write(path, rows):
    with open(path, "w") as f:
        f.write(HEADER)
        for r in rows:
            f.write(r + "\n")


def main():
    script = script_under_test("hybrid_split.py")
    check = Checks()
    failures = check.failures

    with tempfile.TemporaryDirectory() as d:
        cpu, gpu = os.path.join(d, "cpu.csv"), os.path.join(d, "gpu.csv")
        write(cpu, ["1,2,1,1,2,100,1,1", "2,2,1,1,2,100,1,1", "3,2,1,1,2,100000,1,1", "4,2,1,1,2,100000,1,1",
                    "5,2,1,1,2,oops,1,1", "6,2,1,1,2,50,1,1"])
        write(gpu, ["1,2,1,1,2,10,1,1", "2,2,1,1,2,10,1,1", "3,2,1,1,2,10,1,1", "4,2,1,1,2,10,1,1"])
        rc, out, err = run(script, cpu, gpu, "--gpu-qps", "100", "--cores", "1")
        check(rc == 0, f"exit {rc}: {err}")
        check("queries: 4 (1 in only one file, left out)" in out, "query 6 left out:\n" + out)
        check("cpu.csv:6: skipped" in err, "bad row named:\n" + err)
        check("| 1 | 20 | 200 | 2.00x | 2 (50.0%) | 100 |" in out, "best split row:\n" + out)
        check("GPU alone: 100 q/s" in out, "GPU alone:\n" + out)
        rc, out, err = run(script, cpu, gpu, "--gpu-qps", "2000", "--cores", "1", "--host-cores", "1",
                           "--host-us", "1000")
        check(rc == 0, f"exit {rc}: {err}")
        check("GPU alone: 1000 q/s (host-bound)" in out, "host-bound GPU:\n" + out)
        # With the GPU at 2,000 q/s and the host capping it at 1,000, the CPU takes nothing: a query
        # moved there costs the host more than it saves.
        check("| 1000 | 1.00x | 0 (0.0%) |" in out, "host-bound split:\n" + out)
        # --fit-check: times that follow a power law of the shortest list are fitted exactly by the
        # power-law form, not by the linear one; the bound (100 us) takes 3 of the 9.
        law = os.path.join(d, "law.csv")
        rows = []
        for i, s in enumerate([10, 100, 1000, 10000, 100000, 1000000, 50, 5000, 500000], start=1):
            rows.append(f"{i},2,{s},{2 * s},{3 * s},{2.0 * s ** 0.6:.6f},1,1")
        write(law, rows)
        rc, out, err = run(script, law, law, "--gpu-qps", "100", "--fit-check", "100")
        check(rc == 0, f"fit check exit {rc}: {err}")
        check("fit check over 9 queries: 3 (33.3%) took at most 100 us" in out, "fit check truth:\n" + out)
        check("- power law (log t): median relative error 0%, predicts 3 (33.3%) under the bound, 3 of them rightly"
              in out, "power law fit:\n" + out)
        check("- linear, weights 1/t^2: median relative error 0%" not in out, "linear cannot fit it:\n" + out)
        # --cpu-column us_first: the same queries with first-run times where the cheap pair costs
        # 20,000 us each. Both on the CPU: it spends 40,000 us per 4 queries, so 100 q/s (1.00x).
        # One: the GPU holds 3/4 of its work (133 q/s), the CPU 20,000 us per 4 (200): 133, 1.33x.
        first = os.path.join(d, "first.csv")
        with open(first, "w") as f:
            f.write(HEADER.rstrip("\n") + ",us_first\n")
            for q, us, us_first in [(1, 100, 20000), (2, 100, 20000), (3, 100000, 100000), (4, 100000, 100000)]:
                f.write(f"{q},2,1,1,2,{us},1,1,{us_first}\n")
        rc, out, err = run(script, first, gpu, "--gpu-qps", "100", "--cores", "1")
        check(rc == 0 and "| 1 | 20 | 200 | 2.00x | 2 (50.0%) | 100 |" in out, f"us column: exit {rc}\n{out}{err}")
        rc, out, err = run(script, first, gpu, "--gpu-qps", "100", "--cores", "1", "--cpu-column", "us_first")
        check(rc == 0 and "| 1 | 17 | 133 | 1.33x | 1 (25.0%) | 20000 |" in out, f"us_first: exit {rc}\n{out}{err}")
        rc, out, err = run(script, cpu, gpu, "--gpu-qps", "100", "--cpu-column", "us_first")
        check(rc == 2 and "has no column 'us_first'" in err, f"missing column: exit {rc}, {err}")
        other = os.path.join(d, "other.csv")
        write(other, ["9,2,1,1,2,10,1,1"])
        rc, out, err = run(script, cpu, other, "--gpu-qps", "100")
        check(rc == 2 and "no query is in both files" in err, f"disjoint files: exit {rc}, {err}")
        rc, out, err = run(script, cpu, gpu, "--gpu-qps", "0")
        check(rc == 2 and "must be positive" in err, f"zero rate: exit {rc}, {err}")

    return report("hybrid_split_test", failures)


if __name__ == "__main__":
    sys.exit(main())
