#!/usr/bin/env python3
"""Checks of the Kubernetes manifests in deploy/k8s (no cluster needed).

usage: k8s_test.py CHECK --source REPO [--searchctl BIN] [--node BIN] [--integrator BIN]
  schema       deploy/k8s/validate/install.sh (npm ci: kubernetes-models, js-yaml, into an ignored
               folder), then validate.js: every manifest of kustomization.yaml, its generated
               ConfigMap and, with --searchctl, make-secrets.sh's Secrets against the Kubernetes API
               schemas and without unknown fields; its self-test shows broken copies are refused.
               Skips (77) without node or npm.
  consistency  the integrator's --shards lists every StatefulSet shard-0..N-1 in order, each as its
               replicas' stable names (tcp://shard-i-r.shard-i:PORT joined by "|"), PORT the nodes'
               --listen and ZeroMQ port, shard-i's headless Service (clusterIP None, selector of the
               pods); INDEX_SHARDS = N; each shard has a PodDisruptionBudget of maxUnavailable 1
               over its pods with 2+ replicas; probes and scrape annotations name ports that exist;
               security is on (no --insecure; CURVE, TLS and API-key flags read from the copied
               Secret). With --node/--integrator, every flag given exists in the binary's --help.
               With --searchctl, make-secrets.sh's Secrets hold every file the pods read, one CURVE
               key a pod, curve-servers lines for exactly the --shards endpoints. The same checks
               pass on copies given a third shard or a third replica as README.md's "Scaling"
               says (and README.md must still give those steps), and fail on
               copies with a shard missing from --shards or a replica count that disagrees.
               Skips (77) without python3-yaml.
Exit status: 0 pass, 1 fail (each problem printed), 77 skip.
"""
import argparse
import base64
import os
import re
import shutil
import subprocess
import sys
import tempfile

SKIP = 77

try:
    import yaml
except ImportError:
    print("SKIP: python3-yaml is not installed")
    sys.exit(SKIP)


def load_dir(d):
    """The objects of d/kustomization.yaml's resources, and the kustomization."""
    with open(os.path.join(d, "kustomization.yaml")) as f:
        k = yaml.safe_load(f)
    objs = []
    for r in k.get("resources", []):
        with open(os.path.join(d, r)) as f:
            objs += [o for o in yaml.safe_load_all(f) if o]
    return k, objs


def pod_spec(o):
    return o["spec"]["template"]["spec"]


def container(o, name):
    return next(c for c in pod_spec(o)["containers"] + pod_spec(o).get("initContainers", []) if c["name"] == name)


def flags_of(args):
    """{--flag: value or True} of a container's args (--flag=value or --flag value)."""
    out = {}
    words = list(args)
    i = 0
    while i < len(words):
        w = words[i]
        if w.startswith("--"):
            if "=" in w:
                k, v = w.split("=", 1)
                out[k] = v
            elif i + 1 < len(words) and not words[i + 1].startswith("--"):
                out[w] = words[i + 1]
                i += 1
            else:
                out[w] = True
        i += 1
    return out


def port_of(endpoint):
    return int(endpoint.rsplit(":", 1)[1])


def sources(root, folder):
    out = []
    for dirpath, _, files in os.walk(os.path.join(root, folder)):
        out += [os.path.join(dirpath, f) for f in files if f.endswith((".cpp", ".hpp"))]
    return out


