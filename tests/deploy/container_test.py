#!/usr/bin/env python3
"""The CPU compose cluster, built into images and started with podman-compose, answers exactly.

1. The Debian 12 base image (docker/base-image.sh: debootstrap, cached in podman's store), the
   search image (docker/Dockerfile target runtime-cpu-prebuilt: the binaries of this build copied
   into the runtime stage, no compiling) under a tag of this run, and the Prometheus image
   (docker/Dockerfile.prometheus, Debian's prometheus package).
2. docker/docker-compose.cpu.yml plus docker/docker-compose.podman.yml started with podman-compose
   under a project name of this run: the secrets job, the index job (a small generated index), two
   nodes, the integrator and Prometheus (not Grafana: no image for it here), ports picked free.
3. Secure by default: the CA and the index come out of their volumes (podman volume export), the
   API key out of the secrets job's log; queries go over HTTPS with the key through the published
   port, and their hits (ids and float32 scores, bit for bit) must equal `searchctl query` (this
   build's binary) on the same index, in and and or mode.
4. Prometheus reports its 4 targets (integrator, 2 nodes, itself) up.
5. node-1's container stopped: every answer is partial (_shards 1 of 2, coverage not full), its
   hits are shard 0's and begin with the full answer's shard-0 hits, and it comes back inside the
   integrator's deadline plus a hang guard. node-1 started again: complete, exact answers again.
6. podman-compose down -v (and the project's network, which podman-compose 1.0.3 leaves): no
   container, volume, network or pod of the project is left. Cleanup runs on failure too.
podman-compose 1.0.3 ignores depends_on conditions and health checks never run without systemd,
so every wait is a poll here (the nodes and the integrator restart until the jobs' output is there).

Takes under a minute with the images cached (about 25 s on 2 cores); an empty image store adds the
base image's debootstrap and the two images' apt-get steps (a minute or two, the mirror's speed).
Skips (77) only when podman or podman-compose is not installed (scripts/setup.sh installs them).

usage: container_test.py --source REPO --node BIN --integrator BIN --searchctl BIN
         [--image IMAGE] [--keep-image]
  --image IMAGE   run the cluster on this search image instead of building the prebuilt one (e.g.
                  the full multi-stage build of docker/build-check.sh); it is kept
"""
import argparse
import base64
import http.client
import io
import json
import os
import shutil
import ssl
import struct
import subprocess
import sys
import tarfile
import tempfile
import time
import urllib.parse

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from local_ports import free_port  # noqa: E402

SKIP = 77
SERVICES = ["secrets", "index", "node-0", "node-1", "integrator", "prometheus"]
INDEX_DOCS = 5000
QUERIES = 25
TIMEOUT_MS = 500  # the integrator's deadline (INTEGRATOR_TIMEOUT_MS)
HANG_GUARD_S = 5  # on top of the deadline: a partial answer must not hang, this is no speed test


def log(msg):
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", flush=True)


def run(cmd, check=True, capture=True, env=None, timeout=600):
    r = subprocess.run(cmd, capture_output=capture, text=True, env=env, timeout=timeout)
    if check and r.returncode != 0:
        out = (r.stdout or "") + (r.stderr or "") if capture else ""
        raise RuntimeError(f"{' '.join(cmd)} exited {r.returncode}\n{out[-4000:]}")
    return r


def f32(x):
    return struct.unpack("f", struct.pack("f", x))[0]


