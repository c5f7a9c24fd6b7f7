"""``gpufleet upgrade``: resume from the report (the role's planner reads it), unreachable
hosts, timings (gpufleet/commands/upgrade.py), the lab's additions (gpufleet/lab/upgrade.py)."""

from __future__ import annotations

import json

import pytest
from ansible_collections.gpufleet.cluster.plugins.module_utils.upgrade import cluster as uc

from gpufleet.commands.upgrade_report import PhaseTracker, unfinished_hosts
from gpufleet.lab import upgrade as lab
from gpufleet.render.upgrade_plan import timing_rows

TARGET = "1.37.2"


@pytest.mark.unit
def test_a_report_of_another_target_resumes_nothing():
    report = {"target": "1.36.3", "nodes": {"gpu-b": {"cordoned_by_upgrade": True}}}
    assert uc.resume_hosts(report, [TARGET]) == []
    assert uc.resume_hosts(report, ["1.36.3"]) == ["gpu-b"]
    assert unfinished_hosts({"target": TARGET, "nodes": {
        "a": {"state": "failed"}, "b": {"state": "in-progress"}, "c": {"state": "upgraded"}
    }}, [TARGET]) == ["a", "b"]  # fmt: skip


def _event(kind, host, res, **data):
    return {"event": kind, "event_data": {"host": host, "res": res, **data}}


@pytest.mark.unit
def test_unreachable_host_in_progress_is_recorded_failed_with_its_phase(tmp_path):
    path = tmp_path / "report.json"
    path.write_text(json.dumps({
        "target": TARGET,
        "nodes": {
            "gpu-a": {"node": "gpu-a", "state": "upgraded", "timings_s": {}},
            "gpu-b": {"node": "gpu-b", "state": "in-progress", "phase": "connect", "timings_s": {}},
        },
    }))  # fmt: skip
    tracker = PhaseTracker()
    tracker.feed(_event("runner_on_ok", "gpu-b", {"ansible_facts": {"upgrade_phase": "drain"}}))
    tracker.feed(_event("runner_on_ok", "gpu-b", {"ansible_facts": {"upgrade_drained": True}}))
    tracker.feed(_event("runner_on_ok", "gpu-b",
                        {"ansible_facts": {"upgrade_phase": "kubeadm-upgrade-node"}}))  # fmt: skip
    tracker.feed(_event("runner_on_unreachable", "gpu-b", {"msg": "Failed to connect\n  to gpu-b"}))
    # an unreachable result the task ignores (ignore_unreachable) is not a failure
    tracker.feed(_event("runner_on_unreachable", "gpu-a", {"msg": "x"}, ignore_errors=True))
    assert tracker.record(path, TARGET) == ["gpu-b"]
    entry = json.loads(path.read_text())["nodes"]["gpu-b"]
    assert (entry["state"], entry["phase"]) == ("failed", "kubeadm-upgrade-node")
    assert entry["cause"] == "host unreachable: Failed to connect to gpu-b"
    assert entry["cordoned"] is True and entry["cordoned_by_upgrade"] is True
    # a second look changes nothing: the entry is no longer in progress
    assert tracker.record(path, TARGET) == []


@pytest.mark.unit
def test_timings_add_the_control_plane_part_and_split_waits_from_overhead():
    report = {"nodes": {
        "cp": {"state": "upgraded", "timings_s": {"control_plane_s": 200.0, "drain_s": 10.0,
                                                  "restart_ready_s": 15.0, "node_total_s": 60.0}},
        "gpu-a": {"state": "upgraded", "timings_s": {
            "drain_s": 12.0, "restart_ready_s": 30.0, "dra_plugin_s": 20.0, "node_total_s": 150.0}},
        "gpu-b": {"state": "skipped", "timings_s": {}},
    }}  # fmt: skip
    rows = {r["host"]: r for r in timing_rows(report, ["cp", "gpu-a", "gpu-b"])}
    assert set(rows) == {"cp", "gpu-a"}
    assert (rows["cp"]["node_total_s"], rows["cp"]["waits_s"], rows["cp"]["overhead_s"]) == (
        260.0, 25.0, 235.0,
    )  # fmt: skip
    assert (rows["gpu-a"]["waits_s"], rows["gpu-a"]["overhead_s"]) == (62.0, 88.0)


@pytest.mark.unit
def test_the_lab_prepares_one_pinned_release_per_minor_on_the_path():
    pinned = ["1.37.2", "1.36.3", "1.35.4", "1.34.4"]
    assert lab.releases_to_prepare("1.35.4", TARGET, [], pinned) == ["1.36.3", TARGET]
    assert lab.releases_to_prepare("1.37.1", TARGET, [], pinned) == [TARGET]
    # --via picks the release of its minor; it must be pinned too (the lab builds only those)
    with pytest.raises(lab.PrepareError, match=r"1\.36\.9 not pinned"):
        lab.releases_to_prepare("1.35.4", TARGET, ["1.36.9"], pinned)
    with pytest.raises(lab.PrepareError, match=r"1\.37\.9 not pinned .*use one of 1\.37\.2"):
        lab.releases_to_prepare("1.36.3", "1.37.9", [], pinned)
    with pytest.raises(lab.PrepareError, match=r"no release of minor 1\.33"):
        lab.releases_to_prepare("1.32.1", "1.34.4", [], pinned)
    # nothing is built for an inventory that is not the lab's
    assert lab.lab_upgrade_vars(["1.36.3"], [TARGET], None) == {}


@pytest.mark.unit
def test_timings_of_this_run_only_leave_out_nodes_skipped_or_updated_before():
    report = {"nodes": {
        "a": {"state": "upgraded", "updated": "2026-01-01T10:00:05Z", "timings_s": {"drain_s": 1}},
        "b": {"state": "skipped", "updated": "2026-01-01T10:00:05Z", "timings_s": {"drain_s": 2}},
        "c": {"state": "failed", "updated": "2026-01-01T09:59:59Z", "timings_s": {"drain_s": 3}},
    }}  # fmt: skip
    since = "2026-01-01T10:00:00Z"
    assert [r["host"] for r in timing_rows(report, ["a", "b", "c"], since)] == ["a"]
    assert [r["host"] for r in timing_rows(report, ["a", "b", "c"])] == ["a", "b", "c"]


@pytest.mark.unit
def test_prepare_records_the_repository_and_keeps_the_images_prepared_before(monkeypatch):
    built = []

    def build(running, steps, var, log):
        built.append((running, steps))
        return {v: {"upgrade_local_repo_dir": "/cache/pkgs", "upgrade_local_repo_remote_src": True,
                    "upgrade_image_archives": [{"ref": f"kube-apiserver:v{v}", "path": v}]}
                for v in steps}  # fmt: skip

    monkeypatch.setattr(lab, "lab_upgrade_vars", build)
    before = {
        "kubeadm_kubernetes_version": "1.35.4",
        "lab_upgrade_image_archives": {"1.36.3": [{"ref": "old", "path": "old"}]},
    }
    out = lab.prepare_upgrade(before, TARGET, [], ["1.35.4", "1.36.3", TARGET])
    # the nodes run 1.36.3 (prepared before): one step, packages of both for the conversion
    assert built == [(["1.35.4", "1.36.3"], [TARGET])]
    assert out == {
        "lab_upgrade_repo_dir": "/cache/pkgs",
        "lab_upgrade_repo_remote_src": True,
        "lab_upgrade_image_archives": {
            "1.36.3": [{"ref": "old", "path": "old"}],
            TARGET: [{"ref": f"kube-apiserver:v{TARGET}", "path": TARGET}],
        },
    }
