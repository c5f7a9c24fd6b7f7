"""lab/go/cdiprobe, the probe the toolkit scenario runs in containers, and its image.

The scenario's verify compares the probe's lines with what the runtime and CDI should
have injected, so the probe itself must report exactly what a process was given.
"""

from __future__ import annotations

import json
import os
import subprocess
import tarfile
from pathlib import Path

import pytest

from gpufleet.build import binaries
from gpufleet.lab import images

pytestmark = pytest.mark.integration


def _probe() -> Path:
    return images.cdiprobe_binary()


def test_probe_reports_variables_and_links(tmp_path: Path) -> None:
    (tmp_path / "link").symlink_to("/dev/nvidia7")
    env = {"PATH": os.environ["PATH"], "NVIDIA_VISIBLE_DEVICES": "void", "GPUFLEET_PROBE_GPU": "x"}
    env["OTHER"] = "not reported"
    out = subprocess.run(
        [str(_probe()), str(tmp_path / "link"), str(tmp_path / "absent")],
        env=env,
        capture_output=True,
        text=True,
        check=True,
        timeout=30,
    ).stdout.splitlines()
    devices = [line for line in out if line.startswith("device ")]
    assert [line for line in out if not line.startswith("device ")] == [
        "env GPUFLEET_PROBE_GPU=x",
        "env NVIDIA_VISIBLE_DEVICES=void",
        f"link {tmp_path / 'link'} -> /dev/nvidia7",
        f"missing {tmp_path / 'absent'}",
    ]
    # this machine's own NVIDIA nodes, if it has any, with their real numbers
    for line in devices:
        _, path, kind, numbers = line.split()
        st = os.lstat(path)
        assert (kind, numbers) == ("c", f"{os.major(st.st_rdev)}:{os.minor(st.st_rdev)}")


def test_probe_image_archive_runs_the_probe(tmp_path: Path) -> None:
    archive = Path(
        subprocess.run(
            [
                "python",
                "-m",
                "gpufleet.lab.images",
                "archive",
                "cdiprobe",
                "localhost/gpufleet/cdiprobe:test",
            ],
            capture_output=True,
            text=True,
            check=True,
            timeout=300,
            cwd=binaries.REPO_ROOT,
        ).stdout.strip()
    )
    with tarfile.open(archive) as tar:
        manifest = json.load(tar.extractfile("manifest.json"))
        assert manifest[0]["RepoTags"] == ["localhost/gpufleet/cdiprobe:test"]
        config = json.load(tar.extractfile(manifest[0]["Config"]))
        with tarfile.open(fileobj=tar.extractfile(manifest[0]["Layers"][0])) as layer:
            assert "usr/local/bin/cdiprobe" in layer.getnames()
    assert config["config"]["Entrypoint"] == ["/usr/local/bin/cdiprobe"]
    assert archive == images.archive_path(images.cdiprobe_image("localhost/gpufleet/cdiprobe:test"))
