"""State of the nvidia_driver scenario's hosts after converge and idempotence.

drv1 (install mode, package step off) holds the CUDA repository of its mirror exactly as
the plan renders it for Debian 12 on x86_64 (key file, one ``deb [signed-by=...]`` line
that apt parses), nouveau blacklisted, no NVIDIA package, and the role planned the
package NVIDIA's CUDA repository names for branch 580 with open kernel modules. drv2
(preinstalled mode) was left unchanged; the role read both simulated H200s on the PCI bus
as Hopper GPUs and through nvidia-smi, and refused a pin other than the loaded release.

What the role set (its plan, what its verification read) is kept on each node by
converge.yml as the role returned it; every expected value here is written by hand.
"""

from __future__ import annotations

import json
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
KEPT = "/var/lib/gpufleet-molecule"


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


def _kept(host: Any, name: str) -> str:
    f = host.file(f"{KEPT}/{name}")
    assert f.is_file, f"{KEPT}/{name} is missing on {_name(host)}: converge did not keep it"
    return f.content_string


def test_plan_names_the_branch_package(drv1: Any) -> None:
    plan = json.loads(_kept(drv1, "nvidia_driver_plan.json"))
    assert plan["version"] == "580.159.04"
    assert plan["branch"] == 580
    assert plan["distro"] == {
        "name": "Debian",
        "version": "12",
        "family": "apt",
        "repo_name": "debian12",
    }
    # branch 580 takes the open kernel modules (NVIDIA's default from branch 560); in the
    # CUDA apt repositories before branch 590 a branch is pinned by its suffixed
    # meta-package (nvidia-open-580), at the exact release
    assert plan["kernel_modules"] == "open"
    assert plan["packages"] == ["nvidia-open-580=580.159.04-*"]


def test_role_read_the_simulated_gpus(drv2: Any) -> None:
    seen = json.loads(_kept(drv2, "nvidia_driver_verified.json"))
    # 0x2335 is the H200's PCI device ID, a Hopper GPU; class 0x030200 a 3D controller
    assert [(g["device_id"], g["pci_class"], g["architecture"]) for g in seen["pci_gpus"]] == [
        ("0x2335", "0x030200", "Hopper"),
        ("0x2335", "0x030200", "Hopper"),
    ]
    assert seen["architectures"] == ["Hopper"]
    assert seen["smi_present"] is True
    assert [(g["index"], g["name"]) for g in seen["smi_gpus"]] == [
        (0, "NVIDIA H200"),
        (1, "NVIDIA H200"),
    ]
    assert all(g["uuid"].startswith("GPU-") for g in seen["smi_gpus"])
    # a container has no /proc/driver/nvidia/version and the simulator no nouveau module
    assert seen["loaded_version"] is None
    assert seen["nouveau_loaded"] is False


def test_role_refuses_another_release_than_the_pinned_one(drv2: Any) -> None:
    assert " ".join(_kept(drv2, "refusal.txt").split()) == (
        "drv2: nvidia-smi reports driver 580.159.04, nvidia_driver_version is 580.95.05"
    )
