"""The upgrade reports a lab clean-up removes (``cluster.upgrade_reports``, used by ``lab
down`` and by ``lab up`` of a new lab) when the lab directory holds things of a report's
name that are not plain files: a directory, a symbolic link to a file or a directory
outside the lab, a dangling link. A link is removed, never what it points to; a directory
is left alone; nothing raises."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpufleet.lab import cluster

pytestmark = pytest.mark.unit

#: The real functions: the hostile conftest replaces ``cluster.down`` with a tripwire.
REAL_DOWN = cluster.down


@pytest.fixture
def lab(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, Path]:
    monkeypatch.setenv("GPUFLEET_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("GPUFLEET_LAB_NAME", "gpufleet-hostile-reports")
    lab_dir = cluster.lab_dir()
    lab_dir.mkdir(parents=True)
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "precious.json").write_text('{"keep": true}')
    (outside / "precious-dir").mkdir()
    (outside / "precious-dir" / "x").write_text("x")
    (lab_dir / "upgrade-report-x.json").mkdir()
    (lab_dir / "upgrade-report-x.json" / "inside").write_text("kept")
    (lab_dir / "upgrade-report.json").symlink_to(outside / "precious.json")
    (lab_dir / "upgrade-report-dir.json").symlink_to(outside / "precious-dir")
    (lab_dir / "upgrade-report-gpu-stack.json").symlink_to(outside / "missing.json")
    (lab_dir / "upgrade-report-gpu-stack.json.lock").write_text("")
    (lab_dir / "upgrade-report-odd\n.json").write_text("{}")
    return {"lab": lab_dir, "outside": outside}


def test_reports_list_links_and_files_not_directories(lab: dict[str, Path]) -> None:
    names = [p.name for p in cluster.upgrade_reports()]
    assert sorted(names) == sorted(
        [
            "upgrade-report.json",
            "upgrade-report-dir.json",
            "upgrade-report-gpu-stack.json",
            "upgrade-report-gpu-stack.json.lock",
            "upgrade-report-odd\n.json",
        ]
    )


def test_down_removes_the_links_and_keeps_what_they_point_to(
    lab: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(cluster, "_lab_containers", lambda: [])
    monkeypatch.setattr(cluster, "_network_exists", lambda: False)
    left = REAL_DOWN(log=lambda _line: None)
    assert not any(left.values()), left
    remaining = sorted(p.name for p in lab["lab"].iterdir())
    assert remaining == ["upgrade-report-x.json"]  # the directory, with its content
    assert (lab["lab"] / "upgrade-report-x.json" / "inside").read_text() == "kept"
    assert (lab["outside"] / "precious.json").read_text() == '{"keep": true}'
    assert (lab["outside"] / "precious-dir" / "x").read_text() == "x"
