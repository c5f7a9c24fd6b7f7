"""``gpufleet claims check`` on a file of mixed kinds, with the Python CEL environment
(no celcheck binary: ``GPUFLEET_CACHE`` points at an empty directory): DeviceClasses are
checked, Pods and other kinds listed as not checked, selectors get Kubernetes' verdict or
``cannot-judge``, and the NVIDIA driver's opaque configs are held to the request they
attach to."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from gpufleet.cli import main

pytestmark = pytest.mark.unit

DATA = Path(__file__).resolve().parents[1] / "data" / "claims"


@pytest.fixture(autouse=True)
def _no_celcheck(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("GPUFLEET_CACHE", str(tmp_path))


def check(*args: str):
    result = CliRunner().invoke(main, ["claims", "check", *args])
    assert result.exception is None or isinstance(result.exception, SystemExit), result.output
    return result


def test_mixed_kinds_optional_syntax_and_a_gpu_config_on_a_mig_request() -> None:
    result = check(str(DATA / "mixed.yaml"), "--json")
    assert result.exit_code == 1, result.output
    report = json.loads(result.output)
    kinds = [(o["kind"], o["name"]) for o in report["objects"]]
    assert kinds == [("DeviceClass", "mig-1g"), ("ResourceClaimTemplate", "mig")]
    assert report["objects"][0]["problems"] == []
    assert report["notChecked"] == ["Pod default/p"]
    problems = report["objects"][1]["problems"]
    by = {p["severity"]: p for p in problems}
    assert by["cannot-judge"]["path"].endswith("selectors[0].cel.expression")
    assert "optional syntax" in by["cannot-judge"]["message"]
    assert by["error"]["path"] == "spec.spec.devices.config[0].opaque.parameters.kind"
    assert "use kind: MigDeviceConfig" in by["error"]["message"]
    assert report["errors"] == 1 and report["cannotJudge"] == 1
    assert report["celJudgedBy"].startswith("Python environment")


def test_global_calls_of_member_functions_and_a_mig_config_on_a_gpu_request() -> None:
    result = check(str(DATA / "bad.yaml"))
    assert result.exit_code == 1
    lines = result.output.splitlines()
    errors = [line for line in lines if line.startswith("error")]
    assert len(errors) == 3, result.output
    assert "x.add(...)" in errors[0] and "x.split(...)" in errors[1]
    assert "MigDeviceConfig on request 'gpu'" in errors[2] and "use kind: GpuConfig" in errors[2]
    assert any(line.startswith("cannot-judge") and "find()" in line for line in lines)
    assert lines[-1].endswith("FAIL") and "1 CEL selector(s) not judged offline" in lines[-1]


def test_an_older_driver_makes_the_config_mismatch_a_warning() -> None:
    result = check(str(DATA / "bad.yaml"), "--driver-version", "25.8.1", "--json")
    report = json.loads(result.output)
    severities = [p["severity"] for p in report["objects"][0]["problems"]]
    assert severities.count("error") == 2 and severities.count("warning") == 1


def test_an_unjudged_selector_alone_passes(tmp_path) -> None:
    text = (DATA / "mixed.yaml").read_text().replace("kind: GpuConfig", "kind: MigDeviceConfig")
    text = text.replace(", sharing: {strategy: TimeSlicing}", "")
    path = tmp_path / "ok.yaml"
    path.write_text(text)
    result = check(str(path))
    assert result.exit_code == 0, result.output
    assert "1 CEL selector(s) not judged offline" in result.output


def test_a_bad_driver_version_is_unusable_input() -> None:
    result = check(str(DATA / "bad.yaml"), "--driver-version", "x")
    assert result.exit_code == 2 and "not a driver release" in result.output


def test_a_file_of_pods_only_is_unusable_input(tmp_path) -> None:
    path = tmp_path / "pods.yaml"
    path.write_text("apiVersion: v1\nkind: Pod\nmetadata: {name: p}\n")
    result = check(str(path))
    assert result.exit_code == 2
    assert "no DeviceClass, ResourceClaimTemplate or ResourceClaim" in result.output
