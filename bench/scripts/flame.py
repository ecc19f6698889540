#!/usr/bin/env python3
"""Flame graph from `perf script` output, with no tool beyond Python.

usage: perf script -i perf.data | bench/scripts/flame.py OUT_PREFIX [--title T] [--per N [--sample-us U]]
Writes OUT_PREFIX.folded (one line per distinct stack: frames root;...;leaf, then the sample count),
OUT_PREFIX.svg (the flame graph: width = share of samples, root at the bottom) and prints the
functions with the most samples, self and inclusive. --per N also prints each as samples / N (e.g.
N = queries answered while perf recorded), or with --sample-us U (1e6 / perf's -F) as CPU us a query.
"""
import argparse
import collections
import html
import re
import sys


def fold(lines):
    stacks = collections.Counter()
    comm, frames = None, []
    for line in lines:
        line = line.rstrip("\n")
        if not line.strip():
            if comm is not None and frames:
                stacks[";".join([comm] + frames[::-1])] += 1
            comm, frames = None, []
            continue
        if not line.startswith((" ", "\t")):
            comm = line.split()[0]
            continue
        parts = line.strip().split(None, 1)
        if len(parts) < 2:
            continue
        sym = re.sub(r"\+0x[0-9a-f]+$", "", parts[1].split(" (")[0])
        if sym == "[unknown]":
            m = re.search(r"\(([^)]*)\)$", parts[1])
            sym = "[" + (m.group(1).rsplit("/", 1)[-1] if m else "unknown") + "]"
        sym = re.sub(r"\(.*\)$", "", sym) if len(sym) > 200 else sym
        frames.append(sym.replace(";", ":"))
    if comm is not None and frames:
        stacks[";".join([comm] + frames[::-1])] += 1
    return stacks


def svg(stacks, title, path):
    total = sum(stacks.values()) or 1
    width, row = 1800.0, 16
    tree = {}
    for stack, n in stacks.items():
        node = tree
        for f in stack.split(";"):
            child = node.setdefault(f, [0, {}])
            child[0] += n
            node = child[1]
    rects, depth_max = [], [0]

    def walk(node, x, depth):
        for name, (n, kids) in sorted(node.items()):
            w = width * n / total
            if w >= 0.3:
                rects.append((x, depth, w, name, n))
                depth_max[0] = max(depth_max[0], depth)
                walk(kids, x, depth + 1)
            x += w

    walk(tree, 0.0, 0)
    height = (depth_max[0] + 3) * row
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width:.0f}" height="{height}" font-family="monospace" font-size="11">',
           f'<text x="4" y="12">{html.escape(title)} ({total} samples)</text>']
    for x, depth, w, name, n in rects:
        y = height - (depth + 1) * row
        hue = 20 + (hash(name) % 40)
        label = html.escape(name[: int(w / 7)]) if w > 21 else ""
        out.append(f'<g><title>{html.escape(name)} ({n} samples, {100.0 * n / total:.2f}%)</title>'
                   f'<rect x="{x:.1f}" y="{y}" width="{w:.1f}" height="{row - 1}" fill="hsl({hue},85%,60%)"/>'
                   f'<text x="{x + 2:.1f}" y="{y + 11}">{label}</text></g>')
    out.append("</svg>")
    with open(path, "w") as f:
        f.write("\n".join(out))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("prefix")
    ap.add_argument("--title", default="perf")
    ap.add_argument("--per", type=float, default=0)
    ap.add_argument("--sample-us", type=float, default=0, help="with --per: print CPU us a query (a sample = this many us)")
    ap.add_argument("--top", type=int, default=25)
    args = ap.parse_args()
    stacks = fold(sys.stdin)
    with open(args.prefix + ".folded", "w") as f:
        for stack, n in stacks.most_common():
            f.write(f"{stack} {n}\n")
    svg(stacks, args.title, args.prefix + ".svg")
    total = sum(stacks.values()) or 1
    self_c, incl = collections.Counter(), collections.Counter()
    for stack, n in stacks.items():
        frames = stack.split(";")
        self_c[frames[-1]] += n
        for f in set(frames[1:]):
            incl[f] += n
    per = f" (per {args.per:g}: samples / N)" if args.per else ""
    if args.per and args.sample_us:
        per = f" (CPU us a query: {args.sample_us:g} us a sample, {args.per:g} queries)"
    for name, counter in (("self", self_c), ("inclusive", incl)):
        print(f"{args.title}: top {args.top} by {name} samples of {total}{per}")
        for f, n in counter.most_common(args.top):
            extra = ""
            if args.per:
                extra = f"  {n * args.sample_us / args.per:8.3f} us" if args.sample_us else f"  {n / args.per:.4f}"
            print(f"  {100.0 * n / total:6.2f}%  {n:7d}{extra}  {f[:150]}")


if __name__ == "__main__":
    main()
