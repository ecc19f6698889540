#!/usr/bin/env python3
"""End-to-end latency of GET /search with the hits' _source against _source=false, on a running
cluster: one kept-alive HTTP connection, closed loop, each query of the file sent twice (once per
variant, the order alternating query by query so neither variant gets the other's warm caches),
every query distinct so the result cache never answers. Latency is the client's, from sending the
request to the whole answer read; the integrator's took_us is reported beside it.
Prints one JSON line per variant: queries, p50/p90/p99 ms (client), p50 took_us, mean answer bytes.
usage: source_latency.py --url http://127.0.0.1:9200 --queries FILE [--mode or] [--k 10] [--count N]
       [--highlight]   (adds highlight=true to both variants)
"""
import argparse
import http.client
import json
import sys
import time
import urllib.parse


def pct(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(p / 100 * len(xs)))]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--url", default="http://127.0.0.1:9200")
    ap.add_argument("--queries", required=True)
    ap.add_argument("--mode", default="or")
    ap.add_argument("--k", type=int, default=10)
    ap.add_argument("--count", type=int, default=2000)
    ap.add_argument("--highlight", action="store_true")
    a = ap.parse_args()
    u = urllib.parse.urlparse(a.url)
    queries = list(dict.fromkeys(l.strip() for l in open(a.queries) if l.strip()))[:a.count]
    conn = http.client.HTTPConnection(u.hostname, u.port, timeout=30)
    variants = {"source": {}, "no_source": {"_source": "false"}}
    res = {v: {"lat": [], "took": [], "bytes": 0, "hits": 0, "with_source": 0} for v in variants}
    for i, q in enumerate(queries):
        order = list(variants) if i % 2 == 0 else list(variants)[::-1]
        for v in order:
            params = {"q": q, "mode": a.mode, "k": a.k, **variants[v]}
            if a.highlight:
                params["highlight"] = "true"
            t0 = time.perf_counter()
            conn.request("GET", "/search?" + urllib.parse.urlencode(params))
            r = conn.getresponse()
            body = r.read()
            dt = time.perf_counter() - t0
            if r.status != 200:
                sys.exit("HTTP %d for %r: %s" % (r.status, q, body[:300]))
            j = json.loads(body)
            if j.get("cached"):
                sys.exit("a cached answer for %r: queries must be distinct" % q)
            s = res[v]
            s["lat"].append(dt * 1e3)
            s["took"].append(j["took_us"])
            s["bytes"] += len(body)
            s["hits"] += len(j["hits"]["hits"])
            s["with_source"] += sum(1 for h in j["hits"]["hits"] if "_source" in h)
    for v, s in res.items():
        n = len(s["lat"])
        print(json.dumps({"variant": v, "queries": n, "mode": a.mode, "k": a.k, "highlight": a.highlight,
                          "p50_ms": round(pct(s["lat"], 50), 3), "p90_ms": round(pct(s["lat"], 90), 3),
                          "p99_ms": round(pct(s["lat"], 99), 3), "took_us_p50": pct(s["took"], 50),
                          "mean_answer_bytes": round(s["bytes"] / n), "hits": s["hits"],
                          "hits_with_source": s["with_source"]}))


if __name__ == "__main__":
    main()