class Cluster:
    def __init__(self, args, work):
        self.src, self.work = args.source, work
        self.project = f"search-ctest-{os.getpid()}"
        self.image = args.image or f"localhost/search-ctest:{os.getpid()}"
        self.build_search_image = not args.image
        self.prom_image = "localhost/search-prometheus:debian12"
        self.http_port, self.prom_port = free_port(), free_port()
        while self.prom_port == self.http_port:
            self.prom_port = free_port()
        self.env = dict(os.environ)
        self.env.setdefault("CONTAINERS_CONF", os.path.join(self.src, "docker/podman/containers.conf"))
        corpus = os.path.join(work, "corpus")
        os.makedirs(corpus)
        self.env.update({"SEARCH_IMAGE": self.image, "PROMETHEUS_IMAGE": self.prom_image,
                         "HTTP_PORT": str(self.http_port), "PROMETHEUS_PORT": str(self.prom_port),
                         "PUBLISH_ADDR": "127.0.0.1", "INDEX_DOCS": str(INDEX_DOCS), "CORPUS_DIR": corpus,
                         "INTEGRATOR_CACHE_MB": "0",  # every answer computed: partial ones too
                         "INTEGRATOR_TIMEOUT_MS": str(TIMEOUT_MS)})
        self.compose = ["podman-compose", "-p", self.project,
                        "-f", os.path.join(self.src, "docker/docker-compose.cpu.yml"),
                        "-f", os.path.join(self.src, "docker/docker-compose.podman.yml")]
        self.up_done = False
        self.ssl_ctx = None
        self.auth = None

    def podman(self, *a, check=True):
        return run(["podman", *a], check=check, env=self.env)

    # --- images -------------------------------------------------------------------------------
    def build_images(self, binaries):
        t = time.time()
        run([os.path.join(self.src, "docker/base-image.sh")], env=self.env)
        log(f"base image ready ({time.time() - t:.0f} s)")
        ctx = os.path.join(self.work, "context")
        for d in ("bin", "lib", "docker"):
            os.makedirs(os.path.join(ctx, d))
        for s in ("index-build.sh", "secrets-init.sh"):
            shutil.copy(os.path.join(self.src, "docker", s), os.path.join(ctx, "docker", s))
        for b in binaries:
            dst = os.path.join(ctx, "bin", os.path.basename(b))
            shutil.copy(b, dst)
            run(["strip", "--strip-unneeded", dst], check=False)
            # A GPU build links the CUDA runtime: it goes along (the nodes run with --gpu off).
            for line in run(["ldd", b]).stdout.splitlines():
                parts = line.split()
                if parts and parts[0].startswith("libcudart.so") and len(parts) > 2 and os.path.exists(parts[2]):
                    shutil.copy(os.path.realpath(parts[2]), os.path.join(ctx, "lib", parts[0]))
        t = time.time()
        if self.build_search_image:
            self.podman("build", "-q", "-f", os.path.join(self.src, "docker/Dockerfile"),
                        "--target", "runtime-cpu-prebuilt", "-t", self.image, ctx)
            log(f"built {self.image} (target runtime-cpu-prebuilt, {time.time() - t:.0f} s)")
        else:
            self.podman("image", "inspect", self.image)
            log(f"using the image {self.image}")
        t = time.time()
        self.podman("build", "-q", "-f", os.path.join(self.src, "docker/Dockerfile.prometheus"),
                    "-t", self.prom_image, os.path.join(self.src, "docker"))
        log(f"built {self.prom_image} ({time.time() - t:.0f} s)")

    # --- the cluster ---------------------------------------------------------------------------
    def up(self):
        self.up_done = True
        run(self.compose + ["up", "-d", "--no-build"] + SERVICES, env=self.env)
        log(f"podman-compose up -d {' '.join(SERVICES)} (project {self.project}, "
            f"HTTPS :{self.http_port}, Prometheus :{self.prom_port})")

    def container(self, service):
        out = self.podman("ps", "-a", "--filter", f"label=io.podman.compose.project={self.project}",
                          "--filter", f"label=com.docker.compose.service={service}",
                          "--format", "{{.Names}}").stdout.split()
        if len(out) != 1:
            raise RuntimeError(f"expected one container of service {service}, found {out}")
        return out[0]

    def wait_job(self, service, timeout=300):
        name = self.container(service)
        deadline = time.time() + timeout
        while time.time() < deadline:
            state = self.podman("inspect", name, "--format", "{{.State.Status}} {{.State.ExitCode}}").stdout.split()
            if state[0] == "exited":
                if state[1] != "0":
                    raise RuntimeError(f"job {service} exited {state[1]}:\n{self.podman('logs', name).stdout[-3000:]}")
                return
            time.sleep(0.5)
        raise RuntimeError(f"job {service} did not finish in {timeout} s")

    def volume_files(self, volume, members):
        """The named files of a project volume, read through `podman volume export`."""
        tar = subprocess.run(["podman", "volume", "export", f"{self.project}_{volume}"], capture_output=True,
                             env=self.env, check=True).stdout
        out = {}
        with tarfile.open(fileobj=io.BytesIO(tar)) as tf:
            for m in tf.getmembers():
                name = m.name.lstrip("./")
                if any(name == p or name.startswith(p + "/") for p in members):
                    if m.isfile():
                        out[name] = tf.extractfile(m).read()
        return out

    def extract_volume(self, volume, dest):
        tar = subprocess.run(["podman", "volume", "export", f"{self.project}_{volume}"], capture_output=True,
                             env=self.env, check=True).stdout
        with tarfile.open(fileobj=io.BytesIO(tar)) as tf:
            tf.extractall(dest)

    def secrets(self):
        ca = self.volume_files("secrets", ["ca.pem"])["ca.pem"]
        ca_path = os.path.join(self.work, "ca.pem")
        with open(ca_path, "wb") as f:
            f.write(ca)
        self.ssl_ctx = ssl.create_default_context(cafile=ca_path)
        key = [ln.split()[1] for ln in self.podman("logs", self.container("secrets")).stdout.splitlines()
               if ln.startswith("api-key ")]
        if len(key) != 1:
            raise RuntimeError("the secrets job's log has no single 'api-key ID:KEY' line")
        self.auth = "ApiKey " + base64.b64encode(key[0].encode()).decode()
        log("CA certificate and API key read from the secrets volume and the secrets job's log")

    def get(self, path, timeout=30):
        """(status, JSON body or None, seconds) of an HTTPS GET through the published port."""
        conn = http.client.HTTPSConnection("127.0.0.1", self.http_port, context=self.ssl_ctx, timeout=timeout)
        t = time.time()
        try:
            conn.request("GET", path, headers={"Authorization": self.auth})
            r = conn.getresponse()
            body = r.read()
        finally:
            conn.close()
        try:
            doc = json.loads(body)
        except ValueError:
            doc = None
        return r.status, doc, time.time() - t

    def search(self, q, mode, k=10):
        return self.get(f"/search?q={urllib.parse.quote_plus(q)}&mode={mode}&k={k}")

    def wait_complete(self, query, timeout=180):
        deadline, last = time.time() + timeout, None
        while time.time() < deadline:
            try:
                status, doc, _ = self.search(query, "or")
                last = (status, doc)
                if status == 200 and doc["_shards"]["successful"] == 2 and doc["coverage"]["full"]:
                    return
            except (OSError, http.client.HTTPException) as e:
                last = repr(e)
            time.sleep(1)
        raise RuntimeError(f"no complete answer in {timeout} s; last: {last}")

    def wait_targets(self, timeout=180):
        deadline, last = time.time() + timeout, None
        while time.time() < deadline:
            try:
                conn = http.client.HTTPConnection("127.0.0.1", self.prom_port, timeout=10)
                conn.request("GET", "/api/v1/targets?state=active")
                doc = json.loads(conn.getresponse().read())
                conn.close()
                targets = doc["data"]["activeTargets"]
                last = sorted((t["labels"].get("job"), t["labels"].get("instance"), t["health"]) for t in targets)
                if len(targets) == 4 and all(t["health"] == "up" for t in targets):
                    return last
            except (OSError, ValueError, KeyError, http.client.HTTPException) as e:
                last = repr(e)
            time.sleep(2)
        raise RuntimeError(f"Prometheus did not report 4 targets up in {timeout} s; last: {last}")

    # --- teardown ------------------------------------------------------------------------------
    def leftovers(self):
        label = f"label=io.podman.compose.project={self.project}"
        left = []
        for kind, cmd in (("container", ["ps", "-a", "--filter", label, "--format", "{{.Names}}"]),
                          ("pod", ["pod", "ps", "--filter", label, "--format", "{{.Name}}"]),
                          ("volume", ["volume", "ls", "--format", "{{.Name}}"]),
                          ("network", ["network", "ls", "--format", "{{.Name}}"])):
            for name in self.podman(*cmd, check=False).stdout.split():
                if kind in ("container", "pod") or name.startswith(self.project + "_"):
                    left.append(f"{kind} {name}")
        return left

    def down(self):
        run(self.compose + ["down", "-v"], env=self.env, check=False)
        # podman-compose 1.0.3's down removes containers, pods and (-v) volumes, not the network
        # it created: docs/OPERATIONS.md's command line removes it the same way.
        for net in self.podman("network", "ls", "--filter", f"label=io.podman.compose.project={self.project}",
                               "--format", "{{.Name}}", check=False).stdout.split():
            self.podman("network", "rm", net, check=False)

    def force_cleanup(self):
        """After a failure: whatever the project left, removed by name."""
        for item in self.leftovers():
            kind, name = item.split(" ", 1)
            cmd = {"container": ["rm", "-f", "-t", "2"], "pod": ["pod", "rm", "-f"],
                   "volume": ["volume", "rm", "-f"], "network": ["network", "rm", "-f"]}[kind]
            self.podman(*cmd, name, check=False)


