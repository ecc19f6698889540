"""Local port helpers shared by the Python tests that start a cluster on loopback
(tests/deploy/dashboards_promql_test.py, container_test.py, k8s_pods_test.py,
tests/browser/status_page_test.py, tests/scripts/serving_cost_test.py, bench_hybrid_cpu_test.py)."""
import random
import socket


def port_free(port):
    """True when nothing listens on 127.0.0.1:port (a bind would succeed)."""
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("127.0.0.1", port))
            return True
        except OSError:
            return False


def free_port():
    """A port of 127.0.0.1 that the kernel gave out as free a moment ago."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def free_port_block(n=4):
    """The first of n consecutive free ports of 127.0.0.1 (a script's BASE_PORT and the next n - 1)."""
    for _ in range(200):
        base = random.randrange(20000, 60000, n)
        if all(port_free(base + i) for i in range(n)):
            return base
    raise RuntimeError(f"no {n} free consecutive ports")