def check_consistency(d, helps=None, secrets=None, src_root=None):
    """Problems (strings) of the manifests in d; secrets: {name: {key: bytes}} from make-secrets;
    src_root: the repository (the metrics a probe waits for must be registered in node/)."""
    problems = []
    p = problems.append
    k, objs = load_dir(d)
    by = {}
    for o in objs:
        by.setdefault(o["kind"], {})[o["metadata"]["name"]] = o
    stss = by.get("StatefulSet", {})
    names = sorted(stss, key=lambda n: int(n.split("-", 1)[1]) if re.fullmatch(r"shard-\d+", n) else -1)
    for n in names:
        if not re.fullmatch(r"shard-\d+", n):
            p(f"StatefulSet {n}: not named shard-<i>")
    if names != [f"shard-{i}" for i in range(len(names))]:
        p(f"StatefulSets {names} are not shard-0..shard-{len(names) - 1}")
    if not names:
        p("no shard StatefulSet")
    cm = by.get("ConfigMap", {}).get("search-index", {}).get("data", {})
    if str(cm.get("INDEX_SHARDS")) != str(len(names)):
        p(f"ConfigMap search-index INDEX_SHARDS={cm.get('INDEX_SHARDS')} but {len(names)} shard StatefulSets")
    generated = {g["name"]: g for g in k.get("configMapGenerator", [])}

    def check_pod(o, what, main):
        spec = pod_spec(o)
        ann = o["spec"]["template"]["metadata"].get("annotations", {})
        c = container(o, main)
        ports = {pp.get("name"): pp["containerPort"] for pp in c.get("ports", [])}
        if ann.get("prometheus.io/scrape") != "true":
            p(f"{what}: no prometheus.io/scrape annotation")
        if int(ann.get("prometheus.io/port", -1)) != ports.get("metrics"):
            p(f"{what}: prometheus.io/port {ann.get('prometheus.io/port')} is not its metrics port {ports.get('metrics')}")
        f = flags_of(c.get("args", []) or c.get("command", []))
        if port_of(str(f.get("--metrics", ":0"))) != ports.get("metrics"):
            p(f"{what}: --metrics {f.get('--metrics')} is not its metrics port")
        for probe in ("startupProbe", "readinessProbe", "livenessProbe"):
            pr = c.get(probe)
            if pr is None:
                if probe != "startupProbe":
                    p(f"{what}: no {probe}")
                continue
            h = pr.get("httpGet") or pr.get("tcpSocket")
            if h is not None and h["port"] not in ports and h["port"] not in ports.values():
                p(f"{what}: {probe} port {h['port']} is not a container port")
            if pr.get("tcpSocket") and h["port"] in ("zmq", ports.get("zmq")):
                p(f"{what}: {probe} connects to the ZeroMQ port: every probe would count as a refused CURVE peer")
            if "exec" in pr:
                line = " ".join(pr["exec"]["command"])
                m = re.search(r"127\.0\.0\.1:(\d+)/metrics", line)
                if not m or int(m.group(1)) != ports.get("metrics"):
                    p(f"{what}: {probe} does not read its own metrics port: {line}")
                for metric in re.findall(r"\^(search_[a-z_]+)", line):
                    if not any(f'"{metric}"' in open(f).read() for f in sources(src_root, "node")):
                        p(f"{what}: {probe} waits for metric {metric}, which node/ never registers")
        if "--insecure" in f:
            p(f"{what}: --insecure")
        vols = {v["name"]: v for v in spec.get("volumes", [])}
        claims = {t["metadata"]["name"] for t in o["spec"].get("volumeClaimTemplates", [])}
        for cc in spec["containers"] + spec.get("initContainers", []):
            for m in cc.get("volumeMounts", []):
                if m["name"] not in vols and m["name"] not in claims:
                    p(f"{what}: container {cc['name']} mounts {m['name']}, which is no volume")
            for ef in cc.get("envFrom", []):
                name = ef.get("configMapRef", {}).get("name")
                if name and name not in by.get("ConfigMap", {}) and name not in generated:
                    p(f"{what}: envFrom ConfigMap {name} does not exist")
        for v in vols.values():
            name = v.get("configMap", {}).get("name")
            if name and name not in by.get("ConfigMap", {}) and name not in generated:
                p(f"{what}: volume {v['name']}: ConfigMap {name} does not exist")
        for cc in spec.get("initContainers", []):
            script = next((w for w in cc.get("command", []) if w.startswith("/init/")), None)
            if script and os.path.basename(script) not in [os.path.basename(x) for x in
                                                           generated.get("search-init", {}).get("files", [])]:
                p(f"{what}: initContainer {cc['name']} runs {script}, not in the search-init ConfigMap")
        # Secure: the CURVE secret key comes from the in-memory copy (mode 0600), not the Secret volume.
        if not str(f.get("--curve-key", "")).startswith("/secrets/"):
            p(f"{what}: --curve-key {f.get('--curve-key')} is not under /secrets")
        sec = [v for v in vols.values() if "secret" in v]
        if len(sec) != 1:
            p(f"{what}: {len(sec)} Secret volumes (one expected)")
        if helps and main in helps:
            for flag in f:
                if flag not in helps[main]:
                    p(f"{what}: {flag} is not an option of {main} (its --help)")
        return c, f, ports, (sec[0]["secret"]["secretName"] if sec else None)

    shards = []
    for n in names:
        o = stss[n]
        what = f"StatefulSet {n}"
        labels = o["spec"]["template"]["metadata"]["labels"]
        sel = o["spec"]["selector"]["matchLabels"]
        if any(labels.get(a) != b for a, b in sel.items()):
            p(f"{what}: selector {sel} does not match its pod labels")
        if o["spec"].get("serviceName") != n:
            p(f"{what}: serviceName {o['spec'].get('serviceName')} is not {n}")
        svc = by.get("Service", {}).get(n)
        if svc is None:
            p(f"{what}: no headless Service {n}")
        else:
            if svc["spec"].get("clusterIP") != "None":
                p(f"Service {n}: not headless (clusterIP None)")
            if svc["spec"].get("selector") != sel:
                p(f"Service {n}: selector {svc['spec'].get('selector')} is not the StatefulSet's {sel}")
        c, f, ports, secret = check_pod(o, what, "node")
        env = {e["name"]: e.get("value") for e in c.get("env", [])}
        init_env = {e["name"]: e.get("value") for e in container(o, "index").get("env", [])}
        if f.get("--index") != "/data/index/$(SHARD)" or env.get("SHARD") != n or init_env.get("SHARD") != n:
            p(f"{what}: --index {f.get('--index')} with SHARD={env.get('SHARD')} (index init SHARD="
              f"{init_env.get('SHARD')}) does not serve /data/index/{n}")
        listen = port_of(str(f.get("--listen", ":0")))
        if listen != ports.get("zmq"):
            p(f"{what}: --listen port {listen} is not its zmq containerPort {ports.get('zmq')}")
        if svc is not None and listen not in [pp["port"] for pp in svc["spec"]["ports"]]:
            p(f"Service {n}: does not carry the nodes' port {listen}")
        for flag in ("--curve-key", "--curve-clients"):
            if flag not in f:
                p(f"{what}: no {flag}")
        if secret != f"search-{n}":
            p(f"{what}: mounts Secret {secret}, make-secrets.sh makes search-{n}")
        replicas = o["spec"].get("replicas", 1)
        if replicas < 2:
            p(f"{what}: {replicas} replica(s): a rolling update or a drain takes the shard down")
        pdbs = [b for b in by.get("PodDisruptionBudget", {}).values()
                if b["spec"].get("selector", {}).get("matchLabels") == sel]
        if len(pdbs) != 1:
            p(f"{what}: {len(pdbs)} PodDisruptionBudgets select its pods (one expected)")
        elif pdbs[0]["spec"].get("maxUnavailable") != 1:
            p(f"PodDisruptionBudget {pdbs[0]['metadata']['name']}: maxUnavailable is not 1")
        shards.append([f"tcp://{n}-{r}.{n}:{listen}" for r in range(replicas)])

    dep = by.get("Deployment", {}).get("search-integrator")
    if dep is None:
        p("no Deployment search-integrator")
        return problems
    c, f, ports, secret = check_pod(dep, "Deployment search-integrator", "integrator")
    given = [g.split("|") for g in str(f.get("--shards", "")).split(",")]
    if given != shards:
        p(f"integrator --shards {f.get('--shards')} is not the StatefulSets' "
          f"{','.join('|'.join(s) for s in shards)}")
    svc = by.get("Service", {}).get("search-integrator")
    http = port_of(str(f.get("--http", ":0")))
    if http != ports.get("https"):
        p(f"integrator --http port {http} is not its https containerPort {ports.get('https')}")
    if svc is None or http not in [pp["port"] for pp in svc["spec"]["ports"]]:
        p(f"Service search-integrator does not carry port {http}")
    for flag in ("--curve-key", "--curve-servers", "--tls-cert", "--tls-key", "--api-keys"):
        if not str(f.get(flag, "")).startswith("/secrets/"):
            p(f"integrator: {flag} is not a file of the copied Secret (/secrets/...)")
    for probe, path in (("readinessProbe", "/health?wait_for_status=yellow"), ("livenessProbe", "/health")):
        h = c[probe].get("httpGet", {})
        if h.get("path") != path or h.get("scheme") != "HTTPS":
            p(f"integrator {probe}: not GET {path} over HTTPS")
    if "--open-health" not in f:
        p("integrator: probes need --open-health (every request needs an API key otherwise)")

    if secrets is not None:
        integ = secrets.get(secret, {})
        for flag in ("--curve-key", "--curve-servers", "--tls-cert", "--tls-key", "--api-keys"):
            key = os.path.basename(str(f.get(flag, "")))
            if key not in integ:
                p(f"Secret {secret}: no {key} (the integrator's {flag})")
        lines = [ln.split() for ln in integ.get("curve-servers", b"").decode().splitlines() if ln.strip()]
        endpoints = sorted(e for s in shards for e in s)
        if sorted(ln[0] for ln in lines) != endpoints:
            p(f"Secret {secret} curve-servers lists {sorted(ln[0] for ln in lines)}, not {endpoints}")
        for n, group in zip(names, shards):
            s = secrets.get(f"search-{n}", {})
            want = {"curve-clients"} | {f"{e[len('tcp://'):].split('.')[0]}.key" for e in group}
            if set(s) != want:
                p(f"Secret search-{n} holds {sorted(s)}, not {sorted(want)}")
    return problems


