"""The GPU simulator run as processes: ``python -m gpufleet.lab.gpusim`` from the checkout,
and the wrappers ``gpufleet.lab.gpusim.install`` writes, run by a Python with the standard
library only (as on a lab node)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path, PurePosixPath

import pytest

from gpufleet.lab.gpusim import admin, install
from tests.unit.lab.test_gpusim import DATA, h200_capture

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]


def test_module_wrapper_runs_as_a_subprocess(tmp_path: Path) -> None:
    env = {**os.environ, "GPUFLEET_GPUSIM_STATE": str(tmp_path / "state.json")}
    init = subprocess.run(
        [sys.executable, "-m", "gpufleet.lab.gpusim", "admin", "init", "--count", "2",
         "--node-name", "w1"],
        env=env, capture_output=True, text=True, check=True, cwd=REPO,
    )  # fmt: skip
    assert init.stdout.startswith("created: ")
    listed = subprocess.run(
        [sys.executable, "-m", "gpufleet.lab.gpusim", "-L"],
        env=env, capture_output=True, text=True, cwd=REPO,
    )  # fmt: skip
    assert listed.returncode == 0
    uuids = [g.uuid for g in admin.build_state("NVIDIA H200", 2, "w1").gpus]
    assert listed.stdout == "".join(
        f"GPU {i}: NVIDIA H200 (UUID: {u})\n" for i, u in enumerate(uuids)
    )


def test_installed_wrapper_runs_with_the_standard_library_only(tmp_path: Path) -> None:
    root = tmp_path / "root"
    written = install.install(root)
    lib = root / "usr/local/lib/gpufleet-gpusim"
    # the collection's MIG modules under their package path, as everywhere else
    mig = lib / "ansible_collections/gpufleet/cluster/plugins/module_utils/mig"
    assert (mig / "profiles.py").is_file() and (mig / "tables.py").is_file()
    nvidia = lib / "ansible_collections/gpufleet/cluster/plugins/module_utils/nvidia"
    assert (nvidia / "driver.py").is_file()  # gpusim driver load: release numbers
    assert (lib / "gpufleet/lab/gpusim/templates/q_gpu.xml").is_file()
    assert root / "usr/bin/nvidia-smi" in written
    scripts = install.wrapper_scripts()
    assert set(scripts) == {
        PurePosixPath("/usr/bin/nvidia-smi"),
        PurePosixPath("/usr/local/bin/gpusim"),
    }
    python = "/usr/bin/python3" if Path("/usr/bin/python3").exists() else sys.executable
    env = {
        "PATH": "/usr/bin:/bin",
        "PYTHONPATH": str(lib),
        "GPUFLEET_GPUSIM_STATE": str(tmp_path / "state.json"),
    }
    gpusim = subprocess.run(
        [python, "-s", str(root / "usr/local/bin/gpusim"), "init", "--node-name", "n"],
        env=env, capture_output=True, text=True, cwd=tmp_path,
    )  # fmt: skip
    assert gpusim.returncode == 0, gpusim.stderr
    reload = subprocess.run(
        [python, "-s", str(root / "usr/local/bin/gpusim"), "driver", "load", "--version",
         "580.95.05"],
        env=env, capture_output=True, text=True, cwd=tmp_path,
    )  # fmt: skip
    assert (reload.returncode, reload.stderr) == (
        1,
        "gpusim: the loaded module is 580.159.04 (CUDA 13.0); unload it first: "
        "'gpusim driver unload'\n",
    )
    out = subprocess.run(
        [python, "-s", str(root / "usr/bin/nvidia-smi"), "mig", "-lgipp"],
        env=env, capture_output=True, text=True, cwd=tmp_path,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    assert out.stdout == h200_capture(DATA / "h200-single" / "smi-mig-lgipp.txt")[1]
