#!/usr/bin/env python3
"""Every PromQL expression of the deployment returns data from a real cluster under load.

A 2-shard index (searchctl generate), a local cluster (scripts/cluster.sh; the nodes run the
CPU/GPU scheduler in cpu mode, so the scheduler families are exported too), concurrent HTTP load with repeated
queries (result cache hits) and bad requests (error series), and a real Prometheus scraping
every second with docker/prometheus/prometheus.yml's jobs and labels (targets moved to
loopback) and docker/prometheus/rules.yml evaluated every second. Then each `expr` of every
panel target in docker/grafana/dashboards/*.json (Grafana variables substituted: $__rate_interval
-> 15s, $shard -> its All value) and each rule's `expr` and recorded series is evaluated through
/api/v1/query, as is each label_values() variable query (on a CPU-only cluster, those over
GPU-only families, search_gpu_cache_*, are left out). Fails listing every expression that
errors or returns nothing, or that groups by shard but lacks a shard; also checks that the load shows (requests, cache hits, bad requests,
both shards up, scheduler jobs). Skips (77) without Prometheus or python3-yaml.

usage: dashboards_promql_test.py --source REPO --node BIN --integrator BIN --searchctl BIN
         [--prometheus BIN] [--base-port P] [--extra-expr EXPR]...
Ports: P (default $SEARCH_DEPLOY_BASE_PORT or 9700) for the cluster (P, P+1, P+10..P+13) and
P+90 for Prometheus; moved up by 100 (up to 5 times) while any is taken.
"""
import argparse
import glob
import http.client
import json
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.parse
import urllib.request

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from local_ports import port_free  # noqa: E402

SKIP = 77
RATE_INTERVAL = "15s"  # $__rate_interval in the test: 15 scrapes at 1 s
SHARDS = 2


def log(msg):
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", flush=True)


def pick_base(start):
    for base in range(start, start + 500, 100):
        ports = [base, base + 1, base + 90] + [base + 10 + i for i in range(2 * SHARDS)]
        if all(port_free(p) for p in ports):
            return base
    raise RuntimeError(f"no free port range from {start}")


def http_get(url, timeout=5):
    with urllib.request.urlopen(url, timeout=timeout) as r:
        return r.status, r.read()


class Load:
    """Concurrent searches until stopped: fresh queries, repeats, and a few bad requests."""

    BAD = ["/search?k=10", "/search?q=t1&mode=bogus", "/search?q=t1&k=0", "/search?q=t1&k=abc",
           "/search?q=&mode=and"]

    def __init__(self, port, queries, threads=3):
        self.port, self.queries = port, queries
        self.stop = threading.Event()
        self.lock = threading.Lock()
        self.counts = {"ok": 0, "bad": 0, "other": 0, "failed": 0}
        self.threads = [threading.Thread(target=self.run, args=(i,), daemon=True) for i in range(threads)]

    def start(self):
        for t in self.threads:
            t.start()

    def finish(self):
        self.stop.set()
        for t in self.threads:
            t.join(10)

    def run(self, seed):
        rnd = random.Random(seed)
        conn = None
        n = 0
        while not self.stop.is_set():
            n += 1
            if n % 25 == 0:
                path, method, body = rnd.choice(self.BAD), "GET", None
                if n % 50 == 0:
                    path, method, body = "/search", "POST", b'{"q": "t1", "k": '  # malformed JSON
            else:
                # One query in three comes from a small hot set: result cache hits.
                q = rnd.choice(self.queries[:20]) if rnd.random() < 0.33 else rnd.choice(self.queries)
                mode = ("and", "or", "andor")[n % 3]
                path = "/search?" + urllib.parse.urlencode({"q": q, "k": 10, "mode": mode})
                method, body = "GET", None
            try:
                if conn is None:
                    conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=5)
                conn.request(method, path, body=body)
                r = conn.getresponse()
                r.read()
                key = "ok" if r.status == 200 else "bad" if r.status == 400 else "other"
            except (OSError, http.client.HTTPException):
                key = "failed"
                conn = None
                time.sleep(0.05)
            with self.lock:
                self.counts[key] += 1
            time.sleep(0.005)


