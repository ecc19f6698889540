#!/usr/bin/env python3
"""The pods of deploy/k8s, run as local processes from the manifests themselves (no cluster).

usage: k8s_pods_test.py --source REPO --searchctl BIN --node BIN --integrator BIN [--docs N]

For every pod the StatefulSets and the Deployment make (shard-i-r, the integrator), with the
Secrets of make-secrets.sh written as Kubernetes mounts them with an fsGroup (mode 0440), this
runs each initContainer's command, then the main container's args, as the manifests give them:
$(VAR) expanded from the container's env (fieldRef metadata.name = the pod's name) and the
search-index ConfigMap, paths under /data, /secrets, /secrets-in and /init moved into a folder
of the pod. Only what a cluster would provide differs: the listen addresses become 127.0.0.1 with
free ports (the integrator's --shards and curve-servers endpoints with them), NODE_GPU is off
(README's CPU-only setting), INDEX_DOCS is --docs.

Checks: the index initContainer leaves only its shard (a second run keeps it); the secrets
initContainer leaves CURVE keys of mode 0600 the binaries accept; GET /health answers 200 without
an API key (the probes) and /search 401 without one; over HTTPS verified with make-secrets.sh's CA
and its API key, every query's hits (ids, float32 scores) equal `searchctl query` on an index
generated alone with the same settings; with replica shard-0-0 stopped, answers (not from the
integrator's cache) are again complete and exact within 60 s (its shard's other replica serves), and
with shard-0-1 stopped too, partial answers; no node counted a refused peer (the probes do not
touch the CURVE port).
Exit status: 0 pass, 1 fail, 77 skip (no python3-yaml, no openssl).
"""
import argparse
import base64
import http.client
import json
import os
import re
import shutil
import signal
import socket
import ssl
import struct
import subprocess
import sys
import tempfile
import time
import urllib.parse

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import k8s_test  # noqa: E402  (skips 77 without python3-yaml)
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from local_ports import free_port  # noqa: E402

QUERIES = 20


def f32(x):
    return struct.unpack("f", struct.pack("f", x))[0]


def log(msg):
    print(f"k8s_pods_test: {msg}", flush=True)


class Pod:
    """One pod's folder, mounts and environment."""

    def __init__(self, root, name, spec, configmaps, scripts, secret):
        self.name = name
        self.dir = os.path.join(root, name)
        self.spec = spec
        self.configmaps = configmaps
        self.mounts = {"/data": os.path.join(self.dir, "data"), "/secrets-in": os.path.join(self.dir, "secrets-in"),
                       "/secrets": os.path.join(self.dir, "secrets"), "/init": scripts}
        for p in ("/data", "/secrets-in", "/secrets"):
            os.makedirs(self.mounts[p])
        for key, value in secret.items():  # a Secret volume with defaultMode 0440 and an fsGroup
            path = os.path.join(self.mounts["/secrets-in"], key)
            with open(path, "wb") as f:
                f.write(value)
            os.chmod(path, 0o440)

    def env(self, c, extra):
        env = {}
        for ef in c.get("envFrom", []):
            env.update({k: str(v) for k, v in self.configmaps[ef["configMapRef"]["name"]].items()})
        for e in c.get("env", []):
            if "value" in e:
                env[e["name"]] = str(e["value"])
            elif e.get("valueFrom", {}).get("fieldRef", {}).get("fieldPath") == "metadata.name":
                env[e["name"]] = self.name
            else:
                raise RuntimeError(f"{self.name}: env {e['name']}: unsupported source")
        env.update(extra)
        return env

    def words(self, c, env, addresses):
        """The container's command and args, as the kubelet runs them, moved onto this machine."""
        out = []
        for w in list(c.get("command", [])) + list(c.get("args", [])):
            w = re.sub(r"\$\((\w+)\)", lambda m: env.get(m.group(1), m.group(0)), w)
            for old, new in addresses.items():
                w = w.replace(old, new)
            flag, eq, value = w.partition("=") if w.startswith("--") and "=" in w else ("", "", w)
            for prefix in sorted(self.mounts, key=len, reverse=True):
                if value == prefix or value.startswith(prefix + "/"):
                    value = self.mounts[prefix] + value[len(prefix):]
                    break
            out.append(flag + eq + value)
        return out


def run_init(pod, bindir, extra_env):
    for c in pod.spec.get("initContainers", []):
        env = pod.env(c, extra_env)
        cmd = pod.words(c, env, {})
        r = subprocess.run(cmd, env=dict(os.environ, PATH=bindir + ":" + os.environ["PATH"],
                                         DATA_DIR=pod.mounts["/data"], **env),
                           capture_output=True, text=True, timeout=300)
        if r.returncode != 0:
            raise RuntimeError(f"{pod.name}: initContainer {c['name']} ({' '.join(cmd)}) exited "
                               f"{r.returncode}:\n{r.stdout}{r.stderr}")
        yield c["name"], [ln for ln in (r.stdout + r.stderr).splitlines() if re.match(r"(index-init|secrets-copy):", ln)]


