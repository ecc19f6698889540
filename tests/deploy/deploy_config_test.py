#!/usr/bin/env python3
"""Static checks of docker/: the deployment files agree with each other and with the code.

usage: deploy_config_test.py CHECK --source REPO [options]
  compose FILE      `docker-compose -f FILE config` passes; the services, GPU reservations (GPU
                    file) or their absence (CPU file), shard count, integrator --shards and
                    Prometheus targets agree; security is on (every node with --curve-key and
                    --curve-clients, the integrator with --curve-key, --curve-servers, --tls-cert,
                    --tls-key and --api-keys, all from the secrets job's volume mounted read-only,
                    no --insecure). Skips (77) without docker-compose.
  compose-variants  docker-compose.yml and docker-compose.cpu.yml differ only in the image, the
                    build target, the nodes' GPU flags and GPU reservations. Skips without it.
  promtool          `promtool check config` and `promtool check rules`. Skips without promtool.
  grafana           provisioning and dashboards: datasource uid and URL, provider path vs the
                    compose mounts, unique uids and panel ids, defined template variables, and
                    every metric named in dashboards and rules is registered in the C++ sources.
  dockerfile        the Dockerfile copies every source folder the root CMakeLists.txt adds and
                    installs scripts/setup.sh's library -dev packages; with --binary (repeatable)
                    on a Debian host, its runtime packages provide every shared library they link.
Exit status: 0 pass, 1 fail (each problem printed), 77 skip.
"""
import argparse
import glob
import json
import os
import re
import shutil
import subprocess
import sys

SKIP = 77
problems = []


def fail(msg):
    problems.append(msg)
    print("FAIL: " + msg)


def skip(msg):
    print("SKIP: " + msg)
    sys.exit(SKIP)


def load_yaml(path_or_text, is_text=False):
    try:
        import yaml
    except ImportError:
        skip("python3-yaml is not installed")
    if is_text:
        return yaml.safe_load(path_or_text)
    with open(path_or_text) as f:
        return yaml.safe_load(f)


def compose_config(src, rel):
    exe = shutil.which("docker-compose")
    if exe is None:
        skip("docker-compose is not installed")
    # A clean environment for the knobs: the files' own defaults are what is checked.
    env = {k: v for k, v in os.environ.items()
           if not re.match(r"(INDEX_|NODE|INTEGRATOR_|GRAFANA_|PROMETHEUS_|PUBLISH_ADDR|HTTP_PORT|"
                           r"SEARCH_IMAGE|CORPUS_DIR|CERT_HOSTS|COMPOSE_)", k)}
    r = subprocess.run([exe, "-f", os.path.join(src, rel), "config"], capture_output=True, text=True,
                       env=env, cwd=src)
    print(f"$ docker-compose -f {rel} config  -> exit {r.returncode}")
    if r.returncode != 0:
        fail(f"docker-compose -f {rel} config failed:\n{r.stderr.strip()}")
        return None
    if r.stderr.strip():
        print(r.stderr.strip())
    return load_yaml(r.stdout, is_text=True)


def command_words(svc):
    cmd = svc.get("command", [])
    return cmd.split() if isinstance(cmd, str) else list(cmd)


def flag(words, name):
    return words[words.index(name) + 1] if name in words and words.index(name) + 1 < len(words) else None


def node_services(cfg):
    return sorted((n for n in cfg["services"] if re.fullmatch(r"node-\d+", n)), key=lambda n: int(n[5:]))