def substitute(expr, variables):
    """Grafana variables -> concrete values; unknown ones raise."""
    builtins = {"__rate_interval": RATE_INTERVAL, "__interval": "5s", "__range": "1m", "__range_s": "60",
                "__range_ms": "60000", "__interval_ms": "5000"}

    def repl(m):
        name = m.group(1) or m.group(2)
        if name in builtins:
            return builtins[name]
        if name in variables:
            return variables[name]
        raise KeyError(f"undefined Grafana variable ${name}")
    return re.sub(r"\$\{(\w+)(?::\w+)?\}|\$(\w+)", repl, expr)


def dashboard_queries(source):
    out = []
    for path in sorted(glob.glob(os.path.join(source, "docker/grafana/dashboards/*.json"))):
        with open(path) as f:
            dash = json.load(f)
        variables = {}
        for v in dash.get("templating", {}).get("list", []):
            # A label_values(SELECTOR, LABEL) variable: SELECTOR must return series with LABEL.
            q = v.get("query", {})
            q = q.get("query", "") if isinstance(q, dict) else q
            m = re.fullmatch(r"\s*label_values\((.*),\s*(\w+)\s*\)\s*", q or "")
            if m:
                out.append((f"{os.path.basename(path)}: variable ${v['name']}", m.group(1), m.group(2)))
            if v.get("includeAll"):
                variables[v["name"]] = v.get("allValue") or ".*"
            else:
                cur = v.get("current", {}).get("value")
                variables[v["name"]] = cur[0] if isinstance(cur, list) else (cur or "")

        def walk(panels):
            for p in panels:
                for t in p.get("targets", []):
                    where = f"{os.path.basename(path)}: {p.get('title')} [{t.get('refId')}]"
                    try:
                        out.append((where, substitute(t.get("expr", ""), variables), None))
                    except KeyError as e:
                        out.append((where, f"<{e.args[0]}>", None))
                walk(p.get("panels", []))
        walk(dash.get("panels", []))
    return out


# Families only a node with a GPU exports (gpu_cache registers them; a CPU-only build has no
# gpu_cache): on a CPU-only cluster their panels and rules are empty by design.
GPU_ONLY_FAMILY = re.compile(r"search_gpu_cache_[a-z0-9_]+")


def names_in(expr):
    """Metric and recorded-series names in a PromQL expression (label values left out)."""
    bare = re.sub(r'"[^"]*"', '""', expr)
    return set(re.findall(r"\b(?:search|process)[_:][a-z0-9_:]*[a-z0-9_]", bare))


def gpu_only(expr, gpu_only_records):
    """Whether every name in expr is a GPU-only family or a rule recorded from those alone."""
    names = names_in(expr)
    return bool(names) and all(GPU_ONLY_FAMILY.fullmatch(n) or n in gpu_only_records for n in names)


def gpu_only_records(source):
    """The recorded series of rules.yml computed from GPU-only families alone."""
    import yaml
    with open(os.path.join(source, "docker/prometheus/rules.yml")) as f:
        rules = yaml.safe_load(f)
    return {r["record"] for g in rules["groups"] for r in g["rules"]
            if r.get("record") and gpu_only(r["expr"], set())}


def rule_queries(source):
    import yaml
    with open(os.path.join(source, "docker/prometheus/rules.yml")) as f:
        rules = yaml.safe_load(f)
    out = []
    for g in rules["groups"]:
        for r in g["rules"]:
            name = r.get("record") or r.get("alert")
            out.append((f"rules.yml: {name} (expr)", r["expr"], None))
            if r.get("record"):
                out.append((f"rules.yml: {name} (recorded series)", r["record"], None))
    return out


