"""``gpufleet report --serve`` in a real browser: the command runs as its own process
against a real kube-apiserver (``apiserver`` fixture: etcd and kube-apiserver, no
controller) holding a GPU node's ResourceSlice, claims whose allocations are written
through the status subresource (as kube-scheduler writes them) and pods; headless
Chromium (Debian's ``chromium``) loads ``/``, and the test reads the figures from the DOM
Chromium built, fails on any console message (a Content-Security-Policy violation is
one), measures the load and saves a screenshot. Then a slice whose GPU model name is
markup is published: after ``--refresh`` seconds the page shows it as text. Last, the
API server stops: ``/`` answers 503 with one line.

Skipped, saying how to install it, where ``chromium`` is not on PATH (scripts/setup
installs it with the podman phase's packages)."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest

from tests.harness.component_flags import pick_free_ports
from tests.harness.controlplane import ControlPlane
from tests.integration.test_validate_claims import apply, device

pytestmark = pytest.mark.integration

NS = "live"
DRIVER = "gpu.nvidia.com"
NODE = "gpu-a"
GPUFLEET = str(Path(sys.executable).with_name("gpufleet"))
#: Seconds the served page is kept (``--refresh``) in this test.
REFRESH = 3
#: A GPU model name as a ResourceSlice may carry it: a string attribute takes any text.
HOSTILE_MODEL = '<img src=x onerror="alert(1)">'
CHROMIUM_ARGS = ("--headless", "--disable-gpu", "--no-sandbox", "--hide-scrollbars")


@pytest.fixture(scope="module")
def browser() -> str:
    """Chromium's path; skips (before any server starts) where it is not installed."""
    path = shutil.which("chromium")
    if not path:
        pytest.skip(
            "chromium is not installed: apt-get install -y chromium "
            "(scripts/setup podman installs it)"
        )
    return path


def node_slice(name: str, node: str, devices: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {"name": name},
        "spec": {
            "driver": DRIVER,
            "nodeName": node,
            "pool": {"name": name, "generation": 1, "resourceSliceCount": 1},
            "devices": devices,
        },
    }


def claim(name: str, selector: str | None = None) -> dict[str, Any]:
    exactly: dict[str, Any] = {"deviceClassName": "gpu.nvidia.com"}
    if selector:
        exactly["selectors"] = [{"cel": {"expression": selector}}]
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": name, "namespace": NS},
        "spec": {"devices": {"requests": [{"name": "gpu", "exactly": exactly}]}},
    }


def pod(name: str, claim_name: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": NS},
        "spec": {
            "resourceClaims": [{"name": "gpu", "resourceClaimName": claim_name}],
            "containers": [
                {"name": "c", "image": "busybox", "resources": {"claims": [{"name": "gpu"}]}}
            ],
        },
    }


def allocate(cp: ControlPlane, name: str, gpu: str, pod_name: str, uid: str) -> None:
    """``status`` of claim ``name`` as kube-scheduler writes it: ``gpu`` of the node's
    pool allocated, reserved for pod ``pod_name`` (``uid``)."""
    result = {"request": "gpu", "driver": DRIVER, "pool": f"{NODE}-gpu", "device": gpu}
    status = {
        "allocation": {"devices": {"results": [result]}},
        "reservedFor": [{"resource": "pods", "name": pod_name, "uid": uid}],
    }
    cp.kubectl("-n", NS, "patch", "resourceclaim", name, "--subresource=status",
               "--type=merge", "-p", json.dumps({"status": status}))  # fmt: skip


def load_scenario(cp: ControlPlane) -> None:
    """One H200 node (pool ``NVIDIA-H200``) publishing 4 GPUs and 3 MIG 1g.18gb devices;
    ``train`` holds gpu-0 for its running pod, ``serve`` holds gpu-1 for a pod that is
    gone (leaked), ``wants-b200`` waits for a model nobody publishes (pending); the
    namespace is team ``vision``'s."""
    labels = {"nvidia.com/gpu.product": "NVIDIA-H200", "nvidia.com/gpu.present": "true"}
    team = {"gpufleet.io/team": "vision"}
    devices = [device(f"gpu-{i}", f"GPU-{i}") for i in range(4)]
    devices += [device(f"gpu-4-mig-1g18gb-19-{i}", f"MIG-{i}", "1g.18gb") for i in range(3)]
    b200 = "device.attributes['gpu.nvidia.com'].productName == 'NVIDIA B200'"
    apply(
        cp,
        [
            {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS, "labels": team}},
            {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "default",
                                                                         "namespace": NS}},
            {"apiVersion": "v1", "kind": "Node", "metadata": {"name": NODE, "labels": labels}},
            node_slice(f"{NODE}-gpu", NODE, devices),
        ],
    )  # fmt: skip
    apply(
        cp,
        [
            claim("train"),
            claim("serve"),
            claim("wants-b200", b200),
            pod("trainer", "train"),
            pod("b200-job", "wants-b200"),
        ],
    )
    trainer = cp.get_json(f"/api/v1/namespaces/{NS}/pods/trainer")
    allocate(cp, "train", "gpu-0", "trainer", trainer["metadata"]["uid"])
    allocate(cp, "serve", "gpu-1", "server", "0b7e6c7e-0000-4000-8000-000000000001")


