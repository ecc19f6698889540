"""Local port helpers shared by the Python tests that start a cluster on loopback
(tests/deploy/dashboards_promql_test.py, container_test.py, k8s_pods_test.py,
tests/browser/status_page_test.py)."""
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
