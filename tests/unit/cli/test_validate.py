"""``gpufleet validate`` rendering and outputs, and its refusal of bad input."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from ansible_collections.gpufleet.cluster.plugins.module_utils.validate import report as vr
from click.testing import CliRunner
from rich.console import Console

from gpufleet.cli import main
from gpufleet.commands import validate as cmd
from gpufleet.render import validation

pytestmark = pytest.mark.unit


def report() -> dict:
    bad = vr.Check("nodes.plugin-running", "plugin")
    bad.problem("gpu-2", vr.FAIL, "no kubelet plugin pod is scheduled here")
    bad.fix = "check the DaemonSet"
    ok = vr.Check("versions.kubelet-skew", "skew")
    return vr.Report(
        [vr.finish(ok, "2 kubelets fine"), vr.finish(bad, "ok")],
        {"kubernetes_version": "v1.37.2", "api_requests": 9, "duration_s": 0.4},
    ).to_dict()


def test_tables_per_area_failures_first_with_problem_and_fix() -> None:
    console = Console(record=True, width=160)
    validation.render_report(console, report())
    text = console.export_text()
    assert text.startswith("validation: FAIL  1 failed, 0 warnings, 0 skipped, 1 passed\n")
    assert text.index("versions") < text.index("nodes") < text.index("│ FAIL ")
    assert "gpu-2: no kubelet plugin pod is scheduled here" in text
    assert "fix: check the DaemonSet" in text
    assert (
        "FAIL: 1 failed, 0 warnings, 0 skipped, 1 passed; Kubernetes v1.37.2, 9 API requests"
        in text
    )


def test_outputs_are_json_junit_and_markdown(tmp_path: Path) -> None:
    r = report()
    cmd.write_outputs(r, str(tmp_path / "r.json"), str(tmp_path / "r.xml"), str(tmp_path / "r.md"))
    assert (
        json.loads((tmp_path / "r.json").read_text())["checks"][0]["id"] == "nodes.plugin-running"
    )
    root = ET.parse(tmp_path / "r.xml").getroot()
    assert root.get("failures") == "1"
    assert "| FAIL | `nodes.plugin-running` |" in (tmp_path / "r.md").read_text()


def test_extra_vars_parse_yaml_values() -> None:
    from gpufleet.commands._options import extra_vars_option

    values = ("validate_pending_threshold=0", "a=[1, 2]", "b=x")
    assert extra_vars_option(None, None, values) == {  # type: ignore[arg-type]
        "validate_pending_threshold": 0,
        "a": [1, 2],
        "b": "x",
    }


def test_bad_extra_var_exits_2() -> None:
    result = CliRunner().invoke(main, ["validate", "-e", "novalue"])
    assert result.exit_code == 2
    assert "'novalue' is not KEY=VALUE" in result.output


def test_missing_inventory_exits_2(tmp_path: Path) -> None:
    result = CliRunner().invoke(main, ["validate", "-i", str(tmp_path / "nope")])
    assert result.exit_code == 2


def test_explain_refuses_a_reference_without_namespace() -> None:
    result = CliRunner().invoke(main, ["claims", "explain", "just-a-name"])
    assert result.exit_code == 2
    assert "is not NAMESPACE/CLAIM" in result.output


def test_explain_prints_the_exhausted_counters_of_each_gpu() -> None:
    """``claims explain`` on the terminal: a table per CounterSet naming each exhausted
    memory slice, its capacity, consumption and need, and the claim holding it."""
    from ansible_collections.gpufleet.cluster.plugins.module_utils.claims import explain

    from gpufleet.commands import claims_gc
    from tests.unit.dynamic_mig_slices import H200_NODE, allocated_claim, slices
    from tests.unit.validate_objects import GPU_CLASS, MIG_CLASS, claim, mig_request, node

    held = [
        allocated_claim(n, H200_NODE, f"gpu-0-mig-1g18gb-19-{i}") for n, i in (("a", 1), ("b", 5))
    ]
    mine = claim("big", requests=[mig_request("3g.71gb")])
    result = explain.explain_claim(
        mine, [GPU_CLASS, MIG_CLASS], slices(H200_NODE), [mine, *held], [node(H200_NODE)]
    )
    console = Console(record=True, width=200)
    claims_gc.render_explain(console, result)
    text = console.export_text()
    assert "verdict: counters" in text
    assert (
        "shared counters exhausted: gpu-0-counter-set on h200-node (memory slices free: 0, 2, "
        "3, 4, 6, 7)"
    ) in text
    rows = [" ".join(line.split()) for line in text.splitlines()]
    assert "│ memory-slice-1 │ 1 │ 1 │ 1 │ default/a │ 1 │" in rows
    assert "│ memory-slice-5 │ 1 │ 1 │ 1 │ default/b │ 1 │" in rows


def test_the_details_of_a_passing_check_are_in_its_row() -> None:
    paths = vr.Check(
        "nodes.gpu-paths", "paths", details=["gpu_h200: declares dra; 3 node(s) advertise dra 3"]
    )
    console = Console(record=True, width=160)
    validation.render_report(console, vr.Report([vr.finish(paths, "1 pool(s) agree")]).to_dict())
    text = console.export_text()
    assert text.index("1 pool(s) agree") < text.index(
        "gpu_h200: declares dra; 3 node(s) advertise dra 3"
    )