@pytest.fixture
def served(apiserver: ControlPlane, tmp_path: Path) -> Iterator[str]:
    """``gpufleet report --serve 127.0.0.1:<free port> --refresh REFRESH`` as its own
    process, against ``apiserver``; its URL, once it answers."""
    (port,) = pick_free_ports(1)
    log = (tmp_path / "serve.log").open("w")
    proc = subprocess.Popen(
        [GPUFLEET, "report", "--kubeconfig", str(apiserver.kubeconfig),
         "--serve", f"127.0.0.1:{port}", "--refresh", str(REFRESH)],
        stdout=log, stderr=subprocess.STDOUT,
    )  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and proc.poll() is None:
            try:
                urllib.request.urlopen(f"{url}/metrics", timeout=10).close()
                break
            except (urllib.error.URLError, ConnectionError):
                time.sleep(0.2)
        assert proc.poll() is None, (tmp_path / "serve.log").read_text()
        yield url
    finally:
        proc.terminate()
        proc.wait(timeout=10)
        log.close()


class _Text(HTMLParser):
    """The text of a DOM (whitespace collapsed) and the tags in it."""

    def __init__(self) -> None:
        super().__init__()
        self.parts: list[str] = []
        self.tags: list[str] = []
        self._skip = 0

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append(tag)
        self._skip += tag in ("style", "title")

    def handle_endtag(self, tag: str) -> None:
        self._skip -= tag in ("style", "title")

    def handle_data(self, data: str) -> None:
        if not self._skip:
            self.parts.append(data)

    @property
    def text(self) -> str:
        return " ".join(" ".join(self.parts).split())


def browse(
    exe: str, url: str, tmp_path: Path, screenshot: Path | None = None
) -> tuple[_Text, float]:
    """Load ``url`` in headless Chromium ``exe``: (the DOM it built, seconds the load took,
    the browser's start included); fails on any console message. With ``screenshot``, a
    second load writes a PNG of the page there (1280 px wide)."""
    args = [exe, *CHROMIUM_ARGS, f"--user-data-dir={tmp_path / 'chromium'}"]
    start = time.monotonic()
    proc = subprocess.run(
        [*args, "--enable-logging=stderr", "--v=0", "--dump-dom", url],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    seconds = time.monotonic() - start
    assert proc.returncode == 0, proc.stderr[-2000:]
    console = [line for line in proc.stderr.splitlines() if ":CONSOLE" in line]
    assert not console, "\n".join(console)
    dom = _Text()
    dom.feed(proc.stdout)
    if screenshot:
        subprocess.run(
            [*args, "--window-size=1280,1350", f"--screenshot={screenshot}", url],
            capture_output=True, check=True, timeout=120,
        )  # fmt: skip
        assert screenshot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    return dom, seconds


def fetch(url: str) -> tuple[int, str, str, float]:
    """(status, Content-Type, body, seconds) of one GET."""
    start = time.monotonic()
    try:
        with urllib.request.urlopen(url, timeout=60) as resp:
            status, kind, body = resp.status, resp.headers["Content-Type"], resp.read()
    except urllib.error.HTTPError as err:
        status, kind, body = err.code, err.headers["Content-Type"], err.read()
    return status, kind, body.decode(), time.monotonic() - start


def test_the_live_page_in_chromium(
    browser: str, apiserver: ControlPlane, served: str, tmp_path: Path
) -> None:
    load_scenario(apiserver)
    status, kind, page, cold = fetch(f"{served}/")
    assert (status, kind) == (200, "text/html; charset=utf-8"), page
    _, _, _, warm = fetch(f"{served}/")

    shot = tmp_path / "report-live.png"
    dom, seconds = browse(browser, f"{served}/", tmp_path, shot)
    print(
        f"\npage: first answer {cold * 1000:.0f} ms (listing), kept answer {warm * 1000:.0f} "
        f"ms; Chromium load {seconds:.2f} s (browser start included); screenshot {shot} "
        f"({shot.stat().st_size} bytes)"
    )
    text = dom.text
    assert "7 devices published on 1 node(s), 2 allocated, 5 free" in text
    assert "claims pending: 1 (1 no-device-published)" in text
    assert "Pending claims (1)" in text and f"{NS}/wants-b200" in text
    assert "Claims allocated with no running consumer (1)" in text
    assert re.search(rf"{NS}/serve \(dead-reservation, 140\.4 GiB\)", text), text
    assert "leaked GPUs by team (gpufleet.io/team): vision 1 device 140.4 GiB" in text
    # the bar charts: one bar per (model, profile), drawn as SVG
    assert "2 allocated, 2 free of 4" in text and "0 allocated, 3 free of 3" in text
    assert dom.tags.count("svg") == 2 and "script" not in dom.tags and "img" not in dom.tags
    assert seconds < 60

    hostile = device("gpu-0", "GPU-X")
    hostile["attributes"]["productName"] = {"string": HOSTILE_MODEL}
    apply(apiserver, [node_slice("gpu-a-extra", NODE, [hostile])])
    time.sleep(REFRESH + 0.5)
    dom, _ = browse(browser, f"{served}/", tmp_path)
    assert "8 devices published on 1 node(s), 2 allocated, 6 free" in dom.text
    assert HOSTILE_MODEL in dom.text and "img" not in dom.tags

    status, kind, body, _ = fetch(f"{served}/metrics")
    assert status == 200 and body.endswith("gpufleet_report_up 1\n")
    apiserver.stop()
    time.sleep(REFRESH + 0.5)
    status, kind, body, seconds = fetch(f"{served}/")
    assert (status, kind) == (503, "text/plain; charset=utf-8"), body
    assert body.startswith("cannot read the cluster: ") and body.count("\n") == 1, body
    assert "Traceback" not in body and seconds < 60
    status, _, body, _ = fetch(f"{served}/")
    assert status == 503  # not kept: listed again, still down
