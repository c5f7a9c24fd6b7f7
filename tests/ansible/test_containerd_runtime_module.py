"""The containerd_runtime_config module run by ansible-playbook on files of a temporary
directory: the drop-in it creates (mode, content read back by the TOML parser), the
backups it makes of what it changes, and check mode writing nothing."""

from __future__ import annotations

import stat
import tomllib
from pathlib import Path

import pytest

from tests.ansible.test_config_gate_modules import play

pytestmark = pytest.mark.ansible

MAIN = 'version = 2\n\n[plugins."io.containerd.grpc.v1.cri"]\n  sandbox_image = "pause:3.10"\n'


def _task(tmp_path: Path, **extra) -> dict:
    return {
        "name": "containerd drop-in",
        "gpufleet.cluster.containerd_runtime_config": {
            "config": str(tmp_path / "etc" / "config.toml"),
            "dropin": str(tmp_path / "etc" / "conf.d" / "99-nvidia.toml"),
            "containerd_version": "1.7.27",
            **extra,
        },
    }


def test_first_run_writes_the_dropin_and_backs_up_the_main_file(tmp_path: Path) -> None:
    etc = tmp_path / "etc"
    etc.mkdir()
    (etc / "config.toml").write_text(MAIN)
    first, second = play(tmp_path, "dropin", [_task(tmp_path), _task(tmp_path)])
    dropin = etc / "conf.d" / "99-nvidia.toml"
    assert first["changed"] is True and not first["_failed"]
    assert stat.S_IMODE(dropin.stat().st_mode) == 0o644
    runtimes = tomllib.loads(dropin.read_text())["plugins"]["io.containerd.grpc.v1.cri"][
        "containerd"
    ]["runtimes"]
    assert runtimes["nvidia"]["options"]["BinaryName"] == "/usr/bin/nvidia-container-runtime"
    # the main file gained the import of conf.d; its backup holds it as it was
    backups = [Path(p) for p in first["backup_files"]]
    assert [b.read_text() for b in backups] == [MAIN]
    assert "imports" in tomllib.loads((etc / "config.toml").read_text())
    assert second["changed"] is False and "backup_files" not in second


def test_check_mode_reports_the_diff_and_writes_nothing(tmp_path: Path) -> None:
    etc = tmp_path / "etc"
    etc.mkdir()
    (etc / "config.toml").write_text(MAIN)
    (result,) = play(tmp_path, "dropin-check", [_task(tmp_path)], check=True)
    assert result["changed"] is True
    assert [d["after_header"] for d in result["diff"]] == [
        str(etc / "config.toml"),
        str(etc / "conf.d" / "99-nvidia.toml"),
    ]
    assert result["diff"][1]["before"] == ""
    assert not (etc / "conf.d").exists()
    assert (etc / "config.toml").read_text() == MAIN
    assert sorted(p.name for p in etc.iterdir()) == ["config.toml"]
