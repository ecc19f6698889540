#!/usr/bin/env python3
"""The integrator's status page (GET /) in a real browser, against a real cluster under load.

Generates a small 2-shard index, starts a local cluster with scripts/cluster.sh on its own port
range, sends concurrent searches (some repeated, so the result cache hits), then drives headless
Chromium over the DevTools protocol: it loads http://127.0.0.1:PORT/, reads the page's DOM twice,
a few seconds apart, and checks that
  - the cluster is green and both shards are listed, with their endpoints, as "up";
  - QPS is a positive number consistent with the load this script sent;
  - the latency percentiles are numbers in order (p50 <= p95 <= p99 <= p99.9 <= max);
  - the cache hit ratio is a percentage strictly between 0 and 100 (repeats hit, first sights miss);
  - the page refreshed live between the two reads (refresh counter, "updated" time and the
    request count all moved) and never showed more requests than were sent.
It saves what it read as BUILD/.../status_page_live.png (DevTools), then a fresh load with
`chromium --screenshot` as status_page.png, and checks both are nonblank PNGs of the window size.
Exit 77 (CTest SKIP) when Chromium is not installed. The cluster, the load and the browser are
stopped on any exit (normal, failure, SIGTERM/SIGINT).

usage: status_page_test.py --source REPO --build BUILD [--screenshot PNG] [--base-port P]
  base port: --base-port, else $SEARCH_BROWSER_BASE_PORT, else 9600 (uses P .. P+13).
  chromium: $CHROMIUM, else `chromium` or `chromium-browser` on PATH.
"""
import http.client
import json
import os
import random
import re
import subprocess
import sys
import threading
import time
import urllib.parse

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import browser_harness as bh  # noqa: E402
from browser_harness import CHROMIUM_FLAGS, WINDOW, Failed, get_json, kill_group, log, png_check, run  # noqa: E402

SHARDS = 2
PAGE_IDS = ["status", "shards-up", "updated", "refreshes", "err", "qps", "requests", "errors",
            "p50", "p95", "p99", "p999", "max", "samples", "hit", "hits", "misses", "entries"]


# ------------------------------------------------------------------------------- the load ------
class Load:
    """Client threads sending GET /search; half the queries come from a small hot set."""

    def __init__(self, port, queries, threads=3, pause=0.01):
        self.port, self.queries, self.pause = port, queries, pause
        self.hot = queries[:10]
        self.lock = threading.Lock()
        self.issued = 0
        self.done = []      # monotonic completion times of 200 answers
        self.failures = []  # (status or exception, query)
        self.stop_flag = threading.Event()
        self.threads = [threading.Thread(target=self._run, args=(i,), daemon=True) for i in range(threads)]

    def start(self):
        for t in self.threads:
            t.start()

    def stop(self):
        self.stop_flag.set()
        for t in self.threads:
            t.join(timeout=10)

    def counts(self):
        with self.lock:
            return self.issued, len(self.done)

    def rate(self, seconds=10.0, end_ago=1.0):
        """Completions per second in [now - end_ago - seconds, now - end_ago]."""
        now = time.monotonic()
        with self.lock:
            n = sum(1 for t in self.done if now - end_ago - seconds <= t <= now - end_ago)
        return n / seconds

    def _run(self, seed):
        rng = random.Random(seed)
        conn = None
        while not self.stop_flag.is_set():
            q = rng.choice(self.hot) if rng.random() < 0.5 else rng.choice(self.queries)
            path = "/search?" + urllib.parse.urlencode({"q": q, "k": 10, "mode": "or"})
            try:
                if conn is None:
                    conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=10)
                with self.lock:
                    self.issued += 1
                conn.request("GET", path)
                r = conn.getresponse()
                body = r.read()
                with self.lock:
                    if r.status == 200 and b'"hits"' in body:
                        self.done.append(time.monotonic())
                    else:
                        self.failures.append((r.status, q))
            except (OSError, http.client.HTTPException) as e:
                with self.lock:
                    self.failures.append((repr(e), q))
                if conn is not None:
                    conn.close()
                conn = None
            time.sleep(self.pause)
        if conn is not None:
            conn.close()


# -------------------------------------------------------------------------------- helpers ------
def number(text, what):
    try:
        v = float(text)
    except (TypeError, ValueError):
        raise Failed("%s is not a number: %r" % (what, text))
    if v != v or v in (float("inf"), float("-inf")):
        raise Failed("%s is not finite: %r" % (what, text))
    return v