def check_compose(src, rel):
    # podman-compose 1.0.3 substitutes ${VAR:-default} only with a non-empty default: it passes
    # ${VAR:-} and ${VAR-} on as they are (tests/deploy/container_test.py runs the file with it).
    with open(os.path.join(src, rel)) as f:
        for m in re.finditer(r"\$\{\w+:?-\}", f.read()):
            fail(f"{rel}: {m.group(0)} has an empty default, which podman-compose 1.0.3 does not substitute")
    cfg = compose_config(src, rel)
    if cfg is None:
        return
    services = cfg.get("services", {})
    for name in ("index", "integrator", "prometheus", "grafana"):
        if name not in services:
            fail(f"{rel}: no service '{name}'")
    nodes = node_services(cfg)
    if len(nodes) < 2:
        fail(f"{rel}: {len(nodes)} node services, want at least 2")
    gpu = "cpu" not in os.path.basename(rel)
    for i, n in enumerate(nodes):
        svc = services[n]
        words = command_words(svc)
        if n != f"node-{i}":
            fail(f"{rel}: node services are not node-0..node-{len(nodes) - 1} ({nodes})")
        if words[:1] != ["search-node"]:
            fail(f"{rel}: {n} does not run search-node: {words}")
        if flag(words, "--index") != f"/data/index/shard-{i}":
            fail(f"{rel}: {n} serves {flag(words, '--index')}, want /data/index/shard-{i}")
        if flag(words, "--listen") != "tcp://0.0.0.0:9210" or flag(words, "--metrics") != "0.0.0.0:9211":
            fail(f"{rel}: {n} must listen on tcp://0.0.0.0:9210 with metrics on 0.0.0.0:9211")
        devices = (svc.get("deploy", {}).get("resources", {}).get("reservations", {}).get("devices", []))
        nvidia = [d for d in devices if d.get("driver") == "nvidia" and "gpu" in d.get("capabilities", [])]
        if gpu:
            if len(nvidia) != 1:
                fail(f"{rel}: {n} has no nvidia GPU reservation (deploy.resources.reservations.devices)")
            if flag(words, "--gpu") != "on":
                fail(f"{rel}: {n} should run with --gpu on (got {flag(words, '--gpu')})")
            if svc.get("build", {}).get("target") != "runtime":
                fail(f"{rel}: {n} should build the Dockerfile's 'runtime' (GPU) target")
        else:
            if devices:
                fail(f"{rel}: {n} reserves devices on a CPU-only deployment: {devices}")
            if flag(words, "--gpu") != "off":
                fail(f"{rel}: {n} should run with --gpu off (got {flag(words, '--gpu')})")
            if svc.get("build", {}).get("target") != "runtime-cpu":
                fail(f"{rel}: {n} should build the Dockerfile's 'runtime-cpu' target")
        for vol in svc.get("volumes", []):
            text = vol if isinstance(vol, str) else f"{vol.get('source')}:{vol.get('target')}"
            if text.startswith("index:") and not text.endswith(":ro"):
                fail(f"{rel}: {n} mounts the index volume writable")
        if "healthcheck" not in svc:
            fail(f"{rel}: {n} has no healthcheck")
    # The index job builds as many shards as there are nodes.
    env = services.get("index", {}).get("environment", {})
    if str(env.get("INDEX_SHARDS")) != str(len(nodes)):
        fail(f"{rel}: index INDEX_SHARDS={env.get('INDEX_SHARDS')} but {len(nodes)} node services")
    if command_words(services.get("index", {}))[:1] != ["search-index-build"]:
        fail(f"{rel}: the index service does not run search-index-build")
    # The integrator fans out to exactly the node services, in shard order.
    words = command_words(services.get("integrator", {}))
    want = ",".join(f"tcp://{n}:9210" for n in nodes)
    if flag(words, "--shards") != want:
        fail(f"{rel}: integrator --shards {flag(words, '--shards')}, want {want}")
    if flag(words, "--http") != "0.0.0.0:9200" or flag(words, "--metrics") != "0.0.0.0:9201":
        fail(f"{rel}: integrator must serve HTTP on 0.0.0.0:9200 and metrics on 0.0.0.0:9201")
    ports = services.get("integrator", {}).get("ports", [])
    if not any(str(p.get("target") if isinstance(p, dict) else p).split(":")[-1].split("/")[0] == "9200"
               for p in ports):
        fail(f"{rel}: the integrator's HTTP port 9200 is not published")
    deps = services.get("integrator", {}).get("depends_on", {})
    for n in nodes + ["index"]:
        if n not in deps:
            fail(f"{rel}: integrator does not depend on {n}")
    # Prometheus scrapes the integrator and every node, each node with its shard label.
    prom = load_yaml(os.path.join(src, "docker/prometheus/prometheus.yml"))
    jobs = {j["job_name"]: j for j in prom.get("scrape_configs", [])}
    integ = [t for sc in jobs.get("search-integrator", {}).get("static_configs", []) for t in sc["targets"]]
    if integ != ["integrator:9201"]:
        fail(f"prometheus.yml: search-integrator targets {integ}, want ['integrator:9201']")
    node_targets = {t: sc.get("labels", {}).get("shard")
                    for sc in jobs.get("search-node", {}).get("static_configs", []) for t in sc["targets"]}
    want_targets = {f"{n}:9211": n[5:] for n in nodes}
    if node_targets != want_targets:
        fail(f"prometheus.yml: search-node targets/shard labels {node_targets}, want {want_targets}")
    mounts = [v if isinstance(v, str) else f"{v.get('source')}:{v.get('target')}"
              for v in services.get("prometheus", {}).get("volumes", [])]
    if not any(m.split(":")[0].rstrip("/").endswith("docker/prometheus") and m.split(":")[1] == "/etc/prometheus"
               for m in mounts):
        fail(f"{rel}: prometheus does not mount docker/prometheus on /etc/prometheus ({mounts})")
    check_security(rel, services, nodes)
    print(f"{rel}: services {sorted(services)}; {len(nodes)} nodes; gpu={gpu}")


