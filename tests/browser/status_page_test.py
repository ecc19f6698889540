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
import argparse
import base64
import hashlib
import http.client
import json
import os
import random
import re
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
import traceback
import urllib.parse
import urllib.request
import zlib

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from local_ports import port_free  # noqa: E402

SKIP = 77
SHARDS = 2
WINDOW = (1280, 900)
CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                  "--no-first-run", "--no-default-browser-check", "--mute-audio",
                  "--window-size=%d,%d" % WINDOW]
PAGE_IDS = ["status", "shards-up", "updated", "refreshes", "err", "qps", "requests", "errors",
            "p50", "p95", "p99", "p999", "max", "samples", "hit", "hits", "misses", "entries"]


def log(msg):
    print("[status_page_test %5.1fs] %s" % (time.monotonic() - T0, msg), flush=True)


T0 = time.monotonic()


class Failed(Exception):
    pass


# ---------------------------------------------------------------- a minimal DevTools client ----
class DevTools:
    """One WebSocket (RFC 6455) to a DevTools target: JSON commands in, results out."""

    def __init__(self, ws_url, timeout=20):
        u = urllib.parse.urlparse(ws_url)
        self.sock = socket.create_connection((u.hostname, u.port), timeout=timeout)
        key = base64.b64encode(os.urandom(16)).decode()
        self.sock.sendall(("GET %s HTTP/1.1\r\nHost: %s:%d\r\nUpgrade: websocket\r\n"
                           "Connection: Upgrade\r\nSec-WebSocket-Key: %s\r\n"
                           "Sec-WebSocket-Version: 13\r\n\r\n" % (u.path, u.hostname, u.port, key)).encode())
        head = b""
        while b"\r\n\r\n" not in head:
            chunk = self.sock.recv(4096)
            if not chunk:
                raise Failed("DevTools closed the WebSocket handshake: %r" % head)
            head += chunk
        head, self.buf = head.split(b"\r\n\r\n", 1)
        lines = head.decode("latin-1").split("\r\n")
        if " 101 " not in lines[0] + " ":
            raise Failed("DevTools refused the WebSocket: %s" % lines[0])
        want = base64.b64encode(hashlib.sha1((key + "258EAFA5-E914-47DA-95CA-C5AB0DC85B11").encode()).digest())
        if not any(l.lower().startswith("sec-websocket-accept:") and l.split(":", 1)[1].strip() == want.decode()
                   for l in lines):
            raise Failed("bad Sec-WebSocket-Accept from DevTools")
        self.next_id = 0

    def _read(self, n):
        while len(self.buf) < n:
            chunk = self.sock.recv(max(65536, n - len(self.buf)))
            if not chunk:
                raise Failed("DevTools closed the WebSocket")
            self.buf += chunk
        out, self.buf = self.buf[:n], self.buf[n:]
        return out

    def _send(self, opcode, payload):
        n = len(payload)
        head = bytes([0x80 | opcode])
        if n < 126:
            head += bytes([0x80 | n])
        elif n < 65536:
            head += bytes([0x80 | 126]) + struct.pack(">H", n)
        else:
            head += bytes([0x80 | 127]) + struct.pack(">Q", n)
        mask = os.urandom(4)
        m = int.from_bytes((mask * (n // 4 + 1))[:n], "big")
        body = (int.from_bytes(payload, "big") ^ m).to_bytes(n, "big") if n else b""
        self.sock.sendall(head + mask + body)

    def _message(self):
        parts = []
        while True:
            b0, b1 = self._read(2)
            n = b1 & 0x7F
            if n == 126:
                n = struct.unpack(">H", self._read(2))[0]
            elif n == 127:
                n = struct.unpack(">Q", self._read(8))[0]
            mask = self._read(4) if b1 & 0x80 else None
            payload = self._read(n)
            if mask:
                payload = bytes(c ^ mask[i % 4] for i, c in enumerate(payload))
            op = b0 & 0x0F
            if op == 0x9:  # ping
                self._send(0xA, payload)
                continue
            if op == 0x8:
                raise Failed("DevTools closed the WebSocket")
            if op in (0x0, 0x1, 0x2):
                parts.append(payload)
                if b0 & 0x80:
                    return json.loads(b"".join(parts).decode())

    def call(self, method, **params):
        self.next_id += 1
        self._send(0x1, json.dumps({"id": self.next_id, "method": method, "params": params}).encode())
        while True:
            msg = self._message()
            if msg.get("id") == self.next_id:
                if "error" in msg:
                    raise Failed("DevTools %s: %s" % (method, msg["error"]))
                return msg["result"]

    def close(self):
        try:
            self.sock.close()
        except OSError:
            pass


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
def run(cmd, timeout=60, **kw):
    log("$ " + " ".join(cmd))
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=timeout, **kw)
    if r.returncode != 0:
        raise Failed("%s exited %d:\n%s" % (cmd[0], r.returncode, r.stdout[-3000:]))
    return r.stdout


def get_json(url, timeout=5):
    with urllib.request.urlopen(url, timeout=timeout) as r:
        return json.loads(r.read())


def kill_group(proc):
    """Ends a process this script started and its children (it leads its own session)."""
    if proc is None or proc.poll() is not None:
        return
    try:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=5)
    except (ProcessLookupError, subprocess.TimeoutExpired):
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        proc.wait(timeout=5)


def number(text, what):
    try:
        v = float(text)
    except (TypeError, ValueError):
        raise Failed("%s is not a number: %r" % (what, text))
    if v != v or v in (float("inf"), float("-inf")):
        raise Failed("%s is not finite: %r" % (what, text))
    return v


def png_check(path):
    """A PNG of the window size whose pixels are not all one value; returns (w, h, distinct bytes)."""
    data = open(path, "rb").read()
    if len(data) < 1000 or data[:8] != b"\x89PNG\r\n\x1a\n":
        raise Failed("%s is not a PNG (%d bytes)" % (path, len(data)))
    pos, idat = 8, b""
    w = h = None
    while pos + 8 <= len(data):
        n, kind = struct.unpack(">I4s", data[pos:pos + 8])
        chunk = data[pos + 8:pos + 8 + n]
        if kind == b"IHDR":
            w, h = struct.unpack(">II", chunk[:8])
        elif kind == b"IDAT":
            idat += chunk
        elif kind == b"IEND":
            break
        pos += 12 + n
    if (w, h) != WINDOW:
        raise Failed("screenshot is %sx%s, want %dx%d" % (w, h, *WINDOW))
    raw = zlib.decompress(idat)
    distinct = len(set(raw))
    if distinct < 16:  # antialiased text and colored badges give far more
        raise Failed("screenshot looks blank (%d distinct byte values)" % distinct)
    return w, h, distinct


# ------------------------------------------------------------------------------- the test ------
class Test:
    def __init__(self, args, chromium):
        self.args, self.chromium = args, chromium
        self.port = args.base_port
        self.tmp = tempfile.mkdtemp(prefix="status-page-test-")
        self.run_dir = os.path.join(self.tmp, "run")
        self.cluster_sh = os.path.join(args.source, "scripts", "cluster.sh")
        self.load = None
        self.browser = None
        self.cluster_started = False

    def cleanup(self):
        if self.load:
            self.load.stop()
            log("load stopped")
        kill_group(self.browser)
        if self.cluster_started:
            try:
                print(run([self.cluster_sh, "stop", "--run-dir", self.run_dir], timeout=60).strip())
            except (Failed, subprocess.TimeoutExpired) as e:
                print("cluster stop: %s" % e)
        shutil.rmtree(self.tmp, ignore_errors=True)

    def main(self):
        a = self.args
        busy = [p for p in range(self.port, self.port + 10 + 2 * SHARDS) if not port_free(p)]
        if busy:
            raise Failed("ports %s are in use: choose another range with --base-port or "
                         "SEARCH_BROWSER_BASE_PORT" % busy)
        index, qfile = os.path.join(self.tmp, "index"), os.path.join(self.tmp, "queries.txt")
        run([a.searchctl, "generate", "--docs", "20000", "--out", index, "--shards", str(SHARDS),
             "--seed", "1", "--quiet"])
        run([a.searchctl, "gen-queries", "--index", index, "--count", "200", "--out", qfile])
        queries = [l.strip() for l in open(qfile) if l.strip()]
        if len(queries) < 50:
            raise Failed("gen-queries wrote only %d queries" % len(queries))

        self.cluster_started = True
        print(run([self.cluster_sh, "start", "--index", index, "--base-port", str(self.port),
                   "--build", a.build, "--run-dir", self.run_dir, "--cache-mb", "16"], timeout=90).strip())
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

    def start_browser(self):
        profile = os.path.join(self.tmp, "chromium-cdp")
        self.browser_log = os.path.join(self.tmp, "chromium-cdp.log")
        cmd = [self.chromium] + CHROMIUM_FLAGS + ["--user-data-dir=" + profile, "--remote-debugging-port=0",
                                                  "about:blank"]
        log("$ " + " ".join(cmd))
        self.browser = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=open(self.browser_log, "w"),
                                        stdin=subprocess.DEVNULL, start_new_session=True)
        port_file = os.path.join(profile, "DevToolsActivePort")
        deadline = time.monotonic() + 30
        while True:
            if self.browser.poll() is not None:
                raise Failed("chromium exited %d at startup:\n%s" % (self.browser.returncode, self.tail()))
            try:
                port = int(open(port_file).read().split()[0])
                targets = get_json("http://127.0.0.1:%d/json/list" % port)
                page = [t for t in targets if t.get("type") == "page"]
                if page:
                    return DevTools(page[0]["webSocketDebuggerUrl"])
            except (OSError, ValueError, IndexError):
                pass
            if time.monotonic() > deadline:
                raise Failed("chromium DevTools not ready after 30 s:\n%s" % self.tail())
            time.sleep(0.2)

    def tail(self):
        try:
            return "".join(open(self.browser_log).readlines()[-15:])
        except OSError:
            return ""

    def read_page(self, dt):
        expr = ("JSON.stringify({ids: Object.fromEntries(%s.map(i => [i, document.getElementById(i) ? "
                "document.getElementById(i).textContent : null])), shards: Array.from("
                "document.querySelectorAll('#shards tr')).slice(1).map(r => Array.from(r.cells).map("
                "c => [c.textContent, c.className]))})" % json.dumps(PAGE_IDS))
        r = dt.call("Runtime.evaluate", expression=expr, returnByValue=True)
        if "exceptionDetails" in r:
            raise Failed("page script error: %s" % r["exceptionDetails"])
        return json.loads(r["result"]["value"])

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
            os.makedirs(os.path.dirname(live), exist_ok=True)
            with open(live, "wb") as f:
                f.write(base64.b64decode(dt.call("Page.captureScreenshot", format="png")["data"]))
            w, h, distinct = png_check(live)
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


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--source", required=True, help="repository root (for scripts/cluster.sh)")
    ap.add_argument("--build", required=True, help="build dir holding node/search-node and integrator/...")
    ap.add_argument("--searchctl", help="searchctl binary (default BUILD/tools/searchctl/searchctl)")
    ap.add_argument("--screenshot", help="PNG to write (default BUILD/tests/browser/status_page.png)")
    ap.add_argument("--base-port", type=int, default=int(os.environ.get("SEARCH_BROWSER_BASE_PORT", "9600")))
    args = ap.parse_args()
    args.source, args.build = os.path.abspath(args.source), os.path.abspath(args.build)
    args.searchctl = args.searchctl or os.path.join(args.build, "tools", "searchctl", "searchctl")
    args.screenshot = args.screenshot or os.path.join(args.build, "tests", "browser", "status_page.png")

    chromium = os.environ.get("CHROMIUM") or shutil.which("chromium") or shutil.which("chromium-browser")
    if not chromium or not os.access(chromium, os.X_OK):
        print("SKIP: chromium not found (install Debian's chromium or set CHROMIUM)")
        return SKIP
    for b in (args.searchctl, os.path.join(args.build, "node", "search-node"),
              os.path.join(args.build, "integrator", "search-integrator")):
        if not os.access(b, os.X_OK):
            print("FAIL: %s not built" % b)
            return 1
    if not 1024 <= args.base_port <= 65535 - 20:
        print("FAIL: bad base port %d" % args.base_port)
        return 1

    def on_signal(signum, _frame):
        raise SystemExit(128 + signum)  # unwinds through Test.cleanup
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, on_signal)

    t = Test(args, chromium)
    try:
        t.main()
        log("PASS (screenshot: %s)" % os.path.abspath(args.screenshot))
        return 0
    except Failed as e:
        log("FAIL: %s" % e)
        return 1
    except Exception:  # a crash here is a failure too, with its traceback
        traceback.print_exc()
        log("FAIL: unexpected exception")
        return 1
    finally:
        t.cleanup()


if __name__ == "__main__":
    sys.exit(main())
