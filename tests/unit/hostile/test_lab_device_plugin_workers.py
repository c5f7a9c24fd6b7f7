"""``gpufleet lab up --device-plugin-workers N`` and the lab's inventory script on hostile
state files. The option: a count outside 0 to ``--workers`` or no whole number is refused
(exit 2 naming the option) before podman or the lab's build (the tripwires of
``conftest``); ``LabSpec.validated`` refuses a count of another type with ``LabError``, never
a TypeError. The inventory script (inventory/lab/lab_nodes.py, run as Ansible runs it): a
state of another shape, or a ``gpu_path`` that is no GPU path, ends with exit 1 and one
line saying how to fix it, never a traceback; a template is never run."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from gpufleet.lab import cluster
from tests.unit.hostile.inputs import assert_refused, invoke

pytestmark = pytest.mark.unit

REPO = Path(__file__).resolve().parents[3]
SCRIPT = REPO / "inventory" / "lab" / "lab_nodes.py"
#: subprocess.run itself: the tripwires of ``conftest`` replace it while a test runs.
RUN = subprocess.run

# ------------------------------------------------------------------ the option

#: --device-plugin-workers values refused before anything runs (with --workers 2).
REFUSED = {
    "negative": "-1",
    "above-workers": "3",
    "above-max-workers": "9",
    "huge": "1" + "0" * 100,
    "too-many-digits": "9" * 5000,
    "underscores-huge": "1_000",
    "word": "abc",
    "fraction": "1.5",
    "exponent": "1e3",
    "hex": "0x1",
    "empty": "",
    "markup": "[red]1",
    "template": "{{ 1 }}",
}
#: Values Python reads as the whole number they show: taken.
TAKEN = {
    "spaces": (" 1 ", 1),
    "plus": ("+1", 1),
    "newline": ("2\n", 2),
    "arabic-digit": ("\u0661", 1),
}


@pytest.mark.parametrize("value", REFUSED.values(), ids=REFUSED.keys())
def test_lab_up_refuses_a_device_plugin_count_before_anything_runs(
    hostile: dict[str, str], value: str
) -> None:
    result = invoke(hostile, ["lab", "up", "--workers", "2", "--device-plugin-workers", value])
    assert_refused(result, ("--device-plugin-workers",))


@pytest.mark.parametrize("case", TAKEN)
def test_lab_up_takes_a_count_python_reads_as_a_number(
    hostile: dict[str, str], monkeypatch: pytest.MonkeyPatch, case: str
) -> None:
    value, count = TAKEN[case]
    specs: list[cluster.LabSpec] = []

    def up(spec: cluster.LabSpec, **_: Any) -> Any:
        specs.append(spec)
        raise cluster.LabError("stopped here by the test")

    monkeypatch.setattr(cluster, "up", up)
    result = invoke(hostile, ["lab", "up", "--workers", "2", "--device-plugin-workers", value])
    assert "Traceback" not in result.output
    assert [s.device_plugin_workers for s in specs] == [count]


#: LabSpec fields -> what the refusal names.
SPECS: dict[str, tuple[dict[str, Any], str]] = {
    "negative": ({"device_plugin_workers": -1}, "--device-plugin-workers -1: use 0 to"),
    "above-workers": ({"workers": 1, "device_plugin_workers": 2}, "--device-plugin-workers 2"),
    "huge": ({"device_plugin_workers": 10**100}, "--device-plugin-workers 1000"),
    "float": ({"device_plugin_workers": 1.5}, "--device-plugin-workers 1.5: give a whole"),
    "bool": ({"device_plugin_workers": True}, "--device-plugin-workers True: give a whole"),
    "text": ({"device_plugin_workers": "1"}, "--device-plugin-workers '1': give a whole"),
    "none": ({"device_plugin_workers": None}, "--device-plugin-workers None: give a whole"),
    "list": ({"device_plugin_workers": [1]}, "--device-plugin-workers [1]: give a whole"),
    "long-text": ({"device_plugin_workers": "x" * 10_000}, "(10000 characters)"),
    "float-workers": ({"workers": 2.0}, "--workers 2.0: give a whole number"),
    "float-gpus": ({"gpus_per_node": 1.0}, "--gpus-per-node 1.0: give a whole number"),
}


@pytest.mark.parametrize("case", SPECS)
def test_the_spec_refuses_a_count_of_another_type_or_range(case: str) -> None:
    fields, named = SPECS[case]
    with pytest.raises(cluster.LabError) as err:
        cluster.LabSpec(**fields).validated()
    assert named in str(err.value) and len(str(err.value)) < 300, str(err.value)


@pytest.mark.parametrize("count", [0, 1, 2])
def test_the_spec_takes_zero_to_the_workers(count: int) -> None:
    assert cluster.LabSpec(workers=2, device_plugin_workers=count).validated().workers == 2


# ------------------------------------------------------------------ the inventory script

CONTROL_PLANE = {"name": "l-control-plane", "role": "control-plane", "ip": "10.0.0.10"}


def _worker(**over: Any) -> dict[str, Any]:
    return {"name": "l-gpu-1", "role": "gpu-worker", "ip": "10.0.0.11", **over}


def _run(tmp_path: Path, state: Any) -> subprocess.CompletedProcess[str]:
    labs = tmp_path / "labs" / "l"
    labs.mkdir(parents=True, exist_ok=True)
    (labs / "state.json").write_text(json.dumps(state))
    return RUN(
        [sys.executable, str(SCRIPT), "--list"],
        env={"GPUFLEET_CACHE": str(tmp_path), "GPUFLEET_LAB_NAME": "l", "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )


def _nodes(*nodes: Any) -> dict[str, Any]:
    return {"nodes": [CONTROL_PLANE, *nodes], "vars": {}}


#: State -> what the one-line refusal says.
STATES: dict[str, tuple[Any, str]] = {
    "path-list": (_nodes(_worker(gpu_path=["dra"])), "is not a GPU path"),
    "path-mapping": (_nodes(_worker(gpu_path={"dra": 1})), "is not a GPU path"),
    "path-false": (_nodes(_worker(gpu_path=False)), "is not a GPU path"),
    "path-zero": (_nodes(_worker(gpu_path=0)), "is not a GPU path"),
    "path-template": (_nodes(_worker(gpu_path="{{ lookup('pipe','id') }}")), "is not a GPU"),
    "path-huge": (_nodes(_worker(gpu_path="d" * 100_000)), "is not a GPU path"),
    "path-case": (_nodes(_worker(gpu_path="DRA")), "is not a GPU path"),
    "no-role": (_nodes({"name": "l-gpu-1", "ip": "10.0.0.11"}), "not what `gpufleet lab up`"),
    "no-ip": (_nodes({"name": "l-gpu-1", "role": "gpu-worker"}), "not what `gpufleet lab up`"),
    "no-name": (_nodes({"role": "gpu-worker", "ip": "10.0.0.11"}), "not a Kubernetes node"),
    "role-a-list": (_nodes(_worker(role=["gpu-worker"])), "not what `gpufleet lab up`"),
    "ip-a-number": (_nodes(_worker(ip=10)), "not what `gpufleet lab up`"),
    "node-text": (_nodes("l-gpu-1"), "not what `gpufleet lab up`"),
    "node-null": (_nodes(None), "not what `gpufleet lab up`"),
    "no-nodes": ({"vars": {}}, "not what `gpufleet lab up`"),
    "nodes-mapping": ({"nodes": {"l-gpu-1": {}}, "vars": {}}, "not what `gpufleet lab up`"),
    "nodes-null": ({"nodes": None}, "not what `gpufleet lab up`"),
    "state-list": ([CONTROL_PLANE], "not what `gpufleet lab up`"),
    "state-text": ("nodes", "not what `gpufleet lab up`"),
    "vars-list": ({"nodes": [CONTROL_PLANE], "vars": [1]}, "not what `gpufleet lab up`"),
    "vars-null": ({"nodes": [CONTROL_PLANE], "vars": None}, "not what `gpufleet lab up`"),
    "name-template": (_nodes(_worker(name="{{ lookup('pipe','id') }}")), "not a Kubernetes"),
}


@pytest.mark.parametrize("case", STATES)
def test_a_hostile_lab_state_is_refused_in_one_line(tmp_path: Path, case: str) -> None:
    state, said = STATES[case]
    proc = _run(tmp_path, state)
    assert proc.returncode == 1, proc.stdout[:500]
    assert "Traceback" not in proc.stderr, proc.stderr
    assert said in proc.stderr and "gpufleet lab down" in proc.stderr, proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1 and len(proc.stderr) < 600
    assert proc.stdout == ""


@pytest.mark.parametrize("path", [None, "", "dra", "device-plugin"])
def test_a_gpu_path_the_lab_writes_is_read(tmp_path: Path, path: str | None) -> None:
    proc = _run(tmp_path, _nodes(_worker(gpu_path=path)))
    assert proc.returncode == 0, proc.stderr
    inv = json.loads(proc.stdout)
    assert inv["gpu_nodes"]["hosts"] == ["l-gpu-1"]
    assert ("lab_pool_2" in inv) is (path == "device-plugin")


def test_a_template_in_the_state_is_data(tmp_path: Path) -> None:
    marker = tmp_path / "pwned"
    template = "{{ lookup('pipe', 'touch " + str(marker) + "') }}"
    proc = _run(tmp_path, _nodes(_worker(ip=template, gpu_model=template)))
    assert proc.returncode == 0, proc.stderr
    hv = json.loads(proc.stdout)["_meta"]["hostvars"]["l-gpu-1"]
    assert hv["lab_node_ip"] == {"__ansible_unsafe": template}
    assert hv["lab_node_gpu_model"] == {"__ansible_unsafe": template}
    assert not marker.exists()
