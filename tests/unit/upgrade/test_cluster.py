"""Cluster snapshots and the upgrade report as the upgrade reads them
(``plugins/module_utils/upgrade/cluster.py``); reading a live cluster is tested in
``tests/integration``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from ansible_collections.gpufleet.cluster.plugins.module_utils.upgrade import cluster as uc

pytestmark = pytest.mark.unit

SNAPSHOT = {
    "schema": uc.SNAPSHOT_SCHEMA,
    "nodes": [],
    "pods": [],
    "resourceslices": [],
    "kubeadm_versions": {},
    "cluster_configuration": None,
    "kubelet_configuration": None,
    "cluster_uid": "uid-1",
}
REPORT = {
    "target": "1.37.2",
    "cluster_uid": "uid-1",
    "nodes": {"w-1": {"cordoned_by_upgrade": True}, "w-2": {"cordoned_by_upgrade": False}},
}


def test_a_saved_snapshot_loads_back(tmp_path: Path) -> None:
    path = tmp_path / "snapshot.json"
    uc.save_snapshot(str(path), SNAPSHOT)
    assert uc.load_snapshot(str(path)) == SNAPSHOT


def test_snapshots_that_cannot_be_read_are_refused_naming_the_file(tmp_path: Path) -> None:
    with pytest.raises(uc.SnapshotError, match="no such file"):
        uc.load_snapshot(str(tmp_path / "missing.json"))
    listed = tmp_path / "list.json"
    listed.write_text("[1]")
    with pytest.raises(uc.SnapshotError, match="holds a JSON list"):
        uc.load_snapshot(str(listed))
    other = tmp_path / "other.json"
    other.write_text(json.dumps({**SNAPSHOT, "schema": 99}))
    with pytest.raises(uc.SnapshotError, match="has schema 99"):
        uc.load_snapshot(str(other))


def test_check_save_path(tmp_path: Path) -> None:
    assert uc.check_save_path(str(tmp_path / "s.json")) == str(tmp_path / "s.json")
    with pytest.raises(uc.SnapshotError, match="does not exist"):
        uc.check_save_path(str(tmp_path / "no-dir" / "s.json"))
    with pytest.raises(uc.SnapshotError, match="is a directory"):
        uc.check_save_path(str(tmp_path))


def test_read_report_is_empty_when_missing_or_not_an_object(tmp_path: Path) -> None:
    assert uc.read_report(str(tmp_path / "missing")) == {}
    (tmp_path / "list.json").write_text("[1]")
    assert uc.read_report(str(tmp_path / "list.json")) == {}
    (tmp_path / "report.json").write_text(json.dumps(REPORT))
    assert uc.read_report(str(tmp_path / "report.json")) == REPORT


def test_a_report_of_another_cluster_is_foreign() -> None:
    assert uc.foreign_report(REPORT, "uid-2") is True
    assert uc.foreign_report(REPORT, "uid-1") is False
    assert uc.foreign_report(REPORT, None) is False
    assert uc.foreign_report({}, "uid-2") is False


def test_resume_hosts_are_those_the_run_to_the_target_left_cordoned() -> None:
    assert uc.resume_hosts(REPORT, ["1.37.2"]) == ["w-1"]
    assert uc.resume_hosts(REPORT, ["1.36.3"]) == []
