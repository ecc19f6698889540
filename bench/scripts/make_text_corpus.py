#!/usr/bin/env python3
"""Makes a large JSONL corpus with real word order from a small one (GCIDE): a bigram model of the
source's token stream (the project's tokenizer: runs of ASCII letters/digits, bytes >= 0x80 kept,
lowercased) walked from random starts, with document lengths drawn from the source's lengths.
So phrases, word pairs and word frequencies look like English dictionary text, at any size.
Deterministic for a given seed.
usage: make_text_corpus.py SOURCE.jsonl OUT.jsonl NUM_DOCS [SEED]"""
import json
import random
import re
import sys

TOK = re.compile(rb"[A-Za-z0-9\x80-\xff]+")


def main():
    src, dst, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
    rng = random.Random(int(sys.argv[4]) if len(sys.argv) > 4 else 1)
    vocab, ids, lengths, stream = [], {}, [], []
    with open(src, "rb") as f:
        for line in f:
            toks = [t.lower() for t in TOK.findall(json.loads(line).get("contents", "").encode())]
            if not toks:
                continue
            lengths.append(len(toks))
            for t in toks:
                i = ids.get(t)
                if i is None:
                    i = ids[t] = len(vocab)
                    vocab.append(t.decode("utf-8", "replace"))
                stream.append(i)
    # successors[w]: every token that follows w in the source (repeats kept: draws follow bigram counts)
    successors = [[] for _ in vocab]
    for a, b in zip(stream, stream[1:]):
        successors[a].append(b)
    with open(dst, "w", encoding="utf-8") as out:
        for d in range(n):
            length = rng.choice(lengths)
            w = stream[rng.randrange(len(stream))]
            words = [vocab[w]]
            for _ in range(length - 1):
                nxt = successors[w]
                w = rng.choice(nxt) if nxt and rng.random() > 0.02 else stream[rng.randrange(len(stream))]
                words.append(vocab[w])
            out.write(json.dumps({"id": f"d{d}", "contents": " ".join(words)}) + "\n")


if __name__ == "__main__":
    main()
