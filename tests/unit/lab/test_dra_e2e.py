"""The lab's DRA e2e images: which images the suite's table asks for and symbolic links in
image layers (the report summary is tested with plugins/module_utils/validate/conformance.py,
the suite's arguments with gpufleet/build/dra_e2e.py)."""

from __future__ import annotations

import tarfile
from pathlib import Path

import pytest

from gpufleet.lab import e2e_images, images

pytestmark = pytest.mark.unit

# `dra-e2e.test --list-images` of 1.37.2, the lines these rules look at (and one other)
LISTED_1_37_2 = [
    "registry.k8s.io/e2e-test-images/busybox:1.37.0-2",
    "registry.k8s.io/pause:3.10.2",
    "registry.k8s.io/sig-storage/hostpathplugin:v1.17.1",
    "registry.k8s.io/e2e-test-images/busybox:1.36.1-1",
    "registry.k8s.io/e2e-test-images/agnhost:2.66.1",
]


def test_classify_names_every_busybox_the_highest_hostpathplugin_and_pause():
    suite = e2e_images.classify(LISTED_1_37_2)
    assert suite.busybox == (
        "registry.k8s.io/e2e-test-images/busybox:1.37.0-2",
        "registry.k8s.io/e2e-test-images/busybox:1.36.1-1",
    )
    assert suite.hostpath == "registry.k8s.io/sig-storage/hostpathplugin:v1.17.1"
    assert suite.pause == ("registry.k8s.io/pause:3.10.2",)
    assert suite.others == ("registry.k8s.io/e2e-test-images/agnhost:2.66.1",)


def test_classify_picks_the_highest_hostpathplugin_as_deploy_go_does():
    listed = [*LISTED_1_37_2, "registry.k8s.io/sig-storage/hostpathplugin:v1.9.0"]
    assert e2e_images.classify(listed).hostpath.endswith(":v1.17.1")
    assert "registry.k8s.io/sig-storage/hostpathplugin:v1.9.0" in e2e_images.classify(listed).others


def test_classify_refuses_a_list_without_the_proxy_image():
    with pytest.raises(e2e_images.E2EImageError, match="hostpathplugin"):
        e2e_images.classify(["registry.k8s.io/e2e-test-images/busybox:1.37.0-2"])


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
