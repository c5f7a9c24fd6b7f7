"""Debian packages and the pkgs.k8s.io-shaped repository (gpufleet/lab/packages.py): the
names and paths, without dpkg (tests/integration/test_lab_packages.py builds them)."""

from __future__ import annotations

import pytest

from gpufleet.lab import packages as pk


@pytest.mark.unit
def test_deb_version_is_the_pkgs_k8s_io_form():
    assert pk.deb_version("1.37.2") == "1.37.2-1.1"
    assert pk.deb_version("v1.36.3", "2.1") == "1.36.3-2.1"
    # a pre-release sorts below its release (dpkg: ~ before anything)
    assert pk.deb_version("1.38.0-beta.0") == "1.38.0~beta.0-1.1"
    assert pk.deb_version("v1.38.0-rc.1") == "1.38.0~rc.1-1.1"
    for bad in ("1.37", "1.38.0-gamma.1", "1.38.0-rc", "1.37.2+abc"):
        with pytest.raises(pk.PackageError, match=r"MAJOR\.MINOR\.PATCH"):
            pk.deb_version(bad)
    with pytest.raises(pk.PackageError, match="revision"):
        pk.deb_version("1.37.2", "")


@pytest.mark.unit
def test_repo_dir_mirrors_the_pkgs_k8s_io_path(tmp_path):
    assert pk.repo_dir(tmp_path, "1.37") == tmp_path / "core:" / "stable:" / "v1.37" / "deb"
    assert pk.sources_line("file:/var/lib/gpufleet/pkgs/v1.37/") == (
        "deb [trusted=yes] file:/var/lib/gpufleet/pkgs/v1.37/ /"
    )


@pytest.mark.unit
def test_missing_binary_names_the_release(tmp_path):
    with pytest.raises(pk.PackageError, match=r"kubeadm 1\.37\.2 is not built"):
        pk.package_specs("1.37.2", {"kubelet": tmp_path / "x"})
