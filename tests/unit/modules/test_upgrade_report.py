"""The upgrade report module's merge (plugins/modules/upgrade_report.py)."""

from __future__ import annotations

import pytest
from ansible_collections.gpufleet.cluster.plugins.modules import upgrade_report as ur

pytestmark = pytest.mark.unit


def params(**kw):
    base = {"target": "1.37.2", "host": "gpu-1", "node": "lab-gpu-1", "state": "in-progress",
            "phase": "prepare", "cause": "", "cordoned": None, "cordoned_by_upgrade": None,
            "timings": {}}  # fmt: skip
    base.update(kw)
    return base


def test_failed_node_keeps_phase_cause_and_cordon_then_a_rerun_overwrites_it():
    report: dict = {}
    ur.merge(report, params(), "t0")
    ur.merge(report, params(state="failed", phase="drain", cause="PDB", cordoned=False,
                            timings={"drain_s": 61.04}), "t1")  # fmt: skip
    entry = report["nodes"]["gpu-1"]
    assert (entry["state"], entry["phase"], entry["cause"], entry["cordoned"]) == (
        "failed", "drain", "PDB", False,
    )  # fmt: skip
    assert entry["timings_s"] == {"drain_s": 61.0}
    assert entry["version"] is None
    ur.merge(report, params(state="upgraded", phase="done", cordoned=False,
                            timings={"node_total_s": 90}), "t2")  # fmt: skip
    entry = report["nodes"]["gpu-1"]
    assert entry["cause"] == "" and entry["version"] == "1.37.2"
    assert entry["timings_s"] == {"drain_s": 61.0, "node_total_s": 90.0}
    assert [e["state"] for e in report["events"]] == ["in-progress", "failed", "upgraded"]


def test_new_target_keeps_the_previous_one():
    report = {"target": "1.36.3", "nodes": {}}
    ur.merge(report, params(), "t")
    assert report["target"] == "1.37.2" and report["previous_target"] == "1.36.3"


def test_cordoned_by_upgrade_is_kept_until_given_and_false_for_a_new_entry():
    report: dict = {}
    entry = ur.merge(report, params(), "t0")
    assert entry["cordoned_by_upgrade"] is False
    ur.merge(report, params(state="failed", phase="kubelet-restart", cordoned=True,
                            cordoned_by_upgrade=True), "t1")  # fmt: skip
    entry = ur.merge(report, params(state="in-progress", phase="connect"), "t2")
    assert entry["cordoned_by_upgrade"] is True and entry["cordoned"] is True
    entry = ur.merge(report, params(state="upgraded", phase="done", cordoned=False,
                                    cordoned_by_upgrade=False), "t3")  # fmt: skip
    assert (entry["cordoned"], entry["cordoned_by_upgrade"]) == (False, False)


def test_a_new_attempt_starts_its_timings_afresh():
    report: dict = {}
    ur.merge(report, params(state="failed", phase="kubelet-restart",
                            timings={"drain_s": 12, "restart_to_failure_s": 11}), "t0")  # fmt: skip
    ur.merge(report, params(state="in-progress", phase="connect"), "t1")
    entry = ur.merge(report, params(state="upgraded", phase="done", timings={"drain_s": 9}), "t2")
    assert entry["timings_s"] == {"drain_s": 9.0}
