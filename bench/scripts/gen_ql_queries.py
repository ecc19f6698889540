#!/usr/bin/env python3
"""Query logs in the query language, one file per category of the search-benchmark-game:
term (a), intersection (+a +b), union (a b), phrase ("a b" or "a b c"), intersection_union (+a b)
and negated (+a -b). Words come from random positions of random documents of the corpus, so
pairs co-occur and phrases occur as often as text makes them; single terms skip words of fewer
than 3 characters. Deterministic for a given seed.
Each query occurs at most once in its file, as in the search-benchmark-game: draws that repeat
a query are dropped until COUNT distinct ones are found (+a +b and +b +a, or a b and b a, are one
query: Lucene's BooleanQuery takes them as equal). A repeated query would let Lucene's query cache
answer it from memory instead of searching. A corpus that cannot give COUNT distinct queries of a
category (no new one in 1,000 draws in a row) gives fewer, with a message on stderr. A corpus with no
document of 4 or more words, or with a single word of 3 or more characters, cannot give these
queries: an error says which, exit status 1.
usage: gen_ql_queries.py CORPUS.jsonl OUTDIR COUNT_PER_CATEGORY [SEED]
writes OUTDIR/<category>.txt"""
import json
import os
import random
import re
import sys

TOK = re.compile(rb"[A-Za-z0-9\x80-\xff]+")
CATEGORIES = ["term", "intersection", "union", "phrase", "intersection_union", "negated"]


def main():
    if len(sys.argv) < 4:
        sys.exit("usage: gen_ql_queries.py CORPUS.jsonl OUTDIR COUNT_PER_CATEGORY [SEED]")
    src, outdir, count = sys.argv[1], sys.argv[2], int(sys.argv[3])
    rng = random.Random(int(sys.argv[4]) if len(sys.argv) > 4 else 1)
    docs = []
    with open(src, "rb") as f:
        for i, line in enumerate(f):
            if len(docs) < 200000:
                docs.append(line)
            else:  # reservoir sample of 200k documents
                j = rng.randrange(i + 1)
                if j < len(docs):
                    docs[j] = line
    if not docs:
        sys.exit(f"gen_ql_queries.py: {src} holds no documents")
    def tokens():
        for _ in range(100000):
            toks = [t.lower().decode("utf-8", "replace")
                    for t in TOK.findall(json.loads(docs[rng.randrange(len(docs))]).get("contents", "").encode())]
            if len(toks) >= 4:
                return toks
        sys.exit(f"gen_ql_queries.py: no document of {src} has 4 or more words (100,000 drawn)")
    def word(toks):
        for _ in range(20):
            w = toks[rng.randrange(len(toks))]
            if len(w) >= 3:
                return w
        return max(toks, key=len)
    def pair():
        toks = tokens()
        a = word(toks)
        b = word(toks)
        for _ in range(10000):
            if b != a:
                return a, b
            b = word(tokens())
        sys.exit(f"gen_ql_queries.py: {src} gives one word only ({a!r}): no pairs of two words")
    def draw(cat):
        """One query of cat and its identity (the unordered pair where the clauses are alike)."""
        if cat == "term":
            q = word(tokens())
            return q, q
        if cat == "phrase":
            toks = tokens()
            n = 2 if rng.random() < 0.7 else 3
            s = rng.randrange(len(toks) - n + 1)
            q = '"' + " ".join(toks[s:s + n]) + '"'
            return q, q
        a, b = pair()
        q = {"intersection": f"+{a} +{b}", "union": f"{a} {b}",
             "intersection_union": f"+{a} {b}", "negated": f"+{a} -{b}"}[cat]
        return q, (tuple(sorted((a, b))) if cat in ("intersection", "union") else q)
    os.makedirs(outdir, exist_ok=True)
    for cat in CATEGORIES:
        queries, seen, misses = [], set(), 0
        while len(queries) < count and misses < 1000:
            q, key = draw(cat)
            if key in seen:
                misses += 1
                continue
            seen.add(key)
            queries.append(q)
            misses = 0
        if len(queries) < count:
            print(f"gen_ql_queries.py: {cat}: only {len(queries)} distinct queries of {count} "
                  f"(no new one in {misses} draws in a row)", file=sys.stderr)
        with open(os.path.join(outdir, cat + ".txt"), "w", encoding="utf-8") as out:
            out.writelines(q + "\n" for q in queries)


if __name__ == "__main__":
    main()