class Prometheus:
    def __init__(self, binary, workdir, port):
        self.binary, self.dir, self.port = binary, workdir, port
        self.proc = None
        self.log_path = os.path.join(workdir, "prometheus.log")

    def start(self, config_path):
        self.log = open(self.log_path, "w")
        self.proc = subprocess.Popen(
            [self.binary, f"--config.file={config_path}", f"--storage.tsdb.path={self.dir}/tsdb",
             f"--web.listen-address=127.0.0.1:{self.port}", "--log.level=warn",
             "--storage.tsdb.retention.time=1h"],
            stdout=self.log, stderr=subprocess.STDOUT, start_new_session=True)
        deadline = time.time() + 30
        while time.time() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"prometheus exited ({self.proc.returncode}): {self.tail()}")
            try:
                if http_get(f"http://127.0.0.1:{self.port}/-/ready", 1)[0] == 200:
                    return
            except OSError:
                pass
            time.sleep(0.2)
        raise RuntimeError("prometheus not ready after 30 s")

    def query(self, expr):
        url = f"http://127.0.0.1:{self.port}/api/v1/query?" + urllib.parse.urlencode({"query": expr})
        try:
            with urllib.request.urlopen(url, timeout=10) as r:
                return json.load(r)
        except urllib.error.HTTPError as e:  # 400/422: a bad expression, with its message
            try:
                return json.load(e)
            except ValueError:
                return {"status": "error", "error": f"HTTP {e.code}"}

    def tail(self):
        try:
            with open(self.log_path) as f:
                return f.read()[-2000:]
        except OSError:
            return ""

    def stop(self):
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def problem(result):
    """None when the query answered with data, else why not."""
    if result.get("status") != "success":
        return f"error: {result.get('errorType', '')} {result.get('error', result)}"
    data = result.get("data", {})
    if data.get("resultType") in ("vector", "matrix") and not data.get("result"):
        return "no data (empty result)"
    return None


def groups_by_shard(expr):
    return re.search(r"\bby\s*\([^)]*\bshard\b", expr) is not None


