"""``gpufleet lab down`` removes the lab's files on this machine, the upgrade report too: a
new lab of the same name must not resume (or skip the validation before) an upgrade of
the lab that was removed. Runs the real ``down`` against podman with a lab name no
container or network has."""

from __future__ import annotations

import shutil
import uuid

import pytest

from gpufleet.lab import cluster

pytestmark = pytest.mark.integration


@pytest.mark.skipif(shutil.which("podman") is None, reason="podman is not installed here")
def test_down_removes_state_kubeconfig_and_upgrade_report(tmp_path, monkeypatch):
    monkeypatch.setenv("GPUFLEET_CACHE", str(tmp_path))
    monkeypatch.setenv("GPUFLEET_LAB_NAME", f"gpufleet-unit-{uuid.uuid4().hex[:8]}")
    lab = cluster.lab_dir()
    lab.mkdir(parents=True)
    reports = [lab / n for n in ("upgrade-report.json", "upgrade-report.json.lock",
                                 "upgrade-report-gpu-stack.json",
                                 "upgrade-report-gpu-stack.json.lock")]  # fmt: skip
    files = [cluster.state_path(), cluster.kubeconfig_path(), *reports]
    for f in files:
        f.write_text("{}")
    left = cluster.down(log=lambda _line: None)
    assert [f.name for f in files if f.exists()] == []
    assert left["containers"] == [] and left["network"] == []
