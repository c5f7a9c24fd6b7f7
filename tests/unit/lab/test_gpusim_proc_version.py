"""The simulator's stand-in for /proc/driver/nvidia/version: written beside the state
file, read by the project's own parser as the driver release of the state."""

from __future__ import annotations

from pathlib import Path

import pytest
from ansible_collections.gpufleet.cluster.plugins.module_utils.nvidia.driver import (
    parse_proc_version,
)

from gpufleet.lab.gpusim import admin, state

pytestmark = pytest.mark.unit

REAL = Path(__file__).resolve().parents[1] / "data" / "gpu" / "h200-device"


def test_init_and_set_write_the_driver_release(tmp_path: Path) -> None:
    path = tmp_path / "state.json"
    version = tmp_path / "proc" / "driver" / "nvidia" / "version"
    assert admin.main(["--state", str(path), "init", "--count", "2"]) == 0
    assert parse_proc_version(version.read_text()) == ("580.159.04", "open")
    assert admin.main(["--state", str(path), "set", "--driver-version", "580.95.05"]) == 0
    assert parse_proc_version(version.read_text()) == ("580.95.05", "open")


def test_layout_of_the_real_file_and_named_as_the_simulator() -> None:
    real = (REAL / "proc-driver-nvidia-version.txt").read_text().splitlines()
    sim = state.proc_version_text("580.159.04").splitlines()
    # the real file: NVRM line, GCC line; the release at the same place
    assert [line.split(":")[0] for line in sim] == [line.split(":")[0] for line in real]
    assert sim[0].split("Release Build")[0] == real[0].split("Release Build")[0]
    assert all(state.SIMULATOR in line for line in sim)
    assert parse_proc_version("\n".join(real)) == parse_proc_version("\n".join(sim))