def value(prom, expr):
    r = prom.query(expr)
    res = r.get("data", {}).get("result", []) if r.get("status") == "success" else []
    return float(res[0]["value"][1]) if res else None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--source", required=True)
    ap.add_argument("--node", required=True)
    ap.add_argument("--integrator", required=True)
    ap.add_argument("--searchctl", required=True)
    ap.add_argument("--prometheus", default=shutil.which("prometheus") or "/usr/bin/prometheus")
    ap.add_argument("--base-port", type=int, default=int(os.environ.get("SEARCH_DEPLOY_BASE_PORT", "9700")))
    ap.add_argument("--extra-expr", action="append", default=[],
                    help="also evaluate EXPR (e.g. a bogus one, to see the test fail)")
    ap.add_argument("--warmup", type=float, default=12.0, help="seconds of load before evaluating")
    a = ap.parse_args()
    source = os.path.abspath(a.source)
    try:
        import yaml
    except ImportError:
        print("SKIP: python3-yaml is not installed")
        return SKIP
    if not os.access(a.prometheus, os.X_OK):
        print(f"SKIP: no Prometheus binary ({a.prometheus}; Debian package prometheus)")
        return SKIP
    for b in (a.node, a.integrator, a.searchctl):
        if not os.access(b, os.X_OK):
            print(f"FAIL: {b} is not built")
            return 1

    tmp = tempfile.mkdtemp(prefix="deploy-promql-")
    run_dir = os.path.join(tmp, "run")
    prom = None
    load = None
    cluster_started = False

    def on_signal(signum, _frame):
        raise SystemExit(128 + signum)
    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    ok = False
    try:
        # Index and queries.
        index = os.path.join(tmp, "index")
        subprocess.run([a.searchctl, "generate", "--docs", "20000", "--shards", str(SHARDS), "--seed", "7",
                        "--out", index, "--quiet"], check=True, stdout=subprocess.DEVNULL)
        qfile = os.path.join(tmp, "queries.txt")
        subprocess.run([a.searchctl, "gen-queries", "--index", index, "--count", "400", "--out", qfile],
                       check=True, stderr=subprocess.DEVNULL)
        with open(qfile) as f:
            queries = [ln.strip() for ln in f if ln.strip()]

        # The nodes run the CPU/GPU scheduler in cpu mode (cluster.sh --node-args), so that they
        # export the search_sched_* families a GPU node exports (without a scheduler, on CPU-only
        # hosts, the scheduler panels are empty by design).
        build = os.path.join(tmp, "build")
        os.makedirs(os.path.join(build, "node"))
        os.makedirs(os.path.join(build, "integrator"))
        os.symlink(os.path.abspath(a.node), os.path.join(build, "node", "search-node"))
        os.symlink(os.path.abspath(a.integrator), os.path.join(build, "integrator", "search-integrator"))

        base = pick_base(a.base_port)
        prom_port = base + 90
        log(f"cluster on ports {base}.., Prometheus on {prom_port}, work dir {tmp}")
        cluster_started = True
        subprocess.run(["bash", os.path.join(source, "scripts/cluster.sh"), "start", "--index", index,
                        "--base-port", str(base), "--build", build, "--run-dir", run_dir, "--cache-mb", "16",
                        "--node-args", "--scheduler cpu"],
                       check=True, cwd=source)

        # Prometheus: the deployment's scrape config with its targets on loopback.
        with open(os.path.join(source, "docker/prometheus/prometheus.yml")) as f:
            cfg = yaml.safe_load(f)
        cfg["global"].update({"scrape_interval": "1s", "scrape_timeout": "1s", "evaluation_interval": "1s"})
        cfg["rule_files"] = [os.path.join(source, "docker/prometheus/rules.yml")]
        targets = 0
        for job in cfg["scrape_configs"]:
            for sc in job.get("static_configs", []):
                moved = []
                for t in sc["targets"]:
                    host = t.split(":")[0]
                    if host == "integrator":
                        moved.append(f"127.0.0.1:{base + 1}")
                    elif re.fullmatch(r"node-\d+", host):
                        shard = int(host[5:])
                        if sc.get("labels", {}).get("shard") != str(shard):
                            raise RuntimeError(f"prometheus.yml: target {t} is not labelled shard={shard}")
                        moved.append(f"127.0.0.1:{base + 11 + 2 * shard}")
                    elif host == "localhost":
                        moved.append(f"127.0.0.1:{prom_port}")
                    else:
                        raise RuntimeError(f"prometheus.yml: unknown target {t}")
                sc["targets"] = moved
                targets += len(moved)
        cfg_path = os.path.join(tmp, "prometheus.yml")
        with open(cfg_path, "w") as f:
            yaml.safe_dump(cfg, f)
        prom = Prometheus(a.prometheus, tmp, prom_port)
        prom.start(cfg_path)

        load = Load(base, queries)
        load.start()
        log(f"load running; waiting {a.warmup:.0f} s for rate windows to fill")
        time.sleep(a.warmup)
        up = value(prom, "count(up == 1)")
        if up != targets:
            print(f"FAIL: {up} of {targets} scrape targets up")
            return 1

        queries_to_check = dashboard_queries(source) + rule_queries(source)
        if problem(prom.query("search_gpu_cache_capacity_bytes")) is not None:  # no node has a GPU cache
            records = gpu_only_records(source)
            skipped = [q for q in queries_to_check if gpu_only(q[1], records)]
            queries_to_check = [q for q in queries_to_check if q not in skipped]
            log(f"CPU-only cluster: {len(skipped)} expressions over GPU-only families not checked, e.g. "
                f"{[w for w, _, _ in skipped[:3]]}")
        queries_to_check += [(f"--extra-expr {e}", e, None) for e in a.extra_expr]
        # Recorded series need a rule evaluation after the data: retry failures for a while
        # (generous: a loaded machine may evaluate late).
        failures = {}
        pending = list(queries_to_check)
        deadline = time.time() + 30
        while True:
            failures = {}
            for where, expr, label in pending:
                if expr.startswith("<"):
                    failures[(where, expr, label)] = expr[1:-1]
                    continue
                result = prom.query(expr)
                why = problem(result)
                series = result.get("data", {}).get("result", []) if why is None else []
                if why is None and label and not any(label in s["metric"] for s in series):
                    why = f"no series with label '{label}' (label_values)"
                if why is None and groups_by_shard(expr):
                    seen = {s["metric"].get("shard") for s in series}
                    missing = {str(i) for i in range(SHARDS)} - seen
                    if missing:
                        why = f"grouped by shard but shard(s) {sorted(missing)} missing (got {sorted(map(str, seen))})"
                if why:
                    failures[(where, expr, label)] = why
            if not failures or time.time() > deadline:
                break
            pending = list(failures)
            time.sleep(1)

        # The load must show up in the numbers, not only as series.
        checks = [
            ('sum(search_requests_total{job="search-integrator", status="ok"})', lambda v: v > 0,
             "searches answered"),
            ('sum(search_result_cache_hits_total{job="search-integrator"})', lambda v: v > 0, "result cache hits"),
            ('sum(search_bad_requests_total{job="search-integrator"})', lambda v: v > 0, "bad requests counted"),
            ("search:shards_up:sum", lambda v: v == SHARDS, f"{SHARDS} shards up"),
            ('sum(search_sched_jobs_total{job="search-node", shard="0"})', lambda v: v > 0,
             "scheduler jobs on node 0"),
            ('sum(search_list_cache_hits_total{job="search-node", shard="1"})', lambda v: v > 0,
             "list cache hits on node 1"),
            ('sum(search_requests_total{job="search-node", shard="1"})', lambda v: v > 0, "requests on node 1"),
            ("search:integrator_requests:rate1m", lambda v: v >= 0, "recorded request rate"),
        ]
        bad_values = []
        for expr, pred, what in checks:
            v = value(prom, expr)
            if v is None or not pred(v):
                bad_values.append(f"{what}: {expr} = {v}")
        load.finish()
        log(f"load: {load.counts}")
        n_dash = sum(1 for w, _, _ in queries_to_check if w.endswith("]"))
        n_var = sum(1 for _, _, label in queries_to_check if label)
        print(f"evaluated {len(queries_to_check)} expressions ({n_dash} dashboard targets, {n_var} variable "
              f"queries, {len(queries_to_check) - n_dash - n_var} from rules.yml or --extra-expr)")
        for (where, expr, _), why in sorted(failures.items()):
            print(f"FAIL: {where}\n      {expr}\n      -> {why}")
        for b in bad_values:
            print(f"FAIL: {b}")
        if failures or bad_values:
            print(f"{len(failures)} expression(s) without data, {len(bad_values)} value check(s) failed")
            return 1
        ok = True
        print("PASS: every dashboard and rule expression returns data")
        return 0
    except (subprocess.CalledProcessError, RuntimeError) as e:
        print(f"FAIL: {e}")
        return 1
    finally:
        if load:
            load.stop.set()
        if prom:
            if not ok:
                print("--- prometheus log (tail) ---\n" + prom.tail())
            prom.stop()
        if cluster_started:
            subprocess.run(["bash", os.path.join(source, "scripts/cluster.sh"), "stop", "--run-dir", run_dir],
                           cwd=source, stdout=subprocess.DEVNULL)
            if not ok:
                for name in sorted(glob.glob(os.path.join(run_dir, "*.log"))):
                    with open(name, errors="replace") as f:
                        print(f"--- {os.path.basename(name)} (tail) ---\n" + f.read()[-1500:])
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
