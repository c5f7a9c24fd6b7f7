"""``gpusim set --gpu N --utilization P``: the simulated GPU utilization the simulator's
DCGM-named metrics report, stored in the state file and checked on the way in and out."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gpufleet.lab.gpusim import admin, state

pytestmark = pytest.mark.unit


def init(tmp_path: Path) -> Path:
    path = tmp_path / "state.json"
    args = ["--state", str(path), "init", "--count", "2", "--node-name", "w1"]
    assert admin.main(args) == 0
    return path


def test_utilization_is_stored_per_gpu(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    path = init(tmp_path)
    assert admin.main(["--state", str(path), "set", "--gpu", "1", "--utilization", "85"]) == 0
    assert capsys.readouterr().out.endswith("changed\n")
    doc = json.loads(path.read_text())
    assert [g["utilization_percent"] for g in doc["gpus"]] == [0, 85]
    assert state.load(path).gpus[1].utilization_percent == 85
    assert admin.main(["--state", str(path), "set", "--gpu", "1", "--utilization", "85"]) == 0
    assert capsys.readouterr().out == "unchanged\n"


@pytest.mark.parametrize(
    ("args", "named"),
    [
        (["--gpu", "0", "--utilization", "101"], "--utilization 101"),
        (["--gpu", "5", "--utilization", "10"], "--gpu 5"),
        (["--utilization", "10"], "--gpu N"),
    ],
)
def test_bad_utilization_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture, args: list[str], named: str
) -> None:
    path = init(tmp_path)
    before = path.read_text()
    assert admin.main(["--state", str(path), "set", *args]) == 1
    assert named in capsys.readouterr().err
    assert path.read_text() == before


def test_state_file_with_bad_utilization_is_refused(tmp_path: Path) -> None:
    path = init(tmp_path)
    doc = json.loads(path.read_text())
    doc["gpus"][0]["utilization_percent"] = 150
    path.write_text(json.dumps(doc))
    with pytest.raises(state.StateError, match=r"gpus\[0\]\.utilization_percent = 150"):
        state.load(path)
