#!/usr/bin/env python3
"""What changed between two snapshots of bench/scripts/step_net_hook.sh (a step's start and end): the
host's TCP counters (/proc/net/netstat and /proc/net/snmp, "Prefix: names" lines each followed by
a "Prefix: values" line) and the integrator's Prometheus samples ("name{labels} value").

usage: net_delta.py BEFORE AFTER [--match REGEX]
Prints "name delta" for every counter or sample that changed, in the AFTER file's order (with
--match, only the names the regular expression finds), then, where both are there, the connections
opened per integrator request (Tcp:ActiveOpens over the integrator's answered searches): about
1/keep-alive-requests when no answer closes a connection early. A file that cannot be read exits 2.
"""
import argparse
import re
import sys


def parse(path):
    values = {}
    with open(path) as f:
        lines = f.read().splitlines()
    i = 0
    while i < len(lines):
        head = lines[i].split()
        nxt = lines[i + 1].split() if i + 1 < len(lines) else []
        # /proc/net tables: a names line and a values line with the same "Prefix:" first word.
        if head and head[0].endswith(":") and nxt and nxt[0] == head[0] and len(nxt) == len(head):
            for name, value in zip(head[1:], nxt[1:]):
                values[head[0] + name] = value
            i += 2
            continue
        parts = lines[i].rsplit(" ", 1)
        if len(parts) == 2 and not lines[i].startswith("#"):
            values[parts[0]] = parts[1]
        i += 1
    return values


def number(v):
    try:
        return float(v)
    except ValueError:
        return None


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("before")
    ap.add_argument("after")
    ap.add_argument("--match", default="")
    a = ap.parse_args()
    try:
        before, after = parse(a.before), parse(a.after)
    except OSError as e:
        print(f"net_delta: {e}", file=sys.stderr)
        return 2
    pattern = re.compile(a.match) if a.match else None
    deltas = {}
    for name, v in after.items():
        x, y = number(before.get(name, "0")), number(v)
        if x is None or y is None or x == y:
            continue
        deltas[name] = y - x
        if pattern is None or pattern.search(name):
            print(f"{name} {y - x:g}")
    opens = deltas.get("Tcp:ActiveOpens")
    answered = sum(d for n, d in deltas.items()
                   if n.startswith("search_requests_total{") and 'component="integrator"' in n)
    if opens is not None and answered > 0:
        print(f"connections opened per integrator request: 1/{answered / opens:.0f} ({opens:g} over {answered:g})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
