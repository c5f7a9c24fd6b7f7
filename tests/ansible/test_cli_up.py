"""``gpufleet up``: real ansible-runner runs of a small stand-in site playbook on the local
host, the validation report it writes, and the exit codes 0/1/2."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest
from ansible_collections.gpufleet.cluster.plugins.module_utils.validate import report as vr
from click.testing import CliRunner, Result

from gpufleet.cli import main

pytestmark = pytest.mark.ansible

DATA = Path(__file__).resolve().parents[1] / "unit" / "data" / "up"


def _report(tmp_path: Path, failing: bool) -> Path:
    labels = vr.Check("nodes.gpu-labels", "GPU nodes carry the labels")
    if failing:
        labels.problem("gpu-2", vr.FAIL, "lacks nvidia.com/gpu.present=true")
        labels.fix = "gpufleet up runs gpu_node_labels; or label the node"
    slices = vr.Check("nodes.resourceslices", "Every GPU node publishes its devices")
    report = vr.Report([vr.finish(labels, "2 of 2 labelled"), vr.finish(slices, "2 nodes")])
    path = tmp_path / "report-src.json"
    path.write_text(json.dumps(report.to_dict()))
    return path


def _up(tmp_path: Path, *args: str) -> Result:
    env = {"GPUFLEET_CACHE": str(tmp_path / "cache"), "COLUMNS": "200"}
    return CliRunner().invoke(
        main,
        [
            "up",
            "-i",
            str(DATA / "inventory.ini"),
            "--playbook",
            str(DATA / "site.yml"),
            "-e",
            f"up_test_marker={tmp_path / 'marker'}",
            *args,
        ],
        env=env,
    )


def test_a_clean_run_with_a_passing_report_exits_0_and_shows_the_checks(tmp_path: Path) -> None:
    result = _up(tmp_path, "-e", f"up_test_report_src={_report(tmp_path, failing=False)}")
    assert result.exit_code == 0, result.output
    assert "validation: PASS" in result.output
    assert "nodes.gpu-labels" in result.output and "2 of 2 labelled" in result.output
    written = tmp_path / "cache" / "reports" / "validate-latest.json"
    assert json.loads(written.read_text())["status"] == "pass"
    # gpufleet up asks the validate playbook for the smoke pod and for the report there
    assert (tmp_path / "marker").read_text() == f"smoke=True report={written}\n"


def test_a_failed_check_in_the_report_exits_1_with_its_problem_and_fix(tmp_path: Path) -> None:
    result = _up(tmp_path, "-e", f"up_test_report_src={_report(tmp_path, failing=True)}")
    assert result.exit_code == 1, result.output
    assert "validation: FAIL" in result.output
    assert "gpu-2: lacks nvidia.com/gpu.present=true" in result.output
    assert "fix: gpufleet up runs gpu_node_labels" in result.output


def test_a_failed_host_exits_1_and_no_report_is_shown(tmp_path: Path) -> None:
    result = _up(tmp_path, "-e", "up_test_fail=true")
    assert result.exit_code == 1, result.output
    assert "node-1 refuses" in result.output
    assert "validation:" not in result.output


def test_a_report_older_than_the_run_is_not_shown(tmp_path: Path) -> None:
    stale = tmp_path / "cache" / "reports" / "validate-latest.json"
    stale.parent.mkdir(parents=True)
    stale.write_text(_report(tmp_path, failing=True).read_text())
    old = time.time() - 3600
    os.utime(stale, (old, old))
    result = _up(tmp_path)
    assert result.exit_code == 0, result.output
    assert "validation:" not in result.output
    assert "no validation report from this run" in result.output


def test_check_mode_is_passed_to_ansible(tmp_path: Path) -> None:
    result = _up(tmp_path, "--check")
    assert result.exit_code == 0, result.output
    assert not (tmp_path / "marker").exists()  # copy changes nothing in check mode


def test_a_missing_inventory_or_a_bad_extra_var_exits_2(tmp_path: Path) -> None:
    missing = CliRunner().invoke(
        main, ["up", "-i", str(tmp_path / "nope")], env={"GPUFLEET_CACHE": str(tmp_path)}
    )
    assert missing.exit_code == 2
    assert "does not exist" in missing.output
    bad = _up(tmp_path, "-e", "novalue")
    assert bad.exit_code == 2 and "KEY=VALUE" in bad.output
