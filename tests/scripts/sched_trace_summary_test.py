#!/usr/bin/env python3
"""bench/scripts/sched_trace_summary.py on a made-up scheduler trace whose summary is known by hand.

Window 0 holds four jobs: two the CPU ran (one cheap, waits 10 and 30 us, runs 100 and 300 us, the
model saw 100 and 300 against predictions of 100 and 150) and two the GPU ran after the balance
rule moved them (wait + run 1,000 and 3,000 us, batches of 4 and 8). Window 1 holds one GPU job.
With --every 2 the CPU engine's cores in window 0 are 2 x 400 us / 1 s = 0.0008, printed 0.0. A
row that does not parse is skipped with a message; a file without the trace's columns exits 2.

usage: sched_trace_summary_test.py --source REPO        Exit status: 0 pass, 1 fail.
"""
import gzip
import os
import sys
import tempfile

from check_report import Checks, report, run, script_under_test

HEADER = ("t_us,id,mode,terms,shortest,second,total,nonresident_bytes,pred_cpu_us,pred_gpu_us,queue,cheap,"
          "balanced,stolen,migrated,retried,ran_on,wait_us,run_us,model_us,gpu_batch,ok\n")
ROWS = [
    "1000,1,and,2,10,20,30,0,100,5,cpu,1,0,0,0,0,cpu,10,100,100,0,1",
    "2000,2,and,2,10,20,30,0,150,5,cpu,0,0,0,0,0,cpu,30,300,300,0,1",
    "3000,3,and,2,10,20,30,0,900,5,gpu,0,1,0,0,0,gpu,200,800,-1,4,1",
    "4000,4,and,2,10,20,30,0,950,5,gpu,0,1,0,0,0,gpu,1000,2000,-1,8,1",
    "5000,5,and,2,10,20,30,0,oops,5,gpu,0,0,0,0,0,gpu,0,0,0,0,1",
    "1500000,6,and,2,10,20,30,0,700,5,gpu,0,0,1,0,0,gpu,50,450,-1,2,1",
]


def main():
    script = script_under_test("sched_trace_summary.py")
    check = Checks()
    failures = check.failures

    with tempfile.TemporaryDirectory() as d:
        trace = os.path.join(d, "trace.csv.gz")
        with gzip.open(trace, "wt") as f:
            f.write(HEADER + "\n".join(ROWS) + "\n")
        rc, out, err = run(script, trace, "--every", "2")
        check(rc == 0, f"exit {rc}: {err}")
        check("| 0 | 4 | 50% | 25% | 50% | 0 | 30 | 30 | 200 | 3000 | 6.0 | 0.0 |" in out, "window 0:\n" + out)
        check("| 1 | 1 | 0% | 0% | 0% | 1 | 0 | 0 | 0 | 500 | 2.0 | 0.0 |" in out, "window 1:\n" + out)
        check("trace.csv.gz:6: skipped" in err, "bad row named:\n" + err)
        check("CPU model on 2 jobs the CPU ran: actual / predicted median" in out, "model line:\n" + out)
        check("- predicted 64-128 us: 1 jobs, actual median 100 us" in out, "bin 64:\n" + out)
        check("- predicted 128-256 us: 1 jobs, actual median 300 us" in out, "bin 128:\n" + out)
        other = os.path.join(d, "other.csv")
        with open(other, "w") as f:
            f.write("a,b\n1,2\n")
        rc, out, err = run(script, other)
        check(rc == 2, f"a file that is not a trace: exit {rc}")
        check("not a scheduler trace" in err, "the reason:\n" + err)
    return report("sched_trace_summary", failures)


if __name__ == "__main__":
    sys.exit(main())
