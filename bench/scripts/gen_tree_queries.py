#!/usr/bin/env python3
"""Random query-language trees over `searchctl generate`'s terms (t<rank>), one query a line.

Each query: 1-5 clauses, each bare, + or - (2:2:1), a group of 1-4 clauses one time in five (up to
three deep), else a term: t2..t<max-rank> with a Pareto(0.8) bias toward the long lists (90%), or
a rank up to 20000 (often absent at small N). No phrases: `searchctl generate` writes no
positions, and the GPU engine runs terms and groups. Deterministic per --seed.

usage: gen_tree_queries.py [--count 300] [--seed 48] [--max-rank 400] > trees.txt
"""
import argparse
import random


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--count", type=int, default=300)
    ap.add_argument("--seed", type=int, default=48)
    ap.add_argument("--max-rank", type=int, default=400)
    a = ap.parse_args()
    r = random.Random(a.seed)

    def term():
        if r.random() < 0.9:
            return "t%d" % (1 + int(r.paretovariate(0.8)) % a.max_rank)
        return "t%d" % r.randint(1, 20000)

    def clause(depth):
        sign = r.choice(["", "", "+", "+", "-"])
        if depth < 3 and r.random() < 0.2:
            return sign + "(" + " ".join(clause(depth + 1) for _ in range(r.randint(1, 4))) + ")"
        return sign + term()

    for _ in range(a.count):
        print(" ".join(clause(0) for _ in range(r.randint(1, 5))))


if __name__ == "__main__":
    main()