def hits_of(doc):
    return [(h["_id"], f32(h["_score"])) for h in doc["hits"]["hits"]]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--source", required=True)
    ap.add_argument("--node", required=True)
    ap.add_argument("--integrator", required=True)
    ap.add_argument("--searchctl", required=True)
    ap.add_argument("--image", help="an existing search image to run instead of the prebuilt one")
    ap.add_argument("--keep-image", action="store_true", help="keep this run's search image")
    args = ap.parse_args()
    args.source = os.path.abspath(args.source)
    for tool in ("podman", "podman-compose"):
        if not shutil.which(tool):
            print(f"SKIP: {tool} is not installed (scripts/setup.sh installs it)")
            return SKIP
    start = time.time()
    work = tempfile.mkdtemp(prefix="search-container-test-")
    cluster = Cluster(args, work)
    ok = False
    try:
        cluster.build_images([args.node, args.integrator, args.searchctl])
        cluster.up()
        cluster.wait_job("secrets")
        cluster.wait_job("index")
        log(f"secrets and index jobs exited 0 ({INDEX_DOCS} documents, 2 shards)")
        cluster.secrets()

        # The reference: the host's searchctl on the index the nodes serve.
        cluster.extract_volume("index", os.path.join(work, "data"))
        index = os.path.join(work, "data", "index")
        with open(os.path.join(work, "data", "queries.txt")) as f:
            queries = [q.strip() for q in f if q.strip()][:QUERIES]
        if len(queries) < QUERIES:
            raise RuntimeError(f"queries.txt holds {len(queries)} queries")
        qfile = os.path.join(work, "queries.txt")
        with open(qfile, "w") as f:
            f.write("\n".join(queries) + "\n")
        expected = {}
        for mode in ("and", "or"):
            out = run([args.searchctl, "query", "--index", index, "--queries", qfile, "--mode", mode,
                       "--k", "10"]).stdout.splitlines()
            for q, line in zip(queries, out):
                expected[(q, mode)] = [(h["id"], f32(h["score"])) for h in json.loads(line)["hits"]]
        if sum(len(v) for v in expected.values()) == 0:
            raise RuntimeError("searchctl found no hits at all: the comparison would prove nothing")

        cluster.wait_complete(queries[0])
        log("integrator answers over HTTPS with both shards")

        def check_exact(phase):
            full = {}
            for (q, mode), want in expected.items():
                status, doc, _ = cluster.search(q, mode)
                if status != 200 or doc["_shards"]["successful"] != 2 or not doc["coverage"]["full"]:
                    raise RuntimeError(f"{phase}: '{q}' {mode}: HTTP {status}, not a complete answer: {doc}")
                got = hits_of(doc)
                if got != want:
                    raise RuntimeError(f"{phase}: '{q}' {mode}: the cluster answered {got}, searchctl {want}")
                full[(q, mode)] = doc
            log(f"{phase}: {len(expected)} answers (and, or) equal searchctl query's, ids and scores")
            return full

        full = check_exact("cluster")
        targets = cluster.wait_targets()
        log(f"Prometheus: all {len(targets)} targets up: {[t[1] for t in targets]}")

        node1 = cluster.container("node-1")
        cluster.podman("stop", "-t", "10", node1)
        log(f"stopped {node1}")
        worst = 0.0
        for (q, mode), doc in full.items():
            status, part, secs = cluster.search(q, mode)
            worst = max(worst, secs)
            if status != 200:
                raise RuntimeError(f"node-1 down: '{q}' {mode}: HTTP {status}: {part}")
            sh = part["_shards"]
            if sh["total"] != 2 or sh["successful"] != 1 or sh["failed"] != 1 or part["coverage"]["full"]:
                raise RuntimeError(f"node-1 down: '{q}' {mode}: not marked partial (1 of 2 shards): {part}")
            if any(h["_shard"] != 0 for h in part["hits"]["hits"]):
                raise RuntimeError(f"node-1 down: '{q}' {mode}: a hit from shard 1: {part}")
            want = [(h["_id"], f32(h["_score"])) for h in doc["hits"]["hits"] if h["_shard"] == 0]
            if hits_of(part)[:len(want)] != want:
                raise RuntimeError(f"node-1 down: '{q}' {mode}: shard 0's hits {hits_of(part)} do not begin "
                                   f"with the full answer's shard-0 hits {want}")
            if secs > TIMEOUT_MS / 1000 + HANG_GUARD_S:
                raise RuntimeError(f"node-1 down: '{q}' {mode}: answered after {secs:.1f} s")
        log(f"node-1 down: {len(full)} partial answers (_shards 1/2, shard 0's hits), slowest {worst:.2f} s "
            f"(deadline {TIMEOUT_MS} ms)")

        cluster.podman("start", node1)
        cluster.wait_complete(queries[0])
        check_exact("node-1 restarted")

        cluster.down()
        left = cluster.leftovers()
        if left:
            raise RuntimeError(f"after down -v: {left}")
        log(f"down -v: no container, pod, volume or network of {cluster.project} left")
        ok = True
    except Exception as e:  # noqa: BLE001 - reported, then cleaned up
        log(f"FAIL: {e}")
        if cluster.up_done:
            for s in SERVICES:
                try:
                    name = cluster.container(s)
                    tail = cluster.podman("logs", "--tail", "15", name, check=False)
                    log(f"--- {s} ({name}) log tail:\n{tail.stdout}{tail.stderr}")
                except Exception:  # noqa: BLE001
                    pass
    finally:
        if cluster.up_done:
            if not ok:
                cluster.down()
            cluster.force_cleanup()
        if cluster.build_search_image and not args.keep_image:
            cluster.podman("rmi", cluster.image, check=False)
        shutil.rmtree(work, ignore_errors=True)
    if ok:
        print(f"PASS: the compose cluster in containers answers exactly, partially with a node down, and "
              f"leaves nothing ({time.time() - start:.0f} s)")
        return 0
    return 1


if __name__ == "__main__":
    sys.exit(main())
