"""The monitoring role's alert on a node advertised by both GPU paths
(``GPUNodeDualAdvertised``): it joins the two series ``gpufleet report --serve`` exports
(``report/metrics.py``) on the labels that exporter writes, names node, resource and both
advertisers, and the promtool test case of tests/integration/data/monitoring expects the
annotations the template renders (promtool itself runs in
tests/integration/test_monitoring_rules.py)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import jinja2
import pytest
import yaml
from ansible_collections.gpufleet.cluster.plugins.module_utils.report import fleet as fr
from ansible_collections.gpufleet.cluster.plugins.module_utils.report import metrics as fm

from tests.unit.report.test_fleet import device, rslice

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[2]
ROLE = ROOT / "roles" / "monitoring"
PROMTOOL_TESTS = ROOT / "tests" / "integration" / "data" / "monitoring"
ALERT = "GPUNodeDualAdvertised"


def rendered_rule() -> dict[str, Any]:
    """The alert as the role renders it with its defaults (the template's own delimiters)."""
    template = (ROLE / "templates" / "gpufleet-dra.rules.yml.j2").read_text(encoding="utf-8")
    _first, _, body = template.partition("\n")
    env = jinja2.Environment(
        variable_start_string="[[", variable_end_string="]]", undefined=jinja2.StrictUndefined
    )
    env.filters["to_json"] = json.dumps
    defaults = yaml.safe_load((ROLE / "defaults" / "main.yml").read_text(encoding="utf-8"))
    doc = yaml.safe_load(env.from_string(body).render(**defaults))
    (rule,) = [r for g in doc["groups"] for r in g["rules"] if r.get("alert") == ALERT]
    return rule


def expand(text: str, labels: dict[str, str], value: float) -> str:
    """Prometheus' alert template for the only forms the rule uses: ``{{ $labels.X }}``
    and ``{{ $value }}`` (a whole value prints without a decimal point)."""
    text = re.sub(r"\{\{ \$labels\.(\w+) \}\}", lambda m: labels[m.group(1)], text)
    return text.replace("{{ $value }}", f"{value:g}")


def test_the_rule_joins_the_exporters_two_series_per_node() -> None:
    rule = rendered_rule()
    assert rule["expr"] == (
        "max by (node, resource) (gpufleet_node_device_plugin_allocatable > 0) "
        "and on(node) "
        "max by (node) (gpufleet_gpu_node_resourceslice_devices > 0)"
    )
    assert rule["for"] == "5m" and rule["labels"] == {"severity": "critical"}


def test_the_exporter_writes_both_series_with_the_labels_the_rule_joins_on() -> None:
    node = {
        "metadata": {"name": "w1", "labels": {"nvidia.com/gpu.present": "true"}},
        "status": {"allocatable": {"nvidia.com/gpu": "8"}},
    }
    slices = [rslice("w1", [device(f"gpu-{i}", "NVIDIA H200", "141Gi") for i in range(8)])]
    text = fm.render(fr.build_report(slices, [], [], [node]), [node])
    assert 'gpufleet_node_device_plugin_allocatable{node="w1",resource="nvidia.com/gpu"} 8' in (
        text.splitlines()
    )
    assert 'gpufleet_gpu_node_resourceslice_devices{node="w1"} 8' in text.splitlines()


def test_the_annotations_name_node_resource_and_both_advertisers() -> None:
    notes = rendered_rule()["annotations"]
    summary = expand(notes["summary"], {"node": "w1", "resource": "nvidia.com/gpu"}, 8)
    assert summary == (
        "GPU node w1 advertises its GPUs twice: nvidia.com/gpu (NVIDIA device plugin) and "
        "gpu.nvidia.com devices (DRA driver)"
    )
    description = expand(notes["description"], {"node": "w1", "resource": "nvidia.com/gpu"}, 8)
    assert description.startswith(
        "w1 lists 8 nvidia.com/gpu in status.allocatable from NVIDIA's device plugin while "
        "ResourceSlices of the DRA driver gpu.nvidia.com publish devices on it"
    )
    assert "gpu_path_device_plugin or gpu_path_dra" in description


def test_the_promtool_case_expects_what_the_template_renders() -> None:
    doc = yaml.safe_load((PROMTOOL_TESTS / "gpufleet-dra.rules.test.yml").read_text())
    cases = [
        t
        for test in doc["tests"]
        for t in test.get("alert_rule_test") or []
        if t["alertname"] == ALERT and t["exp_alerts"]
    ]
    assert len(cases) == 1
    notes = rendered_rule()["annotations"]
    values = {"w1": 8, "w4": 7}
    expected = cases[0]["exp_alerts"]
    assert [a["exp_labels"]["node"] for a in expected] == ["w1", "w4"]
    for alert in expected:
        labels = alert["exp_labels"]
        value = values[labels["node"]]
        assert alert["exp_annotations"] == {
            key: expand(notes[key], labels, value) for key in ("summary", "description")
        }
