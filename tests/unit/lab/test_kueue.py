"""The lab's Kueue image and manifests (gpufleet/lab/kueue.py)."""

from __future__ import annotations

import json
import tarfile
from pathlib import Path

import pytest

from gpufleet.lab import images
from gpufleet.lab import kueue as lab_kueue

pytestmark = pytest.mark.unit


def test_image_runs_the_manager_as_non_root(tmp_path: Path) -> None:
    manager = tmp_path / "kueue"
    manager.write_bytes(b"\x7fELF stand-in bytes")
    spec = lab_kueue.image_spec("0.17.0", manager)
    assert spec.ref == "registry.k8s.io/kueue/kueue:v0.17.0"
    archive = images.build_archive(spec, tmp_path / "image.tar")
    with tarfile.open(archive) as tar:
        manifest = json.load(tar.extractfile("manifest.json"))
        config = json.load(tar.extractfile(manifest[0]["Config"]))
        layer = tar.extractfile(manifest[0]["Layers"][0])
        with tarfile.open(fileobj=layer) as files:
            assert files.getnames() == ["manager"]
            assert files.extractfile("manager").read() == manager.read_bytes()
    assert manifest[0]["RepoTags"] == ["registry.k8s.io/kueue/kueue:v0.17.0"]
    # Kueue's Deployment sets runAsNonRoot: the image must name a numeric non-root user
    assert config["config"]["User"] == "65532:65532"
    assert config["config"]["Entrypoint"] == ["/manager"]


def test_the_user_changes_no_other_image_digest(tmp_path: Path) -> None:
    f = images.ImageFile(path="pause", source=Path(__file__))
    plain = images.ImageSpec(ref="r:1", files=(f,))
    assert plain.digest() == images.ImageSpec(ref="r:1", files=(f,), user="").digest()
    assert plain.digest() != images.ImageSpec(ref="r:1", files=(f,), user="65532").digest()
