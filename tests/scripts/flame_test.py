#!/usr/bin/env python3
"""bench/scripts/flame.py on made-up `perf script` output: three samples of one thread, two with the
stack main -> work -> leaf and one with main -> other -> an address in an unnamed library. The folded
file must hold each stack once, root first, with its count (offsets stripped, the library named for
an unknown frame); the flame graph must be an SVG whose root spans the full width and whose `work`
frame spans two thirds of it; and the tables must give `leaf` 66.67% of the self samples and, with
--per 10 --sample-us 1000, 200 us a query.

usage: flame_test.py --source REPO        Exit status: 0 pass, 1 fail.
"""
import os
import re
import subprocess
import sys
import tempfile

from check_report import Checks, report, script_under_test

SAMPLE = """node 11 [001] 10.000001:    1001 cpu-clock:
\t    55aa01 leaf+0x10 (/opt/b/search-node)
\t    55aa02 work+0x2f (/opt/b/search-node)
\t    55aa03 main+0x5 (/opt/b/search-node)

node 11 [001] 10.001002:    1001 cpu-clock:
\t    55aa01 leaf+0x14 (/opt/b/search-node)
\t    55aa02 work+0x2f (/opt/b/search-node)
\t    55aa03 main+0x5 (/opt/b/search-node)

node 11 [002] 10.002003:    1001 cpu-clock:
\t    7f0001 [unknown] (/opt/b/lib/libzmq.so.5)
\t    55aa04 other+0x1 (/opt/b/search-node)
\t    55aa03 main+0x5 (/opt/b/search-node)
"""


def main():
    script = script_under_test("flame.py")
    check = Checks()
    with tempfile.TemporaryDirectory() as tmp:
        prefix = os.path.join(tmp, "out")
        p = subprocess.run([sys.executable, script, prefix, "--title", "t", "--per", "10", "--sample-us", "1000"],
                           input=SAMPLE, capture_output=True, text=True)
        check(p.returncode == 0, f"flame.py exit status {p.returncode}: {p.stderr}")
        folded = open(prefix + ".folded").read().splitlines() if os.path.exists(prefix + ".folded") else []
        check(sorted(folded) == ["node;main;other;[libzmq.so.5] 1", "node;main;work;leaf 2"],
              f"folded stacks: {folded}")
        svg = open(prefix + ".svg").read() if os.path.exists(prefix + ".svg") else ""
        check(svg.startswith("<svg") and svg.rstrip().endswith("</svg>"), "not an SVG")
        widths = {m.group(1): float(m.group(2))
                  for m in re.finditer(r"<title>([^ <]+) \(\d+ samples[^<]*</title><rect x=\"[\d.]+\" y=\"\d+\" width=\"([\d.]+)\"", svg)}
        check(abs(widths.get("node", 0) - 1800.0) < 0.5, f"root width {widths.get('node')}")
        check(abs(widths.get("work", 0) - 1200.0) < 0.5, f"work width {widths.get('work')}")
        check(re.search(r"66\.67%\s+2\s+200\.000 us\s+leaf", p.stdout) is not None,
              "leaf: 66.67% of the self samples, 200 us a query")
        check("top 25 by inclusive samples of 3" in p.stdout, "inclusive table")
    return report("flame_test", check.failures, p.stdout)


if __name__ == "__main__":
    sys.exit(main())