def mounts_of(svc):
    return [v if isinstance(v, str) else f"{v.get('source')}:{v.get('target')}" + (":ro" if v.get("read_only") else "")
            for v in svc.get("volumes", [])]


def check_security(rel, services, nodes):
    """Secure by default: the secrets job's files wired into every node and the integrator."""
    init = services.get("secrets")
    if init is None:
        fail(f"{rel}: no 'secrets' service (the job that creates the CA, certificates, CURVE and API keys)")
        return
    if command_words(init)[:1] != ["search-secrets-init"]:
        fail(f"{rel}: the secrets service does not run search-secrets-init: {command_words(init)}")
    if not any(m.split(":")[:2] == ["secrets", "/secrets"] and not m.endswith(":ro") for m in mounts_of(init)):
        fail(f"{rel}: the secrets service does not mount the secrets volume writable on /secrets")
    listed = dict(e.split("=", 1) if "=" in e else (e, None)
                  for e in str(init.get("environment", {}).get("SECRETS_NODES", "")).split())
    for name, svc in services.items():
        words = command_words(svc)
        if "--insecure" in words:
            fail(f"{rel}: {name} runs with --insecure (the compose files are secure by default)")
        if name in nodes or name == "integrator":
            if not any(m == "secrets:/secrets:ro" for m in mounts_of(svc)):
                fail(f"{rel}: {name} does not mount the secrets volume read-only on /secrets")
            if svc.get("depends_on", {}).get("secrets", {}).get("condition") != "service_completed_successfully":
                fail(f"{rel}: {name} does not wait for the secrets job to complete")
    for n in nodes:
        words = command_words(services[n])
        for f, want in (("--curve-key", f"/secrets/{n}/curve.key"), ("--curve-clients", f"/secrets/{n}/curve-clients")):
            if flag(words, f) != want:
                fail(f"{rel}: {n} {f} {flag(words, f)}, want {want}")
        if listed.get(n) != f"tcp://{n}:9210":
            fail(f"{rel}: the secrets job's SECRETS_NODES does not list {n}=tcp://{n}:9210 ({listed})")
    words = command_words(services.get("integrator", {}))
    for f, want in (("--curve-key", "/secrets/integrator/curve.key"),
                    ("--curve-servers", "/secrets/integrator/curve-servers"),
                    ("--tls-cert", "/secrets/integrator/tls.crt"), ("--tls-key", "/secrets/integrator/tls.key"),
                    ("--api-keys", "/secrets/integrator/api-keys")):
        if flag(words, f) != want:
            fail(f"{rel}: integrator {f} {flag(words, f)}, want {want}")
    test = " ".join(services.get("integrator", {}).get("healthcheck", {}).get("test", []))
    if "http://127.0.0.1:9200" in test:
        fail(f"{rel}: the integrator's healthcheck asks plain HTTP on its HTTPS port: {test}")


