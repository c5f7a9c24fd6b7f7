"""The Python judgement of CDI specs (``nvidia.cdi_spec.library_problems``) against the CDI
library itself: ``lab/go/cdispec`` loads each spec with
``tags.cncf.io/container-device-interface`` (``cdi.ReadSpec``, the code containerd runs),
and both must agree, and match the verdict recorded in tests/unit/nvidia/cdi_variants.py,
on the real ``nvidia-ctk`` 1.20.2 specs and every hand-broken variant."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml
from ansible_collections.gpufleet.cluster.plugins.module_utils.nvidia import cdi_spec

from gpufleet.build import binaries
from tests.unit.nvidia import cdi_variants as cv

pytestmark = pytest.mark.integration

SOURCE = binaries.REPO_ROOT / "lab" / "go" / "cdispec"


@pytest.fixture(scope="module")
def probe(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """lab/go/cdispec built with the local Go; its modules (the CDI library at the version
    nvidia-container-toolkit 1.20 requires) come from the module cache or the proxy."""
    go = binaries._find_go()
    if go is None:
        pytest.skip("no Go toolchain to build lab/go/cdispec")
    work = tmp_path_factory.mktemp("cdispec")
    for name in ("main.go", "go.mod", "go.sum"):
        shutil.copy2(SOURCE / name, work / name)
    env = dict(os.environ, GOFLAGS="-mod=readonly", GOWORK="off", CGO_ENABLED="0")
    env["GOTOOLCHAIN"] = "local"
    proc = subprocess.run(
        [go, "build", "-o", str(work / "cdispec"), "."],
        cwd=work,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    return work / "cdispec"


def test_python_and_the_cdi_library_agree_on_every_spec(probe: Path, tmp_path: Path) -> None:
    paths = {}
    for name, (build, _, _) in cv.VARIANTS.items():
        path = tmp_path / f"{name}.yaml"
        path.write_text(yaml.safe_dump(build()))
        paths[str(path)] = name
    out = subprocess.run(
        [str(probe), *paths], capture_output=True, text=True, check=True, timeout=60
    ).stdout
    verdicts = {paths[v["path"]]: v["error"] for v in map(json.loads, out.splitlines())}
    assert set(verdicts) == set(cv.VARIANTS)
    for name, error in sorted(verdicts.items()):
        python = cdi_spec.library_problems(cv.VARIANTS[name][0]())
        assert (error == "") is cv.VARIANTS[name][1], (name, error)
        assert (python == []) is (error == ""), (name, error, python)


def test_the_library_message_for_empty_device_edits(probe: Path, tmp_path: Path) -> None:
    path = tmp_path / "nvidia.yaml"
    path.write_text(yaml.safe_dump(cv.VARIANTS["empty-device-edits"][0]()))
    out = subprocess.run([str(probe), str(path)], capture_output=True, text=True, check=True)
    assert "invalid device, empty device edits" in json.loads(out.stdout)["error"]
    assert cdi_spec.library_problems(cv.VARIANTS["empty-device-edits"][0]()) == [
        "device '0': invalid device, empty device edits"
    ]
