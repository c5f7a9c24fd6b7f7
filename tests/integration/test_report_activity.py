"""``gpufleet report --prometheus``: the activity of allocated devices read from a real
Prometheus (built from github.com/prometheus/prometheus at the version
gpufleet/build/releases.yaml pins; the ci profile builds it) that scrapes DCGM-exporter
metrics with the exporter's DRA labels, against a real control plane whose kube-scheduler
allocated the claims. The metrics endpoint is this test's own small server: it serves
the values the test chooses for the devices the scheduler picked, as the DCGM exporter
(or the lab's GPU simulator) would for those devices."""

from __future__ import annotations

import json
import socket
import subprocess
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from ansible_collections.gpufleet.cluster.plugins.module_utils.report import activity as fa
from click.testing import CliRunner

from gpufleet.build import binaries
from gpufleet.cli import main
from gpufleet.lab import gpusim_plugin
from tests.integration.conftest import StartControlPlane
from tests.integration.test_validate_claims import (
    CONTROLLERS,
    DRIVER,
    NS,
    apply,
    claim_spec,
    device,
    pod,
    wait_for,
)

pytestmark = pytest.mark.integration


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class _Metrics(BaseHTTPRequestHandler):
    body = b""

    def do_GET(self) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/plain; version=0.0.4")
        self.end_headers()
        self.wfile.write(type(self).body)

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def metrics_server() -> Iterator[tuple[int, type[_Metrics]]]:
    handler = type("Handler", (_Metrics,), {"body": b""})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server.server_address[1], handler
    finally:
        server.shutdown()


@pytest.fixture
def prometheus(tmp_path: Path, metrics_server: tuple[int, type[_Metrics]]) -> Iterator[str]:
    path = binaries.binary_path("prometheus")
    if not path.is_file():
        pytest.fail(f"prometheus is not built ({path}); run lab/build-binaries --tools prometheus")
    config = tmp_path / "prometheus.yml"
    config.write_text(
        "global: {scrape_interval: 1s}\n"
        "scrape_configs:\n"
        "  - job_name: dcgm\n"
        f"    static_configs: [{{targets: ['127.0.0.1:{metrics_server[0]}']}}]\n"
    )
    port = _free_port()
    log = (tmp_path / "prometheus.log").open("w")
    proc = subprocess.Popen(
        [
            str(path),
            f"--config.file={config}",
            f"--storage.tsdb.path={tmp_path / 'tsdb'}",
            f"--web.listen-address=127.0.0.1:{port}",
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
        log.close()


def _series(pool: str, device_name: str, claim: str, engine: float) -> str:
    labels = (
        f'gpu="0",UUID="GPU-x",modelName="NVIDIA H200",Hostname="{pool}",'
        f'dra_driver_name="{DRIVER}",dra_pool_name="{pool}",dra_device_name="{device_name}",'
        f'dra_claim_namespace="{NS}",dra_claim_name="{claim}"'
    )
    return f"DCGM_FI_PROF_GR_ENGINE_ACTIVE{{{labels}}} {engine}\n"


def test_report_names_the_allocated_device_that_stays_idle(
    start_control_plane: StartControlPlane,
    metrics_server: tuple[int, type[_Metrics]],
    prometheus: str,
    tmp_path: Path,
) -> None:
    cp = start_control_plane(extra_args={"kube-controller-manager": {"controllers": CONTROLLERS}})
    (node,) = cp.start_kwok(1, name_prefix="gpu-")
    cp.wait_nodes_ready([node])
    rslice = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {"name": f"{node}-gpu"},
        "spec": {
            "driver": DRIVER,
            "nodeName": node,
            "pool": {"name": node, "generation": 1, "resourceSliceCount": 1},
            "devices": [device(f"gpu-{i}", f"GPU-{i}") for i in range(3)],
        },
    }
    cp.create_namespace(NS)
    claims = [
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceClaim",
            "metadata": {"name": name, "namespace": NS},
            "spec": claim_spec("gpu.nvidia.com"),
        }
        for name in ("quiet", "busy")
    ]
    apply(cp, [*gpusim_plugin.device_classes(), rslice, *claims])
    apply(cp, [pod(f"{n}-pod", {"resourceClaimName": n}) for n in ("quiet", "busy")])

    picked: dict[str, str] = {}

    def allocated() -> bool:
        for name in ("quiet", "busy"):
            c = json.loads(cp.kubectl("-n", NS, "get", "resourceclaim", name, "-o", "json").stdout)
            results = ((c.get("status") or {}).get("allocation") or {}).get("devices", {})
            for r in results.get("results") or []:
                picked[name] = r["device"]
        return len(picked) == 2

    wait_for("both claims allocated by the scheduler", allocated)
    # the busy claim's GPU works at 80 %, the quiet one's at 1 %; the free GPU reports no
    # claim labels (the exporter adds them only to devices prepared for a claim)
    metrics_server[1].body = (
        _series(node, picked["quiet"], "quiet", 0.01)
        + _series(node, picked["busy"], "busy", 0.8)
        + 'DCGM_FI_PROF_GR_ENGINE_ACTIVE{gpu="2",UUID="GPU-2"} 0\n'
    ).encode()

    deadline = time.monotonic() + 90
    seen: dict[str, float] = {}
    while time.monotonic() < deadline and len(seen) < 2:
        try:
            seen = fa.fetch(prometheus, "1m", timeout_s=5)
        except fa.ActivityError:
            seen = {}
        time.sleep(1)
    assert len(seen) == 2, f"Prometheus never had both devices: {seen}"

    out = tmp_path / "report.json"
    md = tmp_path / "report.md"
    result = CliRunner().invoke(
        main,
        [
            "report",
            "--kubeconfig",
            str(cp.kubeconfig),
            "--prometheus",
            prometheus,
            "--idle-window",
            "1m",
            "--idle-below",
            "5",
            "--json",
            str(out),
            "--markdown",
            str(md),
        ],
        env={"COLUMNS": "200"},
    )
    assert result.exit_code == 0, result.output
    doc = json.loads(out.read_text())
    assert doc["activity"] == {
        "window": "1m",
        "idle_below_percent": 5.0,
        "devices_allocated": 2,
        "devices_measured": 2,
        "devices_idle": 1,
    }
    (idle,) = doc["idle"]
    assert idle["claim"] == f"{NS}/quiet"
    assert idle["device"] == f"{DRIVER}/{node}/{picked['quiet']}"
    assert idle["percent"] == pytest.approx(1.0)
    assert f"{NS}/quiet holds" in result.output
    assert "## Allocated devices idle" in md.read_text()

    # a Prometheus that does not answer: exit 2 naming --prometheus, no report written
    gone = f"http://127.0.0.1:{_free_port()}"
    again = tmp_path / "again.json"
    result = CliRunner().invoke(
        main,
        ["report", "--kubeconfig", str(cp.kubeconfig), "--prometheus", gone, "--json", str(again)],
    )
    assert result.exit_code == 2, result.output
    assert "--prometheus" in result.output and "cannot reach Prometheus" in result.output
    assert not again.exists()