def normalize(cfg):
    """A compose config with the GPU/CPU differences taken out."""
    cfg = json.loads(json.dumps(cfg))
    for name, svc in cfg["services"].items():
        svc.pop("deploy", None)
        if "image" in svc and svc["image"].startswith("gpu-search:"):
            svc["image"] = "gpu-search:<variant>"
        if "build" in svc:
            svc["build"]["target"] = "<variant>"
        env = svc.get("environment")
        if isinstance(env, dict):  # the secrets job names its own compose file and image
            for key in ("COMPOSE_FILE_HINT", "SEARCH_IMAGE"):
                if key in env:
                    env[key] = "<variant>"
        if re.fullmatch(r"node-\d+", name):
            words = command_words(svc)
            out, i = [], 0
            while i < len(words):
                if words[i] in ("--gpu", "--gpu-cache-bytes"):
                    i += 2
                    continue
                out.append(words[i])
                i += 1
            svc["command"] = out
    return cfg


def check_variants(src):
    gpu = compose_config(src, "docker/docker-compose.yml")
    cpu = compose_config(src, "docker/docker-compose.cpu.yml")
    if gpu is None or cpu is None:
        return
    a, b = normalize(gpu), normalize(cpu)
    for key in sorted(set(a) | set(b)):
        if key != "services" and a.get(key) != b.get(key):
            fail(f"top-level '{key}' differs between the GPU and CPU compose files")
    for name in sorted(set(a["services"]) | set(b["services"])):
        sa, sb = a["services"].get(name), b["services"].get(name)
        if sa != sb:
            fail(f"service '{name}' differs beyond the GPU bits:\n  gpu: {json.dumps(sa, sort_keys=True)}\n"
                 f"  cpu: {json.dumps(sb, sort_keys=True)}")
    print(f"{len(a['services'])} services agree modulo image, build target, --gpu flags and GPU reservations")


def check_promtool(src):
    exe = shutil.which("promtool")
    if exe is None:
        skip("promtool is not installed (Debian package prometheus)")
    for args in (["check", "config", "docker/prometheus/prometheus.yml"],
                 ["check", "rules", "docker/prometheus/rules.yml"]):
        r = subprocess.run([exe] + args, capture_output=True, text=True, cwd=src)
        out = (r.stdout + r.stderr).strip()
        print(f"$ promtool {' '.join(args)}  -> exit {r.returncode}\n{out}")
        if r.returncode != 0:
            fail(f"promtool {' '.join(args)} failed")
    rules = load_yaml(os.path.join(src, "docker/prometheus/rules.yml"))
    names = [r.get("record") or r.get("alert") for g in rules["groups"] for r in g["rules"]]
    if len(names) != len(set(names)):
        fail(f"rules.yml records a name twice: {sorted(n for n in names if names.count(n) > 1)}")


def registered_metric_names(src):
    """Metric names registered by the C++ sources: string literals passed as family names."""
    names = set()
    for pattern in ("metrics/**/*.hpp", "metrics/**/*.cpp", "integrator/**/*.cpp", "node/**/*.cpp", "sched/**/*.cpp",
                    "gpu_cache/**/*.cpp", "gpu_exec/**/*.cpp", "index_store/**/*.cpp", "cpu_exec/**/*.cpp"):
        for path in glob.glob(os.path.join(src, pattern), recursive=True):
            with open(path, errors="replace") as f:
                names.update(re.findall(r'"((?:search|process)_[a-z0-9_]+)"', f.read()))
    return names


def metric_names_in(expr):
    """Metric names in a PromQL expression (identifiers of our families)."""
    bare = re.sub(r'"[^"]*"', '""', expr)  # no label values
    names = set()
    for m in re.findall(r"\b((?:search|process)_[a-z0-9_]+)\b", bare):
        names.add(re.sub(r"_(bucket|count|sum)$", "", m))
    return names


