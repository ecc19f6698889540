#!/usr/bin/env python3
"""bench/scripts/gen_ql_queries.py on made-up corpora. One of 40 documents over 12 words, where 12
random draws of a term repeat one almost surely: every category file must hold 12 queries, none twice
(an intersection or union compared as its set of two words, since Lucene takes +a +b and +b +a as one
query), the same files for the same seed and other files for another seed. One of two documents, which
cannot give 25 distinct queries of any category: the script must still succeed, write every distinct
query it can (5 terms, 7 phrases, 10 word pairs, 20 ordered ones) and say on stderr which category
came up short. Corpora that cannot give the queries (one word only, no document of 4 words, no
document): exit status 1 with the reason, in bounded time.

usage: gen_ql_queries_test.py --source REPO        Exit status: 0 pass, 1 fail.
"""
import json
import os
import random
import tempfile

from check_report import Checks, report, run, script_under_test

CATEGORIES = ["term", "intersection", "union", "phrase", "intersection_union", "negated"]
WORDS = ["alpha", "beta", "gamma", "delta", "epsilon", "zeta", "eta", "theta", "iota", "kappa",
         "lambda", "omicron"]


def write_corpus(path, texts):
    with open(path, "w", encoding="utf-8") as f:
        for t in texts:
            f.write(json.dumps({"contents": t}) + "\n")


def read_sets(outdir):
    out = {}
    for cat in CATEGORIES:
        with open(os.path.join(outdir, cat + ".txt"), encoding="utf-8") as f:
            out[cat] = f.read().splitlines()
    return out


def identity(cat, q):
    if cat in ("intersection", "union"):
        return tuple(sorted(q.replace("+", "").split()))
    return q


def main():
    script = script_under_test("gen_ql_queries.py")
    check = Checks()
    context = []
    tmpdir = tempfile.TemporaryDirectory(prefix="gen-ql-queries-")
    tmp = tmpdir.name
    rng = random.Random(7)
    small = os.path.join(tmp, "small.jsonl")
    write_corpus(small, [" ".join(rng.choice(WORDS) for _ in range(8)) for _ in range(40)])
    runs = {}
    for name, seed in (("a", "1"), ("b", "1"), ("c", "2")):
        rc, out, err = run(script, small, os.path.join(tmp, name), "12", seed)
        context.append(f"run {name} seed {seed}: rc {rc}\n{out}{err}")
        check(rc == 0, f"run {name}: exit status {rc}")
        if rc == 0:
            runs[name] = read_sets(os.path.join(tmp, name))
    if "a" in runs:
        for cat, qs in runs["a"].items():
            check(len(qs) == 12, f"{cat}: {len(qs)} queries, want 12")
            ids = [identity(cat, q) for q in qs]
            check(len(set(ids)) == len(ids), f"{cat}: a query occurs more than once: {qs}")
        check(all(q.startswith('"') and q.endswith('"') for q in runs["a"]["phrase"]), "phrases are quoted")
        check(all(q.startswith("+") and " -" in q for q in runs["a"]["negated"]), "negated queries are +a -b")
    if "a" in runs and "b" in runs:
        check(runs["a"] == runs["b"], "the same seed gave different files")
    if "a" in runs and "c" in runs:
        check(runs["a"] != runs["c"], "seeds 1 and 2 gave the same files")

    tiny = os.path.join(tmp, "tiny.jsonl")
    write_corpus(tiny, ["alpha beta gamma delta", "alpha beta gamma delta epsilon"])
    rc, out, err = run(script, tiny, os.path.join(tmp, "t"), "25", "1")
    context.append(f"tiny: rc {rc}\n{out}{err}")
    check(rc == 0, f"tiny corpus: exit status {rc}")
    if rc == 0:
        got = read_sets(os.path.join(tmp, "t"))
        want = {"term": 5, "intersection": 10, "union": 10, "phrase": 7, "intersection_union": 20,
                "negated": 20}
        for cat, n in want.items():
            check(len(got[cat]) == n, f"tiny {cat}: {len(got[cat])} queries, want every distinct one ({n})")
            check(len(set(identity(cat, q) for q in got[cat])) == len(got[cat]), f"tiny {cat}: a repeat")
            check(f"{cat}: only {n} distinct queries of 25" in err, f"tiny {cat}: no shortfall message")
    # Corpora that cannot give the queries: a clear error and exit status 1, never a hang.
    for name, texts, reason in (("one-word", ["same same same same"] * 3 + ["same of it an"], "one word only"),
                                ("short", ["two words", "three words here"], "4 or more words"),
                                ("empty", [], "no documents")):
        path = os.path.join(tmp, name + ".jsonl")
        write_corpus(path, texts)
        rc, out, err = run(script, path, os.path.join(tmp, name), "5", "1")
        context.append(f"{name}: rc {rc}\n{out}{err}")
        check(rc == 1 and reason in err, f"{name} corpus: exit status {rc}, stderr {err.strip()!r}")
    return report("gen_ql_queries_test", check.failures, *context)


if __name__ == "__main__":
    raise SystemExit(main())