def start(pod, container, env_extra, addresses, logs, bindir):
    env = pod.env(container, env_extra)
    cmd = pod.words(container, env, addresses)
    with open(os.path.join(logs, pod.name + ".log"), "w") as out:
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, start_new_session=True,
                                env=dict(os.environ, PATH=bindir + ":" + os.environ["PATH"], **env))
    return proc, cmd


def wait_probe(container, probe, addresses, proc, what, limit=120):
    """Runs the container's exec probe (its addresses moved) until it succeeds."""
    cmd = [w for w in container[probe]["exec"]["command"]]
    for old, new in addresses.items():
        cmd = [w.replace(old, new) for w in cmd]
    end = time.time() + limit
    while time.time() < end:
        if proc.poll() is not None:
            raise RuntimeError(f"{what} exited {proc.returncode}")
        if subprocess.run(cmd, capture_output=True, timeout=30).returncode == 0:
            return
        time.sleep(0.2)
    raise RuntimeError(f"{what}: its {probe} ({' '.join(cmd)}) still fails after {limit} s")


def wait_port(port, proc, what, limit=60):
    end = time.time() + limit
    while time.time() < end:
        if proc.poll() is not None:
            raise RuntimeError(f"{what} exited {proc.returncode}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                return
        except OSError:
            time.sleep(0.2)
    raise RuntimeError(f"{what}: port {port} not open after {limit} s")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--source", required=True)
    ap.add_argument("--searchctl", required=True)
    ap.add_argument("--node", required=True)
    ap.add_argument("--integrator", required=True)
    ap.add_argument("--docs", type=int, default=4000)
    a = ap.parse_args()
    src = os.path.abspath(a.source)
    k8s = os.path.join(src, "deploy/k8s")
    if shutil.which("openssl") is None:
        print("SKIP: openssl is not installed")
        return 77
    tmp = tempfile.mkdtemp(prefix="k8s_pods_test.")
    procs = []
    ok = False
    try:
        kust, objs = k8s_test.load_dir(k8s)
        by = {}
        for o in objs:
            by.setdefault(o["kind"], {})[o["metadata"]["name"]] = o
        out = os.path.join(tmp, "out")
        r = subprocess.run(["sh", os.path.join(k8s, "make-secrets.sh"), out],
                           env=dict(os.environ, SEARCHCTL=a.searchctl), capture_output=True, text=True)
        keys = [ln.split()[1] for ln in r.stdout.splitlines() if ln.startswith("api-key ")]
        if r.returncode != 0 or len(keys) != 1:
            raise RuntimeError(f"make-secrets.sh: exit {r.returncode}, no 'api-key ID:KEY' line:\n{r.stdout}{r.stderr}")
        api_key = keys[0]
        secrets = k8s_test.read_secrets(os.path.join(out, "secrets.yaml"))
        configmaps = {n: dict(o.get("data", {})) for n, o in by.get("ConfigMap", {}).items()}
        cm = configmaps["search-index"]
        cm["INDEX_DOCS"] = str(a.docs)
        bindir = os.path.join(tmp, "bin")
        os.makedirs(bindir)
        for name, target in (("search-index-build", os.path.join(src, "docker/index-build.sh")),
                             ("searchctl", a.searchctl), ("search-node", a.node),
                             ("search-integrator", a.integrator)):
            os.symlink(os.path.abspath(target), os.path.join(bindir, name))
        scripts = os.path.join(k8s, "scripts")
        logs = os.path.join(tmp, "logs")
        os.makedirs(logs)

        # Shard pods: initContainers, then the node.
        endpoints = {}  # tcp://shard-i-r.shard-i:9210 -> tcp://127.0.0.1:PORT
        nodes = {}
        for n in sorted(by["StatefulSet"]):
            sts = by["StatefulSet"][n]
            spec = sts["spec"]["template"]["spec"]
            secret = secrets[spec["volumes"][[v["name"] for v in spec["volumes"]].index("secrets-in")]["secret"]["secretName"]]
            for r_ in range(sts["spec"]["replicas"]):
                pod = Pod(os.path.join(tmp, "pods"), f"{n}-{r_}", spec, configmaps, scripts, secret)
                for cname, lines in run_init(pod, bindir, {}):
                    log(f"{pod.name}: initContainer {cname}: {lines[-1] if lines else ''}")
                kept = sorted(os.listdir(os.path.join(pod.mounts["/data"], "index")))
                shards_kept = [d for d in kept if d.startswith("shard-")]
                if shards_kept != [n]:
                    raise RuntimeError(f"{pod.name}: /data/index holds {kept}, not only {n}")
                key = os.path.join(pod.mounts["/secrets"], "curve.key")
                if os.stat(key).st_mode & 0o777 != 0o600:
                    raise RuntimeError(f"{pod.name}: curve.key has mode {oct(os.stat(key).st_mode & 0o777)}")
                zmq, metrics = free_port(), free_port()
                node = spec["containers"][0]
                proc, cmd = start(pod, node, {"NODE_GPU": "off", "NODE_CACHE_MB": "64"},
                                  {"0.0.0.0:9210": f"127.0.0.1:{zmq}", "0.0.0.0:9211": f"127.0.0.1:{metrics}"}, logs, bindir)
                procs.append(proc)
                nodes[pod.name] = (proc, metrics, pod, node)
                endpoints[f"tcp://{pod.name}.{n}:9210"] = f"tcp://127.0.0.1:{zmq}"
                if pod.name == "shard-0-0":
                    log(f"{pod.name}: {' '.join(cmd)}")
        for name, (proc, metrics, pod, node) in nodes.items():
            wait_probe(node, "readinessProbe", {"127.0.0.1:9211": f"127.0.0.1:{metrics}"}, proc, name)
        log(f"{len(nodes)} nodes ready (their readinessProbe command passes)")

        # A second start of a pod keeps its index.
        again = list(run_init(nodes["shard-0-0"][2], bindir, {}))
        if not any("keeping" in ln for _, lines in again for ln in lines):
            raise RuntimeError(f"shard-0-0: a second run of its initContainers rebuilt the index: {again}")
        log("shard-0-0: a second run of its index initContainer keeps the index")

        # The integrator pod; its curve-servers endpoints move with the nodes' addresses.
        dep = by["Deployment"]["search-integrator"]
        spec = dep["spec"]["template"]["spec"]
        isecret = dict(secrets["search-integrator"])
        text = isecret["curve-servers"].decode()
        for old, new in endpoints.items():
            text = text.replace(old + " ", new + " ")
        isecret["curve-servers"] = text.encode()
        pod = Pod(os.path.join(tmp, "pods"), "search-integrator-0", spec, configmaps, scripts, isecret)
        for cname, lines in run_init(pod, bindir, {}):
            log(f"integrator: initContainer {cname}: {lines[-1] if lines else ''}")
        http_port, metrics = free_port(), free_port()
        addresses = dict(endpoints)
        addresses.update({"0.0.0.0:9200": f"127.0.0.1:{http_port}", "0.0.0.0:9201": f"127.0.0.1:{metrics}"})
        proc, cmd = start(pod, spec["containers"][0], {}, addresses, logs, bindir)
        procs.append(proc)
        log(f"integrator: {' '.join(cmd)}")
        wait_port(http_port, proc, "integrator")
        ctx = ssl.create_default_context(cafile=os.path.join(out, "ca.pem"))
        auth = "ApiKey " + base64.b64encode(api_key.encode()).decode()

        def get(path, with_key=True):
            conn = http.client.HTTPSConnection("127.0.0.1", http_port, context=ctx, timeout=30)
            try:
                conn.request("GET", path, headers={"Authorization": auth} if with_key else {})
                r = conn.getresponse()
                body = r.read()
            finally:
                conn.close()
            try:
                return r.status, json.loads(body)
            except ValueError:
                return r.status, None

        ready = spec["containers"][0]["readinessProbe"]["httpGet"]["path"]
        for path in ("/health", ready):
            status, health = get(path, with_key=False)
            if status != 200:
                raise RuntimeError(f"GET {path} without a key (the kubelet's probe): HTTP {status}")
        status, _ = get("/search?q=t1&k=1", with_key=False)
        if status != 401:
            raise RuntimeError(f"GET /search without a key: HTTP {status}, not 401")
        log(f"GET /health and {ready} without an API key: 200 (the probes); /search without one: 401")

        # The reference: an index generated alone with the same settings, and searchctl query.
        ref = os.path.join(tmp, "ref")
        subprocess.run([a.searchctl, "generate", "--docs", str(a.docs), "--shards", cm["INDEX_SHARDS"],
                        "--seed", cm["INDEX_SEED"], "--out", ref, "--quiet"], check=True, capture_output=True)
        qfile = os.path.join(tmp, "queries.txt")
        subprocess.run([a.searchctl, "gen-queries", "--index", ref, "--count", str(QUERIES), "--out", qfile],
                       check=True, capture_output=True)
        with open(qfile) as f:
            queries = [q.strip() for q in f if q.strip()][:QUERIES]
        expected = {}
        for mode in ("and", "or"):
            out = subprocess.run([a.searchctl, "query", "--index", ref, "--queries", qfile, "--mode", mode, "--k", "10"],
                                 check=True, capture_output=True, text=True).stdout.splitlines()
            for q, line in zip(queries, out):
                expected[(q, mode)] = [(h["id"], f32(h["score"])) for h in json.loads(line)["hits"]]
        if sum(len(v) for v in expected.values()) == 0:
            raise RuntimeError("searchctl found no hits: the comparison would prove nothing")
        nshards = len(by["StatefulSet"])

        def settle(phase, limit, k):
            """Each query answered once completely within LIMIT s (a partial answer, e.g. a deadline
            missed on a loaded machine, is asked again); a complete answer must be exact."""
            pending = dict(expected)
            end = time.time() + limit
            while pending:
                for (q, mode), want in list(pending.items()):
                    status, doc = get(f"/search?q={urllib.parse.quote_plus(q)}&mode={mode}&k={k}&timeout_ms=5000")
                    if status != 200 or doc["_shards"]["successful"] != nshards:
                        continue
                    got = [(h["_id"], f32(h["_score"])) for h in doc["hits"]["hits"]]
                    if got != want[:k]:
                        raise RuntimeError(f"{phase}: '{q}' {mode}: the cluster answered {got}, searchctl {want[:k]}")
                    del pending[(q, mode)]
                if pending and time.time() > end:
                    raise RuntimeError(f"{phase}: {len(pending)} queries got no complete answer in {limit} s, "
                                       f"e.g. {next(iter(pending))}")
                if pending:
                    time.sleep(0.5)
            log(f"{phase}: {len(expected)} answers complete and equal to searchctl query's")

        settle("all pods up", 60, 10)
        victim = nodes["shard-0-0"][0]
        victim.send_signal(signal.SIGTERM)
        victim.wait(timeout=30)
        # k=9: answers the integrator has not cached (its result cache keys on k).
        settle("shard-0-0 stopped", 60, 9)
        # Both replicas of shard 0 stopped: partial answers (shard 1's), so the complete answers
        # above did come from the remaining replica.
        other = nodes["shard-0-1"][0]
        other.send_signal(signal.SIGTERM)
        other.wait(timeout=30)
        q0 = urllib.parse.quote_plus(next(iter(expected))[0])
        end = time.time() + 60
        while True:
            status, doc = get(f"/search?q={q0}&k=8")
            if status == 200 and doc["_shards"]["successful"] == nshards - 1:
                break
            if time.time() > end:
                raise RuntimeError(f"shard-0-0 and shard-0-1 stopped: HTTP {status}, {doc}, not a partial answer")
            time.sleep(0.5)
        log(f"shard-0-0 and shard-0-1 stopped: partial answers (_shards {doc['_shards']})")
        status, _ = get(ready, with_key=False)
        if status != 200:
            raise RuntimeError(f"shard 0 down: the readiness probe {ready} gave HTTP {status}, not 200 (shard 1 answers)")
        for name, (proc, metrics, pod, node) in nodes.items():
            if proc.poll() is not None:
                continue
            text = subprocess.run(["curl", "-sf", f"http://127.0.0.1:{metrics}/metrics"], capture_output=True,
                                  text=True, timeout=30).stdout
            refused = [ln for ln in text.splitlines() if ln.startswith("search_node_refused_peers_total")]
            if not refused or any(float(ln.split()[-1]) != 0 for ln in refused):
                raise RuntimeError(f"{name}: refused peers (probes or keys wrong?): {refused}")
        log("no node refused a peer (search_node_refused_peers_total 0: probes and keys agree)")
        ok = True
        log("pass")
        return 0
    except (RuntimeError, subprocess.CalledProcessError, subprocess.TimeoutExpired, OSError, KeyError) as e:
        print(f"FAIL: {e}")
        if isinstance(e, subprocess.CalledProcessError):
            print(e.stdout, e.stderr)
        return 1
    finally:
        for p in procs:
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        for p in procs:
            try:
                p.wait(timeout=30)
            except subprocess.TimeoutExpired:
                p.kill()
        if not ok:
            for f in sorted(os.listdir(os.path.join(tmp, "logs"))) if os.path.isdir(os.path.join(tmp, "logs")) else []:
                with open(os.path.join(tmp, "logs", f)) as fh:
                    print(f"--- {f} (last lines)\n" + "".join(fh.readlines()[-15:]))
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