def dashboard_exprs(dash):
    out = []

    def walk(panels):
        for p in panels:
            for t in p.get("targets", []):
                out.append((p.get("title", ""), t))
            walk(p.get("panels", []))
    walk(dash.get("panels", []))
    return out


def check_grafana(src):
    gdir = os.path.join(src, "docker/grafana")
    compose = load_yaml(os.path.join(src, "docker/docker-compose.yml"))
    grafana = compose["services"]["grafana"]
    mounts = {v.split(":")[1]: v.split(":")[0] for v in grafana["volumes"]}
    ds_files = sorted(glob.glob(os.path.join(gdir, "provisioning/datasources/*.yml")))
    uids = []
    for path in ds_files:
        for ds in load_yaml(path).get("datasources", []):
            uids.append(ds.get("uid"))
            if ds.get("type") != "prometheus" or ds.get("url") != "http://prometheus:9090":
                fail(f"{path}: datasource {ds.get('name')} is not the compose Prometheus (http://prometheus:9090)")
    if len(uids) != 1:
        fail(f"want exactly one provisioned datasource, found {uids}")
    uid = uids[0] if uids else None
    providers = [p for path in glob.glob(os.path.join(gdir, "provisioning/dashboards/*.yml"))
                 for p in load_yaml(path).get("providers", [])]
    if not providers:
        fail("no dashboard provider in docker/grafana/provisioning/dashboards")
    for p in providers:
        path = p.get("options", {}).get("path")
        if mounts.get(path, "").rstrip("/") != "./grafana/dashboards":
            fail(f"dashboard provider path {path} is not where docker-compose.yml mounts ./grafana/dashboards")
    if mounts.get("/etc/grafana/provisioning") != "./grafana/provisioning":
        fail("docker-compose.yml does not mount ./grafana/provisioning on /etc/grafana/provisioning")
    home = grafana.get("environment", {}).get("GF_DASHBOARDS_DEFAULT_HOME_DASHBOARD_PATH", "")
    if home and not os.path.isfile(os.path.join(gdir, "dashboards", os.path.basename(home))):
        fail(f"home dashboard {home} is not a file in docker/grafana/dashboards")

    registered = registered_metric_names(src)
    dash_uids = []
    used = {}
    files = sorted(glob.glob(os.path.join(gdir, "dashboards/*.json")))
    if not files:
        fail("no dashboards in docker/grafana/dashboards")
    for path in files:
        name = os.path.basename(path)
        with open(path) as f:
            try:
                dash = json.load(f)
            except json.JSONDecodeError as e:
                fail(f"{name}: not JSON: {e}")
                continue
        dash_uids.append(dash.get("uid"))
        variables = {v["name"] for v in dash.get("templating", {}).get("list", [])}
        ids = []

        def walk(panels):
            for p in panels:
                ids.append(p.get("id"))
                g = p.get("gridPos", {})
                if g.get("x", 0) + g.get("w", 0) > 24:
                    fail(f"{name}: panel '{p.get('title')}' is wider than the grid")
                if p.get("type") != "row":
                    if p.get("datasource", {}).get("uid") != uid:
                        fail(f"{name}: panel '{p.get('title')}' does not use datasource uid {uid}")
                    if not p.get("targets"):
                        fail(f"{name}: panel '{p.get('title')}' has no query")
                walk(p.get("panels", []))
        walk(dash.get("panels", []))
        if len(ids) != len(set(ids)) or None in ids:
            fail(f"{name}: panel ids are missing or repeated")
        for title, t in dashboard_exprs(dash):
            expr = t.get("expr", "")
            if not expr.strip():
                fail(f"{name}: panel '{title}' has an empty expr")
            if t.get("datasource", {}).get("uid") != uid:
                fail(f"{name}: a query of panel '{title}' does not use datasource uid {uid}")
            for var in re.findall(r"\$\{?(\w+)", expr):
                if not var.startswith("__") and var not in variables:
                    fail(f"{name}: panel '{title}' uses undefined variable ${var}")
            for m in metric_names_in(expr):
                used.setdefault(m, set()).add(f"{name}: {title}")
    if len(dash_uids) != len(set(dash_uids)) or None in dash_uids:
        fail(f"dashboard uids missing or repeated: {dash_uids}")
    rules = load_yaml(os.path.join(src, "docker/prometheus/rules.yml"))
    for g in rules["groups"]:
        for r in g["rules"]:
            for m in metric_names_in(r["expr"]):
                used.setdefault(m, set()).add(f"rules.yml: {r.get('record')}")
    for m in sorted(used):
        if m not in registered:
            fail(f"metric {m} is registered nowhere in the C++ sources (used by {sorted(used[m])})")
    print(f"{len(files)} dashboards, {len(used)} metric families used, all registered; datasource uid {uid}")


