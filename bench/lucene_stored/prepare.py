#!/usr/bin/env python3
"""JSON lines -> the input of LuceneStored.java: "<tokens>\\t<the JSON line as given>" per document.
Tokens as in shared/anchors/lucene/tokenize.py (the project's default analyzer: maximal runs of ASCII
letters/digits, bytes >= 0x80 count as token bytes, lowercased) over the "contents" field. A JSON
line holds no raw tab or newline, so the line after the first tab is the document byte for byte
(the trailing newline and a '\\r' before it are not part of it). usage: prepare.py IN.jsonl OUT"""
import json
import re
import sys

TOK = re.compile(rb"[A-Za-z0-9\x80-\xff]+")


def main():
    src, dst = sys.argv[1:3]
    with open(src, "rb") as f, open(dst, "wb") as out:
        for n, line in enumerate(f, 1):
            line = line.rstrip(b"\n").rstrip(b"\r")
            if not line.strip():
                continue
            if b"\t" in line:
                sys.exit("%s:%d: a raw tab in a JSON line" % (src, n))
            contents = json.loads(line).get("contents", "").encode("utf-8", "surrogatepass")
            out.write(b" ".join(t.lower() for t in TOK.findall(contents)) + b"\t" + line + b"\n")


if __name__ == "__main__":
    main()
