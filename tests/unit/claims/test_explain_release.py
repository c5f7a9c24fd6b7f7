"""``claims explain`` judges selectors for the cluster's own release: the release read
from the API server's ``/version`` (a loopback HTTP server here), and the explanation of
a claim whose selector only some releases compile (``isSemver`` took its second argument
in 1.34; tests/data/cel_verdicts.json)."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
import yaml
from ansible_collections.gpufleet.cluster.plugins.module_utils.claims import explain as cexplain
from ansible_collections.gpufleet.cluster.plugins.module_utils.kube import client as vk

from gpufleet.build import celcheck as kcel
from gpufleet.commands import claims_gc
from tests.unit.validate_objects import GPU_CLASS, claim, gpu_device, node, resource_slice

pytestmark = pytest.mark.unit

EXPRESSION = "isSemver('1.2', true)"


def _claim() -> dict:
    selector = {"cel": {"expression": EXPRESSION}}
    request = {
        "name": "gpu",
        "exactly": {"deviceClassName": "gpu.nvidia.com", "selectors": [selector]},
    }
    return claim("semver", requests=[request])


@pytest.mark.parametrize(
    ("release", "verdict"), [("1.33.13", "cel-error"), ("1.37.2", "would-fit")]
)
def test_explain_judges_a_selector_for_the_release_given(release: str, verdict: str) -> None:
    c = _claim()
    slices = [resource_slice("gpu-1", [gpu_device(0, "GPU-a")])]
    judge, judged_by = kcel.judge_for([EXPRESSION], release)
    ex = cexplain.explain_claim(c, [GPU_CLASS], slices, [c], [node("gpu-1")], judge=judge)
    assert ex["verdict"] == verdict, ex["summary"]
    assert release in judged_by
    if verdict == "cel-error":
        assert "request selector #0 does not compile" in ex["summary"]
        assert "isSemver" in ex["summary"]


class _Version(BaseHTTPRequestHandler):
    answer: bytes = b""

    def do_GET(self) -> None:
        body = self.answer if self.path == "/version" else b'{"kind": "Status"}'
        self.send_response(200 if self.path == "/version" else 404)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def api_server(tmp_path: Path) -> Iterator[tuple[type[_Version], Path]]:
    handler = type("Handler", (_Version,), {})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    kubeconfig = tmp_path / "kubeconfig"
    url = f"http://127.0.0.1:{server.server_address[1]}"
    kubeconfig.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": "c", "cluster": {"server": url}}],
                "users": [{"name": "u", "user": {"token": "t"}}],
                "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u"}}],
                "current-context": "x",
            }
        )
    )
    try:
        yield handler, kubeconfig
    finally:
        server.shutdown()
        server.server_close()


@pytest.mark.parametrize(
    ("git_version", "release"),
    [("v1.38.0-beta.0", "1.38.0-beta.0"), ("v1.33.13+k3s1", "1.33.13"), ("v1.37.2", "1.37.2")],
)
def test_the_cluster_release_is_the_api_servers_version(api_server, git_version, release) -> None:
    handler, kubeconfig = api_server
    handler.answer = json.dumps({"major": "1", "gitVersion": git_version}).encode()
    assert claims_gc.cluster_release(vk.Kube(str(kubeconfig))) == (release, "GET /version")


def test_a_version_that_is_no_release_is_said_and_not_guessed(api_server) -> None:
    handler, kubeconfig = api_server
    handler.answer = json.dumps({"gitVersion": "banana"}).encode()
    release, why = claims_gc.cluster_release(vk.Kube(str(kubeconfig)))
    assert release is None
    assert "GET /version gave no release" in why and "banana" in why