def check_dockerfile(src, binaries):
    with open(os.path.join(src, "docker/Dockerfile")) as f:
        dockerfile = f.read()
    if "COPY docker/secrets-init.sh /usr/local/bin/search-secrets-init" not in dockerfile:
        fail("the Dockerfile does not install docker/secrets-init.sh as search-secrets-init (the secrets job)")
    with open(os.path.join(src, "CMakeLists.txt")) as f:
        cmake = f.read()
    dirs = set(re.findall(r"add_subdirectory\((\w+)\)", cmake))
    for lst in re.findall(r"foreach\(dir ([\w ]+)\)", cmake):
        dirs.update(lst.split())
    # Test, benchmark and fuzz harnesses: not needed for the three binaries (a new folder that is
    # neither copied nor listed here fails this check, so that someone decides).
    dirs -= {"tests", "bench", "fuzz"}
    copied = set(re.findall(r"^COPY (?!--)(\S+?)/? ", dockerfile, re.M))
    for d in sorted(dirs | {"cmake"}):
        if d not in copied:
            fail(f"Dockerfile does not COPY {d}/, which the root CMakeLists.txt adds")
    if "CMakeLists.txt" not in copied:
        fail("Dockerfile does not COPY the root CMakeLists.txt")
    ignore_path = os.path.join(src, "docker/Dockerfile.dockerignore")
    if os.path.exists(ignore_path):
        import fnmatch
        with open(ignore_path) as f:
            patterns = [ln.strip() for ln in f if ln.strip() and not ln.startswith("#") and not ln.startswith("!")]
        for c in sorted(copied):
            for pat in patterns:
                if fnmatch.fnmatch(c, pat) or fnmatch.fnmatch(c, pat.replace("**/", "")):
                    fail(f"Dockerfile.dockerignore pattern '{pat}' drops {c}, which the Dockerfile copies")
    stages = re.findall(r"^FROM \S+ AS (\S+)", dockerfile, re.M)
    for s in ("runtime-cpu", "runtime"):
        if s not in stages:
            fail(f"Dockerfile has no stage {s}")
    if stages and stages[-1] != "runtime":
        fail("the default (last) Dockerfile stage should be runtime")
    for s in stages:
        if "gpu" in s and "runtime-cpu" in stages and stages.index(s) < stages.index("runtime-cpu"):
            fail(f"stage {s} comes before runtime-cpu: the classic builder would build it for the CPU image")

    def apt_list(stage):
        m = re.search(rf"^FROM \S+ AS {stage}\n(.*?)(?=^FROM )", dockerfile, re.M | re.S)
        body = m.group(1) if m else ""
        m = re.search(r"apt-get install[^\n]*\\\n(.*?)(?:&&|\n\n)", body, re.S)
        return set(re.findall(r"[a-z0-9][a-z0-9.+-]+", m.group(1).replace("\\", " "))) if m else set()
    deps, runtime = apt_list("deps"), apt_list("runtime-base")
    with open(os.path.join(src, "scripts/setup.sh")) as f:
        setup = f.read()
    m = re.search(r"pkgs=\((.*?)\)", setup, re.S)
    setup_pkgs = set(m.group(1).split()) if m else set()
    test_only = {"libgtest-dev", "libgmock-dev", "libbenchmark-dev", "libclang-rt-14-dev",  # tests, fuzzing
                 "libprotobuf-dev"}  # the CIFF official-schema test
    for p in sorted(p for p in setup_pkgs if p.endswith("-dev") and p not in test_only):
        if p not in deps:
            fail(f"scripts/setup.sh installs {p} but the Dockerfile's deps stage does not")
    if not runtime:
        fail("cannot find the runtime-base stage's package list")
    print(f"Dockerfile copies {sorted(dirs)}; deps stage has {len(deps)} packages, runtime {sorted(runtime)}")
    if not binaries:
        return
    if not (shutil.which("dpkg") and shutil.which("apt-cache") and shutil.which("ldd")):
        print("note: no dpkg/apt-cache/ldd here: runtime libraries not checked")
        return
    r = subprocess.run(["apt-cache", "depends", "--recurse", "--no-recommends", "--no-suggests", "--no-conflicts",
                        "--no-breaks", "--no-replaces", "--no-enhances"] + sorted(runtime),
                       capture_output=True, text=True)
    if r.returncode != 0:
        fail(f"apt-cache depends on the runtime packages failed: {r.stderr.strip()}")
        return
    closure = {ln.strip() for ln in r.stdout.splitlines() if ln and not ln.startswith(" ")}
    closure.update(re.findall(r"Depends: <?([^\s>]+)>?", r.stdout))
    closure = {c.split(":")[0] for c in closure}
    base = {"libc6", "libgcc-s1", "libstdc++6"}  # in debian:bookworm-slim
    libs = {}  # soname -> (path, first binary linking it)
    for b in binaries:
        out = subprocess.run(["ldd", b], capture_output=True, text=True).stdout
        for lib, path in re.findall(r"^\s*(\S+) => (\S+)", out, re.M):
            if lib.startswith("libcudart.so"):
                continue  # copied from the CUDA build stage
            if path == "not":
                fail(f"{b}: {lib} not found")
                continue
            libs.setdefault(lib, (path, b))
    # One dpkg -S for all (real paths, then the linked paths for what usrmerge hides).
    owner = {}
    for key in (os.path.realpath, lambda p: p):
        todo = {key(p): lib for lib, (p, _) in libs.items() if lib not in owner}
        if todo:
            q = subprocess.run(["dpkg", "-S"] + sorted(todo), capture_output=True, text=True)
            for ln in q.stdout.splitlines():
                pkg, _, path = ln.partition(": ")
                if path in todo:
                    owner[todo[path]] = pkg.split(":")[0].strip()
    checked = 0
    for lib, (path, b) in sorted(libs.items()):
        pkg = owner.get(lib)
        if pkg is None:
            fail(f"{b}: {lib} ({path}) belongs to no Debian package")
            continue
        checked += 1
        if pkg not in closure and pkg not in base:
            fail(f"{b}: {lib} comes from {pkg}, which the runtime-base stage does not install")
    print(f"runtime-base provides all {checked} shared libraries of {len(binaries)} binaries")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("check", choices=["compose", "compose-variants", "promtool", "grafana", "dockerfile"])
    ap.add_argument("file", nargs="?", help="compose: the compose file, relative to --source")
    ap.add_argument("--source", required=True)
    ap.add_argument("--binary", action="append", default=[], help="dockerfile: a built binary to check")
    a = ap.parse_args()
    src = os.path.abspath(a.source)
    if a.check == "compose":
        if not a.file:
            ap.error("compose needs FILE")
        check_compose(src, a.file)
    elif a.check == "compose-variants":
        check_variants(src)
    elif a.check == "promtool":
        check_promtool(src)
    elif a.check == "grafana":
        check_grafana(src)
    else:
        check_dockerfile(src, a.binary)
    if problems:
        print(f"{len(problems)} problem(s)")
        return 1
    print("PASS")
    return 0


if __name__ == "__main__":
    sys.exit(main())
