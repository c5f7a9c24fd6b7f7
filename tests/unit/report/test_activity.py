"""``report.activity``: the PromQL of a device's activity, the reading of Prometheus'
instant-query answers, the idle devices, and ``fetch`` against a real local HTTP server
(answers of the API's shape and of others)."""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, ClassVar

import jinja2
import pytest
import yaml
from ansible_collections.gpufleet.cluster.plugins.module_utils.report import activity as fa

pytestmark = pytest.mark.unit

RULES = Path(__file__).resolve().parents[3] / "roles/monitoring/templates/gpufleet-dra.rules.yml.j2"
LABELS = {"dra_driver_name": "gpu.nvidia.com", "dra_pool_name": "n1", "dra_device_name": "gpu-0"}


def answer(*series: tuple[dict[str, str], str]) -> dict[str, Any]:
    result = [{"metric": m, "value": [1700000000.0, v]} for m, v in series]
    return {"status": "success", "data": {"resultType": "vector", "result": result}}


def test_the_report_and_the_idle_alert_judge_activity_alike() -> None:
    text = RULES.read_text().split("\n", 1)[1]  # the first line sets the delimiters
    env = jinja2.Environment(variable_start_string="[[", variable_end_string="]]")
    env.filters["to_json"] = json.dumps  # Ansible's to_json, for the strings the rules quote
    names = re.findall(r"\[\[ *(monitoring_\w+) *\]\]", text)
    values = {name: "1" for name in names} | {"monitoring_device_idle_window": "10m"}
    rendered = env.from_string(text).render(**values)
    expr = next(
        rule["expr"]
        for group in yaml.safe_load(rendered)["groups"]
        for rule in group["rules"]
        if rule.get("alert") == "DRAAllocatedDeviceIdle"
    )
    left = re.sub(r"\s+", " ", expr.split("<")[0]).strip().strip("()").strip()
    assert left == fa.utilization_expr("10m")


@pytest.mark.parametrize("window", ["30s", "10m", "2h", "1d", "1w"])
def test_windows_prometheus_reads(window: str) -> None:
    assert f"[{window}]" in fa.utilization_expr(window)


@pytest.mark.parametrize("window", ["", "0m", "10", "1h30m", "5 m", "1y; drop", "m5", 7])
def test_other_windows_are_refused(window: Any) -> None:
    with pytest.raises(fa.ActivityError, match="Prometheus duration"):
        fa.check_window(window)


def test_a_vector_is_read_per_device_keeping_the_highest() -> None:
    other = {**LABELS, "dra_device_name": "gpu-1"}
    doc = answer((LABELS, "3.5"), (dict(LABELS, gpu="0"), "9"), (other, "80"))
    assert fa.parse_vector(doc) == {"gpu.nvidia.com/n1/gpu-0": 9.0, "gpu.nvidia.com/n1/gpu-1": 80.0}


def test_series_without_dra_labels_or_numbers_are_left_out() -> None:
    doc = answer(
        ({"gpu": "0"}, "1"),
        ({**LABELS, "dra_pool_name": ""}, "1"),
        (LABELS, "NaN"),
        (LABELS, "busy"),
    )
    doc["data"]["result"] += ["not an object", {"metric": LABELS, "value": "1"}]
    assert fa.parse_vector(doc) == {}


@pytest.mark.parametrize(
    ("doc", "why"),
    [
        ([], "not a JSON object"),
        ({"status": "error", "error": "parse error"}, "parse error"),
        ({"status": "success", "data": {"resultType": "matrix", "result": []}}, "no vector"),
    ],
)
def test_answers_of_another_shape_are_refused(doc: Any, why: str) -> None:
    with pytest.raises(fa.ActivityError, match=why):
        fa.parse_vector(doc)


def test_idle_devices_are_those_below_the_threshold_and_unmeasured_are_counted() -> None:
    allocated = [
        ("d/p/gpu-0", "ns/a", "n1", "NVIDIA H200", "gpu"),
        ("d/p/gpu-1", "ns/b", "n1", "NVIDIA H200", "gpu"),
        ("d/p/gpu-2", "ns/c", "n1", "NVIDIA H200", "1g.18gb"),
    ]
    idle, unknown = fa.idle_devices(allocated, {"d/p/gpu-0": 4.99, "d/p/gpu-1": 5.0}, 5.0)
    assert [(i["claim"], i["percent"]) for i in idle] == [("ns/a", 4.99)]
    assert unknown == 1


class _Server(BaseHTTPRequestHandler):
    status = 200
    body = b""
    paths: ClassVar[list[str]] = []

    def do_GET(self) -> None:
        type(self).paths.append(self.path)
        self.send_response(type(self).status)
        self.end_headers()
        self.wfile.write(type(self).body)

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def server() -> Iterator[tuple[str, type[_Server]]]:
    handler = type("H", (_Server,), {"paths": []})
    srv = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{srv.server_address[1]}", handler
    finally:
        srv.shutdown()


def test_fetch_asks_one_instant_query(server: tuple[str, type[_Server]]) -> None:
    url, handler = server
    handler.body = json.dumps(answer((LABELS, "42"))).encode()
    assert fa.fetch(url + "/", "15m", timeout_s=5) == {"gpu.nvidia.com/n1/gpu-0": 42.0}
    (path,) = handler.paths
    assert path.startswith("/api/v1/query?query=") and "15m" in path


@pytest.mark.parametrize(
    ("status", "body", "why"),
    [(503, b"", "HTTP 503"), (200, b"<html>", "did not answer JSON"), (200, b"[]", "JSON object")],
)
def test_fetch_refuses_what_is_not_the_api(
    server: tuple[str, type[_Server]], status: int, body: bytes, why: str
) -> None:
    url, handler = server
    handler.status, handler.body = status, body
    with pytest.raises(fa.ActivityError, match=why):
        fa.fetch(url, "1h", timeout_s=5)


@pytest.mark.parametrize("url", ["prometheus:9090", "file:///etc/passwd", "ftp://h/", ""])
def test_fetch_refuses_urls_that_are_not_http(url: str) -> None:
    with pytest.raises(fa.ActivityError, match="not an http"):
        fa.fetch(url, "1h")


def test_fetch_hides_credentials_of_an_unreachable_url() -> None:
    with pytest.raises(fa.ActivityError) as info:
        fa.fetch("http://user:secret@127.0.0.1:9/", "1h", timeout_s=2)
    assert "secret" not in str(info.value) and "cannot reach Prometheus" in str(info.value)


@pytest.mark.parametrize(
    ("args", "option"),
    [
        (["--prometheus", "file:///etc/passwd"], "--prometheus"),
        (["--prometheus", "http://h:port"], "--prometheus"),
        (["--prometheus", ""], "--prometheus"),
        (["--idle-window", "1h30m"], "--idle-window"),
        (["--idle-below", "101"], "--idle-below"),
    ],
)
def test_report_refuses_activity_options_before_reading_the_cluster(
    tmp_path: Path, args: list[str], option: str
) -> None:
    from click.testing import CliRunner

    from gpufleet.cli import main

    # the kubeconfig does not exist: refusing it would name --kubeconfig instead
    result = CliRunner().invoke(main, ["report", "--kubeconfig", str(tmp_path / "none"), *args])
    assert result.exit_code == 2, result.output
    assert option in result.output and "Traceback" not in result.output