# ------------------------------------------------------------------------------- the test ------
class Test(bh.BrowserTest):
    def main(self):
        a = self.args
        self.check_ports(SHARDS)
        index, qfile = os.path.join(self.tmp, "index"), os.path.join(self.tmp, "queries.txt")
        run([a.searchctl, "generate", "--docs", "20000", "--out", index, "--shards", str(SHARDS),
             "--seed", "1", "--quiet"])
        run([a.searchctl, "gen-queries", "--index", index, "--count", "200", "--out", qfile])
        queries = [l.strip() for l in open(qfile) if l.strip()]
        if len(queries) < 50:
            raise Failed("gen-queries wrote only %d queries" % len(queries))

        self.start_cluster(index, "--cache-mb", "16")
        base = "http://127.0.0.1:%d" % self.port

        self.load = Load(self.port, queries)
        self.load.start()
        deadline = time.monotonic() + 20
        while True:
            s = get_json(base + "/stats")
            if s["qps"] > 0 and s["cache"]["hits"] > 0 and s["cache"]["misses"] > 0:
                break
            if time.monotonic() > deadline:
                raise Failed("no QPS or cache hits under load after 20 s: %s" % s)
            time.sleep(0.3)
        log("under load: qps %.1f, cache hits %d misses %d" % (s["qps"], s["cache"]["hits"], s["cache"]["misses"]))

        a_sample, b_sample, at_a, at_b = self.sample_live(base + "/")
        self.check(a_sample, "first read")
        self.check(b_sample, "second read")
        self.check_live(a_sample, b_sample, at_a, at_b)

        self.screenshot(base + "/")
        with self.load.lock:
            failures = list(self.load.failures)
        if failures:
            raise Failed("%d searches failed under load, e.g. %s" % (len(failures), failures[:3]))

    def read_page(self, dt):
        expr = ("JSON.stringify({ids: Object.fromEntries(%s.map(i => [i, document.getElementById(i) ? "
                "document.getElementById(i).textContent : null])), shards: Array.from("
                "document.querySelectorAll('#shards tr')).slice(1).map(r => Array.from(r.cells).map("
                "c => [c.textContent, c.className]))})" % json.dumps(PAGE_IDS))
        return json.loads(self.evaluate(dt, expr))

    def sample_live(self, url):
        dt = self.start_browser()
        try:
            # The headless window's viewport is smaller than --window-size: pin it for the capture.
            dt.call("Emulation.setDeviceMetricsOverride", width=WINDOW[0], height=WINDOW[1],
                    deviceScaleFactor=1, mobile=False)
            dt.call("Page.navigate", url=url)
            deadline = time.monotonic() + 20
            while True:  # the first read once the page has refreshed twice
                first = self.read_page(dt)
                n = first["ids"].get("refreshes")  # None until the page (not about:blank) is in
                if n is not None and n.isdigit() and int(n) >= 2:
                    break
                if time.monotonic() > deadline:
                    raise Failed("page did not refresh twice in 20 s: %s" % first)
                time.sleep(0.25)
            at_first = self.load.counts()
            log("first read: %s" % json.dumps(first))
            time.sleep(3.5)
            second = self.read_page(dt)
            at_second = self.load.counts()
            self.client_rate = self.load.rate()
            log("second read: %s" % json.dumps(second))
            # The page as it was just read, after seconds of real refreshes (the --screenshot run
            # below runs on virtual time, so its sparklines cover well under a second).
            live = os.path.splitext(os.path.abspath(self.args.screenshot))[0] + "_live.png"
            w, h, distinct = self.capture(dt, live)
            log("live screenshot %s: %dx%d PNG, %d bytes" % (live, w, h, os.path.getsize(live)))
            return first, second, at_first, at_second
        finally:
            dt.close()
            kill_group(self.browser)
            self.browser = None

    def check(self, s, when):
        ids, p = s["ids"], self.port
        if ids["status"] != "green":
            raise Failed("%s: status %r, want green" % (when, ids["status"]))
        if ids["err"]:
            raise Failed("%s: page shows an error: %r" % (when, ids["err"]))
        if ids["shards-up"] != "%d/%d shards up" % (SHARDS, SHARDS):
            raise Failed("%s: shards-up %r" % (when, ids["shards-up"]))
        rows = s["shards"]
        if len(rows) != SHARDS:
            raise Failed("%s: %d shard rows, want %d: %s" % (when, len(rows), SHARDS, rows))
        for i, row in enumerate(rows):
            cells = [c[0] for c in row]
            want = [str(i), "tcp://127.0.0.1:%d" % (p + 10 + 2 * i), "up"]
            if cells[:3] != want or row[2][1] != "up":
                raise Failed("%s: shard row %d is %s, want %s with class up" % (when, i, row, want))
            if number(cells[3], "shard %d last seen ms" % i) < 0:
                raise Failed("%s: shard %d last seen %r" % (when, i, cells[3]))
        qps = number(ids["qps"], "QPS")
        if qps <= 0:
            raise Failed("%s: QPS %r under load" % (when, ids["qps"]))
        lat = [number(ids[k], k) for k in ("p50", "p95", "p99", "p999", "max")]
        if not (0 < lat[0] <= lat[1] <= lat[2] <= lat[3] <= lat[4]):
            raise Failed("%s: latency percentiles out of order: %s" % (when, lat))
        m = re.fullmatch(r"(\d+(?:\.\d+)?)%", ids["hit"] or "")
        if not m:
            raise Failed("%s: cache hit ratio %r is not a percentage" % (when, ids["hit"]))
        hit = float(m.group(1))
        hits, misses = number(ids["hits"], "cache hits"), number(ids["misses"], "cache misses")
        if not (0 < hit < 100) or hits <= 0 or misses <= 0:
            raise Failed("%s: cache hit ratio %s%% (hits %s, misses %s): repeats must hit, first sights miss"
                         % (when, hit, hits, misses))
        if abs(hit - 100 * hits / (hits + misses)) > 0.051:
            raise Failed("%s: hit ratio %s%% disagrees with hits %d / misses %d" % (when, hit, hits, misses))

    def check_live(self, a, b, at_a, at_b):
        ra, rb = int(a["ids"]["refreshes"]), int(b["ids"]["refreshes"])
        if rb < ra + 2:
            raise Failed("page refreshed %d -> %d in 3.5 s: not live" % (ra, rb))
        if a["ids"]["updated"] == b["ids"]["updated"]:
            raise Failed("'updated' stayed %r for 3.5 s: not live" % a["ids"]["updated"])
        qa, qb = number(a["ids"]["requests"], "requests"), number(b["ids"]["requests"], "requests")
        if not qb > qa:
            raise Failed("request count did not move under load: %s -> %s" % (qa, qb))
        issued_b, done_a = at_b[0], at_a[1]
        if not done_a <= qb <= issued_b:
            raise Failed("page shows %d requests; %d had completed 3.5 s before and %d were sent in all"
                         % (qb, done_a, issued_b))
        qps = number(b["ids"]["qps"], "QPS")
        if not 0.5 * self.client_rate - 2 <= qps <= 2 * self.client_rate + 2:
            raise Failed("page QPS %.1f, but the load completed %.1f searches/s over the same 10 s"
                         % (qps, self.client_rate))
        log("live: refreshes %d -> %d, requests %d -> %d, page QPS %.1f vs client %.1f"
            % (ra, rb, qa, qb, qps, self.client_rate))

    def screenshot(self, url):
        out = os.path.abspath(self.args.screenshot)
        os.makedirs(os.path.dirname(out), exist_ok=True)
        if os.path.exists(out):
            os.remove(out)
        cmd = [self.chromium] + CHROMIUM_FLAGS + ["--user-data-dir=" + os.path.join(self.tmp, "chromium-shot"),
                                                  "--hide-scrollbars", "--virtual-time-budget=5000",
                                                  "--screenshot=" + out, url]
        log("$ " + " ".join(cmd))
        self.browser_log = os.path.join(self.tmp, "chromium-shot.log")
        self.browser = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=open(self.browser_log, "w"),
                                        stdin=subprocess.DEVNULL, start_new_session=True)
        try:
            rc = self.browser.wait(timeout=60)
        except subprocess.TimeoutExpired:
            raise Failed("chromium --screenshot still running after 60 s:\n%s" % self.tail())
        finally:
            kill_group(self.browser)
            self.browser = None
        if rc != 0 or not os.path.exists(out):
            raise Failed("chromium --screenshot exited %d, %s:\n%s"
                         % (rc, "wrote " + out if os.path.exists(out) else "no file", self.tail()))
        w, h, distinct = png_check(out)
        log("screenshot %s: %dx%d PNG, %d bytes, %d distinct byte values" % (out, w, h, os.path.getsize(out),
                                                                              distinct))


if __name__ == "__main__":
    sys.exit(bh.main(Test, "status_page_test", __doc__, "status_page.png"))