def read_secrets(path):
    out = {}
    with open(path) as f:
        for o in yaml.safe_load_all(f):
            if o and o.get("kind") == "Secret":
                out[o["metadata"]["name"]] = {k: base64.b64decode(v) for k, v in o.get("data", {}).items()}
    return out


def make_secrets(src, manifests_dir, searchctl, out):
    r = subprocess.run(["sh", os.path.join(src, "deploy/k8s/make-secrets.sh"), out],
                       env=dict(os.environ, SEARCHCTL=searchctl,
                                MANIFEST=os.path.join(manifests_dir, "integrator.yaml")),
                       capture_output=True, text=True)
    if r.returncode != 0:
        print(r.stdout + r.stderr)
        raise SystemExit(f"FAIL: make-secrets.sh exited {r.returncode}")
    return os.path.join(out, "secrets.yaml")


def add_shard(d):
    """README.md "Scaling", adding a shard, done to the copy d: the new StatefulSet file from the last
    one by sed, kustomization.yaml's resources, INDEX_SHARDS, the integrator's --shards."""
    k, objs = load_dir(d)
    n = sum(1 for o in objs if o["kind"] == "StatefulSet")
    last, new = f"shard-{n - 1}", f"shard-{n}"
    with open(os.path.join(d, f"{last}.yaml")) as f:
        text = f.read()
    with open(os.path.join(d, f"{new}.yaml"), "w") as f:
        f.write(text.replace(last, new))
    edit(d, "kustomization.yaml", f"  - {last}.yaml\n", f"  - {last}.yaml\n  - {new}.yaml\n")
    edit(d, "index-config.yaml", f'INDEX_SHARDS: "{n}"', f'INDEX_SHARDS: "{n + 1}"')
    with open(os.path.join(d, "integrator.yaml")) as f:
        line = next(ln for ln in f if "--shards=" in ln).rstrip("\n")
    edit(d, "integrator.yaml", line, line + f",tcp://{new}-0.{new}:9210|tcp://{new}-1.{new}:9210")


