"""The standalone cluster the cluster tests start (standalone_cluster.py) must start when a
port it picked is taken before its daemon binds it, as happens when another test worker's
Spark driver binds a random port: it gives up that set of ports and starts on fresh ones,
instead of waiting on whatever answers at the taken port."""

from __future__ import annotations

import http.server
import threading
from pathlib import Path

import pytest
import standalone_cluster
from integration_helpers import spark_env

pytestmark = pytest.mark.integration  # starts real daemons


def test_a_taken_web_port_starts_the_cluster_on_fresh_ports(tmp_path: Path, monkeypatch) -> None:
    # A web server that is not Spark's, on the port the master's UI is given first: it answers
    # the status request, but not with the master's JSON.
    squatter = http.server.HTTPServer(("127.0.0.1", 0), http.server.SimpleHTTPRequestHandler)
    taken = squatter.server_address[1]
    threading.Thread(target=squatter.serve_forever, daemon=True).start()
    picks = iter([standalone_cluster.free_port(), taken])  # the master's port, then its UI's

    def free_port() -> int:
        return next(picks, None) or real_free_port()

    real_free_port = standalone_cluster.free_port
    monkeypatch.setattr(standalone_cluster, "free_port", free_port)
    try:
        with standalone_cluster.standalone_cluster(tmp_path, spark_env(), workers=1) as cluster:
            assert cluster.master_ui != f"http://127.0.0.1:{taken}"
            status = cluster.status()
            assert status["url"] == cluster.url and len(status["workers"]) == 1
        first_master = (tmp_path / "logs").glob("*Master-1-*.out*")
        assert any("BindException" in log.read_text(errors="replace") for log in first_master)
    finally:
        squatter.shutdown()
        squatter.server_close()
