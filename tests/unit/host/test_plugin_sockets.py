"""Kubelet plugin sockets of DRA drivers (``plugins/module_utils/host/plugin_sockets.py``):
which socket files are a driver's, and the one deadline over the probes. Socket files are
made with mknod (nothing bound); the probe is a stand-in (real sockets:
tests/integration/test_kubelet_plugin_sockets.py)."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest
from ansible_collections.gpufleet.cluster.plugins.module_utils.host import plugin_sockets as ps

pytestmark = pytest.mark.unit


def sock(path: Path) -> str:
    path.parent.mkdir(parents=True, exist_ok=True)
    os.mknod(path, stat.S_IFSOCK | 0o600)
    return str(path)


def layout(tmp_path: Path) -> tuple[Path, Path]:
    reg, plugins = tmp_path / "plugins_registry", tmp_path / "plugins"
    sock(reg / "gpu.nvidia.com-reg.sock")
    sock(reg / "gpu.nvidia.com-0f1e2d3c-reg.sock")
    sock(reg / "compute-domain.nvidia.com-reg.sock")
    sock(reg / "other.example.com-reg.sock")
    (reg / "gpu.nvidia.com-notes.txt").write_text("not a socket")
    sock(plugins / "gpu.nvidia.com" / "dra.sock")
    (plugins / "gpu.nvidia.com" / "checkpoint.json").write_text("{}")
    return reg, plugins


def test_a_drivers_registration_and_service_sockets_are_found(tmp_path: Path, monkeypatch) -> None:
    reg, plugins = layout(tmp_path)
    monkeypatch.setattr(ps, "probe", lambda path, timeout: path.endswith("dra.sock"))
    out = ps.read_sockets(["gpu.nvidia.com", "compute-domain.nvidia.com"], str(reg), str(plugins))
    assert out["read"] is True and out["truncated"] is False
    assert [(s["driver"], Path(s["path"]).name, s["listening"]) for s in out["sockets"]] == [
        ("gpu.nvidia.com", "gpu.nvidia.com-0f1e2d3c-reg.sock", False),
        ("gpu.nvidia.com", "gpu.nvidia.com-reg.sock", False),
        ("gpu.nvidia.com", "dra.sock", True),
        ("compute-domain.nvidia.com", "compute-domain.nvidia.com-reg.sock", False),
    ]


@pytest.mark.parametrize("driver", ["../gpu.nvidia.com", ".", "", "a/b"])
def test_a_driver_name_that_is_a_path_reads_nothing(tmp_path: Path, driver: str) -> None:
    reg, plugins = layout(tmp_path)
    assert ps.read_sockets([driver], str(reg), str(plugins))["sockets"] == []


def test_missing_directories_read_as_no_socket(tmp_path: Path) -> None:
    out = ps.read_sockets(["gpu.nvidia.com"], str(tmp_path / "a"), str(tmp_path / "b"))
    assert out == {"read": True, "sockets": [], "truncated": False}


def test_probes_past_the_deadline_are_not_told(tmp_path: Path, monkeypatch) -> None:
    reg, plugins = layout(tmp_path)
    calls = []
    monkeypatch.setattr(ps, "probe", lambda path, timeout: calls.append(timeout) or False)
    out = ps.read_sockets(["gpu.nvidia.com"], str(reg), str(plugins), deadline_s=0)
    assert calls == []
    assert [s["listening"] for s in out["sockets"]] == [None, None, None]


def test_at_most_max_sockets_are_probed(tmp_path: Path, monkeypatch) -> None:
    reg = tmp_path / "reg"
    for i in range(ps.MAX_SOCKETS + 3):
        sock(reg / f"gpu.nvidia.com-{i:03d}-reg.sock")
    monkeypatch.setattr(ps, "probe", lambda path, timeout: False)
    out = ps.read_sockets(["gpu.nvidia.com"], str(reg), str(tmp_path / "none"))
    assert len(out["sockets"]) == ps.MAX_SOCKETS and out["truncated"] is True
