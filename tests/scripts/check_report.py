"""What the script tests share: the script under test found and run (script_under_test, run), failures
collected (Checks), and the ending: each failure on its own FAIL line, then the test's verdict."""
import argparse
import os
import subprocess
import sys


def script_under_test(name):
    """Parses --source REPO and returns REPO/bench/scripts/NAME."""
    ap = argparse.ArgumentParser()
    ap.add_argument("--source", required=True)
    return os.path.join(ap.parse_args().source, "bench", "scripts", name)


def run(script, *args):
    """Runs a Python script; returns (exit status, stdout, stderr)."""
    p = subprocess.run([sys.executable, script, *args], capture_output=True, text=True)
    return p.returncode, p.stdout, p.stderr


class Checks:
    """check(cond, what) records `what` as a failure when cond is false; failures lists them."""

    def __init__(self):
        self.failures = []

    def __call__(self, cond, what):
        if not cond:
            self.failures.append(what)


def report(name, failures, *context):
    """Prints the failures (and `context`, e.g. the checked program's output, when there are any)
    and NAME: ok or FAIL; returns the exit status (1 on any failure)."""
    for f in failures:
        print("FAIL:", f)
    if failures:
        for c in context:
            print(c)
    print(f"{name}:", "FAIL" if failures else "ok")
    return 1 if failures else 0
