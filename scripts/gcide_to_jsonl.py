#!/usr/bin/env python3
"""Converts Debian's dict-gcide dictionary into JSON lines {"id": ..., "contents": ...}.

usage: scripts/gcide_to_jsonl.py OUT.jsonl [--dict-dir /usr/share/dictd]

Reads gcide.index ("headword<TAB>OFFSET<TAB>LENGTH", OFFSET and LENGTH in dictd's base64: digits
A-Z a-z 0-9 + /, most significant first) and gcide.dict.dz (dictzip, which is gzip-compatible: it
is decompressed whole). Every entry becomes one document, in index order; the dictionary's meta
entries (00-database-*, 00-gcide-*, 00-web1913-*) are skipped. The id is the headword, with "#2",
"#3", ... appended when a headword repeats, so ids are unique. Standard library only.
"""
import argparse
import gzip
import json
import os
import re
import sys

B64 = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
B64_VALUE = {c: i for i, c in enumerate(B64)}
META = re.compile(r"^00-(database|gcide|web1913)-")


def b64_number(text):
    value = 0
    for ch in text:
        if ch not in B64_VALUE:
            raise ValueError("bad dictd base64 digit %r in %r" % (ch, text))
        value = value * 64 + B64_VALUE[ch]
    return value


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", help="output JSON-lines file")
    parser.add_argument("--dict-dir", default="/usr/share/dictd", help="where gcide.index and gcide.dict.dz are")
    args = parser.parse_args()

    index_path = os.path.join(args.dict_dir, "gcide.index")
    dict_path = os.path.join(args.dict_dir, "gcide.dict.dz")
    for path in (index_path, dict_path):
        if not os.path.exists(path):
            sys.exit("gcide_to_jsonl: %s not found (apt-get install dict-gcide)" % path)
    with gzip.open(dict_path, "rb") as f:
        data = f.read()

    seen = {}
    used = set()
    count = 0
    tmp = args.out + ".tmp"
    parent = os.path.dirname(args.out)
    if parent:
        try:
            os.makedirs(parent, exist_ok=True)
        except OSError as e:
            sys.exit("gcide_to_jsonl: cannot create %s: %s" % (parent, e.strerror))
    with open(index_path, "rb") as index, open(tmp, "w", encoding="utf-8") as out:
        for line_no, raw in enumerate(index, 1):
            line = raw.decode("utf-8", errors="replace").rstrip("\n")
            if not line:
                continue
            parts = line.split("\t")
            if len(parts) < 3:
                sys.exit("gcide_to_jsonl: %s line %d: expected headword, offset, length" % (index_path, line_no))
            headword = parts[0]
            if META.match(headword):
                continue
            offset, length = b64_number(parts[1]), b64_number(parts[2])
            if offset + length > len(data):
                sys.exit("gcide_to_jsonl: %s line %d: entry past the end of the dictionary" % (index_path, line_no))
            contents = data[offset:offset + length].decode("utf-8", errors="replace").strip()
            n = seen.get(headword, 0) + 1
            doc_id = headword if n == 1 else "%s#%d" % (headword, n)
            while doc_id in used:  # a headword that itself ends in "#<n>"
                n += 1
                doc_id = "%s#%d" % (headword, n)
            seen[headword] = n
            used.add(doc_id)
            out.write(json.dumps({"id": doc_id, "contents": contents}, ensure_ascii=False) + "\n")
            count += 1
    os.replace(tmp, args.out)
    print("gcide_to_jsonl: wrote %d documents to %s" % (count, args.out))


if __name__ == "__main__":
    main()
