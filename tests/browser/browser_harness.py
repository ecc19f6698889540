"""What the browser tests (status_page_test.py, search_page_test.py) share: a minimal DevTools
client over one WebSocket, headless Chromium started and stopped, a local cluster started with
scripts/cluster.sh and stopped, PNG screenshot checks, and the command line and exit codes (77 =
CTest SKIP when Chromium is not installed). Single-threaded, but for log(), which any thread may call.
"""
import argparse
import base64
import hashlib
import json
import os
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import time
import traceback
import urllib.parse
import urllib.request
import zlib

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from local_ports import port_free  # noqa: E402

SKIP = 77
WINDOW = (1280, 900)
CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                  "--no-first-run", "--no-default-browser-check", "--mute-audio",
                  "--window-size=%d,%d" % WINDOW]

T0 = time.monotonic()
NAME = "browser_test"  # the test's name in log lines: main() sets it


def log(msg):
    print("[%s %5.1fs] %s" % (NAME, time.monotonic() - T0, msg), flush=True)


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
class BrowserTest:
    """A test's cluster, browser and temporary directory; cleanup() stops and removes them all."""

    def __init__(self, args, chromium):
        self.args, self.chromium = args, chromium
        self.port = args.base_port
        self.tmp = tempfile.mkdtemp(prefix=NAME.replace("_", "-") + "-")
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

    def check_ports(self, shards):
        """Fails unless the cluster's ports, base .. base + 10 + 2 * shards, are free."""
        busy = [p for p in range(self.port, self.port + 10 + 2 * shards) if not port_free(p)]
        if busy:
            raise Failed("ports %s are in use: choose another range with --base-port or "
                         "SEARCH_BROWSER_BASE_PORT" % busy)

    def start_cluster(self, index, *extra):
        """scripts/cluster.sh start of `index` on the test's ports, with the extra options given."""
        self.cluster_started = True
        print(run([self.cluster_sh, "start", "--index", index, "--base-port", str(self.port),
                   "--build", self.args.build, "--run-dir", self.run_dir] + list(extra), timeout=90).strip())

    def start_browser(self, *extra_flags):
        profile = os.path.join(self.tmp, "chromium-cdp")
        self.browser_log = os.path.join(self.tmp, "chromium-cdp.log")
        cmd = [self.chromium] + CHROMIUM_FLAGS + list(extra_flags) + [
            "--user-data-dir=" + profile, "--remote-debugging-port=0", "about:blank"]
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

    def evaluate(self, dt, expr):
        """The value of JavaScript `expr` in the page (returned by value); Failed on a script error."""
        r = dt.call("Runtime.evaluate", expression=expr, returnByValue=True)
        if "exceptionDetails" in r:
            raise Failed("page script error: %s" % r["exceptionDetails"])
        return r["result"].get("value")

    def capture(self, dt, path):
        """Saves the page as a PNG at `path` (DevTools) and checks it; returns png_check's answer."""
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "wb") as f:
            f.write(base64.b64decode(dt.call("Page.captureScreenshot", format="png")["data"]))
        return png_check(path)


def main(test_class, name, doc, screenshot, port_offset=0):
    """Runs test_class(args, chromium).main() from the command line; returns the exit code.
    screenshot: the default PNG's file name under BUILD/tests/browser; port_offset: added to
    $SEARCH_BROWSER_BASE_PORT (default 9600) for the default base port."""
    global NAME
    NAME = name
    ap = argparse.ArgumentParser(description=doc.split("\n")[0])
    ap.add_argument("--source", required=True, help="repository root (for scripts/cluster.sh)")
    ap.add_argument("--build", required=True, help="build dir holding node/search-node and integrator/...")
    ap.add_argument("--searchctl", help="searchctl binary (default BUILD/tools/searchctl/searchctl)")
    ap.add_argument("--screenshot", help="PNG to write (default BUILD/tests/browser/%s)" % screenshot)
    ap.add_argument("--base-port", type=int,
                    default=int(os.environ.get("SEARCH_BROWSER_BASE_PORT", "9600")) + port_offset)
    args = ap.parse_args()
    args.source, args.build = os.path.abspath(args.source), os.path.abspath(args.build)
    args.searchctl = args.searchctl or os.path.join(args.build, "tools", "searchctl", "searchctl")
    args.screenshot = args.screenshot or os.path.join(args.build, "tests", "browser", screenshot)

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
        raise SystemExit(128 + signum)  # unwinds through BrowserTest.cleanup
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, on_signal)

    t = test_class(args, chromium)
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
