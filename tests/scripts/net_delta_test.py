#!/usr/bin/env python3
"""bench/scripts/net_delta.py on two made-up snapshots of bench/scripts/step_net_hook.sh: a /proc/net table
whose ActiveOpens rose by 50 and RetransSegs by 2 (InSegs the same), and integrator samples whose
answered searches rose by 4,000 (3,990 ok, 10 partial); a gauge that fell by 3.

usage: net_delta_test.py --source REPO        Exit status: 0 pass, 1 fail.
"""
import os
import tempfile

from check_report import Checks, report, run, script_under_test

BEFORE = """Tcp: RtoAlgorithm ActiveOpens InSegs RetransSegs
Tcp: 1 100 5000 7
# HELP search_requests_total answered requests
search_requests_total{component="integrator",mode="and",status="ok"} 10
search_requests_total{component="integrator",mode="and",status="partial"} 0
search_inflight_requests{component="integrator"} 5
"""
AFTER = """Tcp: RtoAlgorithm ActiveOpens InSegs RetransSegs
Tcp: 1 150 5000 9
# HELP search_requests_total answered requests
search_requests_total{component="integrator",mode="and",status="ok"} 4000
search_requests_total{component="integrator",mode="and",status="partial"} 10
search_inflight_requests{component="integrator"} 2
"""


def main():
    script = script_under_test("net_delta.py")
    check = Checks()
    with tempfile.TemporaryDirectory() as d:
        a, b = os.path.join(d, "net.0"), os.path.join(d, "net.1")
        with open(a, "w") as f:
            f.write(BEFORE)
        with open(b, "w") as f:
            f.write(AFTER)
        rc, out, err = run(script, a, b)
        check(rc == 0, f"exit status {rc}: {err}")
        lines = out.splitlines()
        check(lines[:5] == ["Tcp:ActiveOpens 50", "Tcp:RetransSegs 2",
                            'search_requests_total{component="integrator",mode="and",status="ok"} 3990',
                            'search_requests_total{component="integrator",mode="and",status="partial"} 10',
                            'search_inflight_requests{component="integrator"} -3'], f"deltas: {lines}")
        check(not any(x.startswith("Tcp:InSegs") or x.startswith("Tcp:RtoAlgorithm") for x in lines),
              f"unchanged counters listed: {lines}")
        check(lines[-1] == "connections opened per integrator request: 1/80 (50 over 4000)", f"per request: {lines}")
        rc, out2, _ = run(script, a, b, "--match", "Retrans")
        check(rc == 0 and out2.splitlines()[0] == "Tcp:RetransSegs 2" and "ActiveOpens 50" not in out2,
              f"--match: {out2}")
        rc, _, err = run(script, a, os.path.join(d, "missing"))
        check(rc == 2 and "net_delta:" in err, f"a missing file: {rc} {err}")
    return report("net_delta_test", check.failures, out)


if __name__ == "__main__":
    raise SystemExit(main())
