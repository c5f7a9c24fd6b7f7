"""Molecule scenarios run for real: ``molecule test -s <scenario>`` on podman hosts.

Each scenario lives in ``molecule/<scenario>/`` and boots the lab node image
(``localhost/gpufleet-node:<tag>``, built by ``lab/prepare-podman``) as privileged podman
containers with systemd. Molecule runs from the repository root with the virtualenv's
``bin`` first on PATH, so that ``ansible-playbook`` and ``pytest`` (the testinfra verifier)
are the project's and the collection resolves from the editable install.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from gpufleet.lab import podman

pytestmark = [pytest.mark.molecule, pytest.mark.slow]

REPO = Path(__file__).resolve().parents[2]
VENV_BIN = Path(sys.executable).parent
# `molecule test` of one scenario: destroy, syntax, create, prepare, converge,
# idempotence, verify, destroy (about 2 minutes on 2 cores)
SCENARIO_TIMEOUT_S = 1200


def _node_image() -> str:
    if shutil.which("podman") is None:
        pytest.skip("podman is not installed; run lab/prepare-podman as root")
    ref = podman.node_image_ref()
    if not podman.image_present(ref):
        pytest.skip(f"node image {ref} is not built; run lab/prepare-podman as root")
    return ref


@pytest.mark.parametrize(
    "scenario", ["dra_feature_gates", "nvidia_container_toolkit", "nvidia_driver"]
)
def test_molecule_scenario(scenario: str) -> None:
    image = _node_image()
    molecule = VENV_BIN / "molecule"
    assert molecule.is_file(), (
        f"{molecule} not found: install the project with `pip install -e '.[dev]'` into the "
        "virtualenv that runs pytest"
    )
    env = dict(os.environ)
    env["PATH"] = f"{VENV_BIN}{os.pathsep}{env.get('PATH', '')}"
    env["GPUFLEET_NODE_IMAGE"] = image
    env["ANSIBLE_FORCE_COLOR"] = "0"
    env["NO_COLOR"] = "1"
    start = time.monotonic()
    proc = subprocess.run(
        [str(molecule), "test", "-s", scenario],
        cwd=REPO,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        timeout=SCENARIO_TIMEOUT_S,
        check=False,
    )
    elapsed = time.monotonic() - start
    print(f"molecule test -s {scenario}: exit {proc.returncode} in {elapsed:.0f}s")
    assert proc.returncode == 0, (
        f"`molecule test -s {scenario}` exited {proc.returncode} after {elapsed:.0f}s; "
        f"last output:\n{proc.stdout[-12000:]}"
    )
