"""The upgrade's per-node report file (``plugins/module_utils/upgrade/record.py``)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from ansible_collections.gpufleet.cluster.plugins.module_utils.upgrade import record as ur

pytestmark = pytest.mark.unit


def test_report_write_merges_entries_and_replaces_a_file_that_is_not_a_report(
    tmp_path: Path,
) -> None:
    path = tmp_path / "sub" / "report.json"
    base = {"target": "1.37.2", "host": "gpu-1", "node": "n1", "phase": "prepare"}
    ur.write(str(path), [{**base, "state": "in-progress", "timings": {"x_s": 1}}])
    entry = ur.write(
        str(path),
        [{**base, "state": "upgraded", "phase": "done", "cordoned": False,
          "timings": {"node_total_s": 12.345}}],
    )  # fmt: skip
    report = json.loads(path.read_text())
    assert report["nodes"]["gpu-1"] == entry
    assert (entry["state"], entry["version"], entry["cordoned"]) == ("upgraded", "1.37.2", False)
    assert entry["timings_s"] == {"x_s": 1.0, "node_total_s": 12.3}
    assert [e["state"] for e in report["events"]] == ["in-progress", "upgraded"]
    path.write_text('{"nodes": {"gpu-1": 7}, "events": "x"}')  # parts of the wrong type
    ur.write(str(path), [{**base, "state": "in-progress"}])
    report = json.loads(path.read_text())
    assert report["nodes"]["gpu-1"]["state"] == "in-progress" and len(report["events"]) == 1
    path.write_text("[1, 2]")  # JSON, not a report: started afresh
    ur.write(str(path), [{**base, "state": "failed", "cause": "drain"}])
    report = json.loads(path.read_text())
    assert list(report["nodes"]) == ["gpu-1"] and report["nodes"]["gpu-1"]["cause"] == "drain"


def test_report_write_measures_the_node_total_up_to_the_write(tmp_path: Path) -> None:
    import time

    path = tmp_path / "report.json"
    record = {"target": "1.37.2", "host": "gpu-1", "state": "upgraded", "phase": "done",
              "timings": {"drain_s": 3.0}, "started": time.time() - 12.0}  # fmt: skip
    entry = ur.write(str(path), [record])
    assert entry["timings_s"]["drain_s"] == 3.0
    assert 12.0 <= entry["timings_s"]["node_total_s"] < 14.0
    assert "started" not in entry


def test_devices_before_keeps_the_most_a_run_of_the_target_saw_until_the_node_is_there(
    tmp_path: Path,
) -> None:
    path = str(tmp_path / "report.json")
    base = {"target": "1.38.0", "host": "gpu-1", "node": "n1", "phase": "prepare"}
    ur.write(path, [{**base, "state": "in-progress"}])
    assert ur.devices_before(path, "gpu-1", "1.38.0", 8) == 8
    ur.write(path, [{**base, "state": "failed", "phase": "kubelet-restart", "cause": "x"}])
    # resumed while its kubelet plugin has not published again: the 8 it had are waited for
    ur.write(path, [{**base, "state": "in-progress"}])
    assert ur.devices_before(path, "gpu-1", "1.38.0", 0) == 8
    assert ur.devices_before(path, "gpu-1", "1.38.0", 9) == 9
    entry = json.loads(Path(path).read_text())["nodes"]["gpu-1"]
    assert entry["devices_before"] == {"target": "1.38.0", "devices": 9}
    assert entry["state"] == "in-progress"  # the entry's own fields are left as they were
    # another target counts afresh; a node at the target keeps none
    assert ur.devices_before(path, "gpu-1", "1.39.0", 2) == 2
    ur.write(path, [{**base, "target": "1.39.0", "state": "upgraded", "phase": "done"}])
    assert "devices_before" not in json.loads(Path(path).read_text())["nodes"]["gpu-1"]
    assert ur.devices_before(path, "gpu-1", "1.39.0", 0) == 0
    # a hand-edited value is not trusted beyond a count
    report = json.loads(Path(path).read_text())
    report["nodes"]["gpu-1"]["devices_before"] = {"target": "1.39.0", "devices": "many"}
    Path(path).write_text(json.dumps(report))
    assert ur.devices_before(path, "gpu-1", "1.39.0", 3) == 3
    for odd in ("Infinity", "NaN", "-5", "[1]", "true"):  # JSON as a hand may write it
        text = Path(path).read_text().replace('"devices": 3', f'"devices": {odd}')
        Path(path).write_text(text)
        assert ur.devices_before(path, "gpu-1", "1.39.0", 3) == 3, odd
    assert ur.devices_before(path, "gpu-2", "1.39.0", 1) == 1  # a host not yet in the report
