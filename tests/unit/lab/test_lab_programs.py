"""``python -m gpufleet.lab.images programs``: the lab's own Go programs (gpufleet/lab/images.py),
which the test command builds with the lab-tests profile, so that the lab tests started
beside the rest of the build find them."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from gpufleet.build import binaries
from gpufleet.lab import images

pytestmark = pytest.mark.unit


def test_programs_builds_pause_and_cdiprobe_and_prints_only_their_paths(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    asked: list[tuple[str, Path]] = []

    def build_local_program(name: str, source: Path) -> Path:
        print(f"building {name}")  # progress: must not reach stdout
        asked.append((name, source))
        return tmp_path / name

    monkeypatch.setattr(binaries, "build_local_program", build_local_program)
    assert images.main(["programs"]) == 0
    out = capsys.readouterr()
    assert out.out.splitlines() == [str(tmp_path / "pause"), str(tmp_path / "cdiprobe")]
    assert "building pause" in out.err
    go = binaries.REPO_ROOT / "lab" / "go"
    assert asked == [("pause", go / "pause"), ("cdiprobe", go / "cdiprobe")]
    assert all((source / "main.go").is_file() for _name, source in asked), asked


def test_an_unknown_command_is_refused(capsys: Any) -> None:
    with pytest.raises(SystemExit) as err:
        images.main(["nonsense"])
    assert err.value.code == 2
    assert "programs" in capsys.readouterr().err
