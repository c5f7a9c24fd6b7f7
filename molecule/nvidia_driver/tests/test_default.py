"""State of the nvidia_driver scenario's hosts after converge and idempotence.

drv1 (install mode, package step off) holds the CUDA repository of its mirror exactly as
the plan renders it for Debian 12 on x86_64 (key file, one ``deb [signed-by=...]`` line
that apt parses), nouveau blacklisted, and no NVIDIA package. drv2 (preinstalled mode)
passed verification against the GPU simulator and was left unchanged.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.molecule

testinfra_hosts = ["podman://drv1", "podman://drv2"]

KEY = (Path(__file__).resolve().parents[1] / "files" / "test-repository-key.asc").read_text()
MIRROR = "http://cuda-mirror.gpufleet.invalid/compute/cuda/repos/debian12/x86_64/"
SOURCE = "/etc/apt/sources.list.d/cuda-debian12-x86_64.list"
KEYRING = "/etc/apt/keyrings/cuda-archive-keyring.asc"
BLACKLIST = "/etc/modprobe.d/blacklist-nouveau.conf"


def _name(host: Any) -> str:
    return host.backend.get_hostname()


@pytest.fixture
def drv1(host: Any) -> Any:
    if _name(host) != "drv1":
        pytest.skip("install-mode checks")
    return host


@pytest.fixture
def drv2(host: Any) -> Any:
    if _name(host) != "drv2":
        pytest.skip("preinstalled-mode checks")
    return host


def test_repository_key_is_the_given_one(drv1: Any) -> None:
    f = drv1.file(KEYRING)
    assert f.is_file and f.mode == 0o644 and f.user == "root"
    assert f.content_string == KEY


def test_repository_source_line(drv1: Any) -> None:
    assert drv1.file(SOURCE).content_string == f"deb [signed-by={KEYRING}] {MIRROR} /\n"


def test_apt_reads_the_repository(drv1: Any) -> None:
    # apt parses every source (signed-by key included) and prints the index files it
    # would fetch, without fetching them
    out = drv1.run("apt-get update --print-uris")
    assert out.rc == 0, out.stderr
    assert out.stderr == ""
    assert f"'{MIRROR}InRelease'" in out.stdout


def test_nouveau_blacklisted(drv1: Any) -> None:
    lines = [
        ln for ln in drv1.file(BLACKLIST).content_string.splitlines() if not ln.startswith("#")
    ]
    assert lines == ["blacklist nouveau", "options nouveau modeset=0"]


def test_no_driver_package_installed(drv1: Any) -> None:
    out = drv1.check_output("dpkg-query -W -f '${Package}\\n'")
    assert not [p for p in out.split() if p.startswith(("nvidia", "cuda-drivers", "libnvidia"))]


def test_preinstalled_mode_changed_nothing(drv2: Any) -> None:
    for path in (SOURCE, KEYRING, BLACKLIST):
        assert not drv2.file(path).exists, path


def test_simulated_driver_is_the_pinned_one(drv2: Any) -> None:
    assert drv2.check_output(
        "nvidia-smi --query-gpu=driver_version --format=csv,noheader"
    ).split() == [
        "580.159.04",
        "580.159.04",
    ]
