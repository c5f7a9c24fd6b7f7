"""The lab's DRA e2e images: symbolic links in image layers (which images the suite's table
asks for and the suite's arguments are tested with gpufleet/build/dra_e2e.py, the report
summary with plugins/module_utils/validate/conformance.py)."""

from __future__ import annotations

import tarfile
from pathlib import Path

import pytest

from gpufleet.lab import images

pytestmark = pytest.mark.unit


def test_a_symlink_in_a_layer_points_at_its_target(tmp_path: Path):
    out = tmp_path / "layer.tar"
    images.write_layer(
        [
            images.ImageFile(path="bin/busybox", data=b"\x7fELF"),
            images.ImageFile(path="bin/sh", symlink="busybox"),
        ],
        out,
    )
    with tarfile.open(out) as layer:
        sh = layer.getmember("bin/sh")
        assert sh.issym() and sh.linkname == "busybox"
        assert layer.getmember("bin/busybox").isfile()


def test_a_symlink_changes_the_file_digest_and_a_plain_file_keeps_it():
    plain = images.ImageFile(path="bin/sh", data=b"x")
    assert plain.digest() == images.ImageFile(path="bin/sh", data=b"x", symlink=None).digest()
    assert images.ImageFile(path="bin/sh", symlink="busybox").digest() != plain.digest()