def edit(d, name, old, new):
    path = os.path.join(d, name)
    with open(path) as f:
        text = f.read()
    if text.count(old) != 1:
        raise SystemExit(f"FAIL: {name}: '{old.strip()}' found {text.count(old)} times (README's steps changed?)")
    with open(path, "w") as f:
        f.write(text.replace(old, new))


def help_flags(binary):
    r = subprocess.run([binary, "--help"], capture_output=True, text=True, timeout=30)
    return set(re.findall(r"(?<![\w-])(--[a-z][a-z0-9-]*)", r.stdout + r.stderr))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("check", choices=["schema", "consistency"])
    ap.add_argument("--source", required=True)
    ap.add_argument("--searchctl")
    ap.add_argument("--node")
    ap.add_argument("--integrator")
    a = ap.parse_args()
    src = os.path.abspath(a.source)
    k8s = os.path.join(src, "deploy/k8s")
    tmp = tempfile.mkdtemp(prefix="k8s_test.")
    try:
        if a.check == "schema":
            for tool in ("node", "npm"):
                if shutil.which(tool) is None:
                    print(f"SKIP: {tool} is not installed (scripts/setup.sh installs it)")
                    return SKIP
            r = subprocess.run(["sh", os.path.join(k8s, "validate/install.sh")])
            if r.returncode != 0:
                print(f"FAIL: deploy/k8s/validate/install.sh exited {r.returncode}")
                return SKIP if r.returncode == SKIP else 1
            cmd = ["node", os.path.join(k8s, "validate/validate.js"), "--kustomize", k8s, "--self-test"]
            if a.searchctl:
                cmd.append(make_secrets(src, k8s, a.searchctl, os.path.join(tmp, "secrets")))
            print("$ " + " ".join(cmd))
            return 0 if subprocess.run(cmd).returncode == 0 else 1

        helps = {}
        if a.node:
            helps["node"] = help_flags(a.node)
        if a.integrator:
            helps["integrator"] = help_flags(a.integrator)
        failed = False

        def run(label, d, want_ok=True):
            nonlocal failed
            secrets = None
            if a.searchctl:
                secrets = read_secrets(make_secrets(src, d, a.searchctl, os.path.join(tmp, "s-" + label)))
            problems = check_consistency(d, helps, secrets, src)
            if want_ok:
                for q in problems:
                    print(f"FAIL ({label}): {q}")
                failed |= bool(problems)
                print(f"{'ok  ' if not problems else 'FAIL'} {label}: "
                      f"{len(problems)} problem(s){'' if a.searchctl else ' (Secrets not checked: no --searchctl)'}")
            else:
                print(f"{'ok  ' if problems else 'FAIL'} {label} is refused: {problems[0] if problems else 'no problem found'}")
                failed |= not problems

        run("deploy/k8s", k8s)
        # add_shard() below is README.md's "Scaling": the README must still say these steps.
        with open(os.path.join(k8s, "README.md")) as f:
            readme = f.read()
        steps = ["sed s/shard-1/shard-2/g deploy/k8s/shard-1.yaml > deploy/k8s/shard-2.yaml",
                 'INDEX_SHARDS: "3"', ",tcp://shard-2-0.shard-2:9210|tcp://shard-2-1.shard-2:9210",
                 "`resources` in `kustomization.yaml`", "`|tcp://shard-N-2.shard-N:9210`"]
        for step in steps:
            if step not in readme:
                print(f"FAIL: deploy/k8s/README.md no longer says `{step}` (add_shard follows it)")
                failed = True
        scaled = os.path.join(tmp, "scaled")
        shutil.copytree(k8s, scaled, ignore=shutil.ignore_patterns("node_modules"))
        add_shard(scaled)
        run("deploy/k8s with a third shard added as README.md says", scaled)
        more = os.path.join(tmp, "more-replicas")
        shutil.copytree(k8s, more, ignore=shutil.ignore_patterns("node_modules"))
        edit(more, "shard-1.yaml", "  replicas: 2\n", "  replicas: 3\n")
        edit(more, "integrator.yaml", "|tcp://shard-1-1.shard-1:9210", "|tcp://shard-1-1.shard-1:9210|tcp://shard-1-2.shard-1:9210")
        run("deploy/k8s with a third replica of shard-1 added as README.md says", more)
        missing = os.path.join(tmp, "missing")
        shutil.copytree(scaled, missing, ignore=shutil.ignore_patterns("node_modules"))
        edit(missing, "integrator.yaml", ",tcp://shard-2-0.shard-2:9210|tcp://shard-2-1.shard-2:9210", "")
        run("a copy whose --shards lacks shard-2", missing, want_ok=False)
        replicas = os.path.join(tmp, "replicas")
        shutil.copytree(k8s, replicas, ignore=shutil.ignore_patterns("node_modules"))
        edit(replicas, "shard-1.yaml", "  replicas: 2\n", "  replicas: 3\n")
        run("a copy with 3 replicas of shard-1 but 2 in --shards", replicas, want_ok=False)
        if not helps:
            print("note: flags not checked against --help (no --node/--integrator)")
        return 1 if failed else 0
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
