"""The NVIDIA driver plan: pins, distributions, repository files, packages, kernel modules."""

from __future__ import annotations

from pathlib import Path

import pytest
from ansible_collections.gpufleet.cluster.plugins.module_utils.nvidia import driver as nd

pytestmark = pytest.mark.unit

GPU_DATA = Path(__file__).resolve().parents[1] / "data" / "gpu"
NVIDIA_REPOS = "https://developer.download.nvidia.com/compute/cuda/repos"


# ----------------------------------------------------------------------------- versions


def test_release_parts_compare_numerically() -> None:
    assert nd.parse_driver_version("580.159.04").parts == (580, 159, 4)
    assert nd.parse_driver_version("570.9") < nd.parse_driver_version("570.86.15")
    assert nd.parse_driver_version("525.60.13") < nd.parse_driver_version("525.147.05")


@pytest.mark.parametrize("bad", ["580", "r580", "580.x", "5800.1.1", ""])
def test_not_a_release_names_the_variable(bad: str) -> None:
    with pytest.raises(nd.PlanError, match=r"nvidia_driver_version="):
        nd.parse_driver_version(bad)


def test_branch_below_565_refused_for_dra_with_reason() -> None:
    with pytest.raises(nd.PlanError) as err:
        nd.check_pin("550", "550.163.01", for_dra=True)
    text = str(err.value)
    assert "nvidia_driver_branch=550" in text
    assert "565" in text and "DRA" in text and "fix:" in text


def test_branch_below_565_allowed_without_dra() -> None:
    assert nd.check_pin("550", "550.163.01", for_dra=False).branch == 550


def test_release_below_floor_refused_even_without_dra() -> None:
    with pytest.raises(nd.PlanError, match=r"older than 525\.60\.13"):
        nd.check_pin("525", "525.60.11", for_dra=False)
    assert str(nd.check_pin("525", "525.60.13", for_dra=False)) == "525.60.13"


def test_release_of_another_branch_refused() -> None:
    with pytest.raises(nd.PlanError, match=r"not a release of nvidia_driver_branch=570"):
        nd.check_pin("570", "580.159.04")


# ------------------------------------------------------------------------ distributions


@pytest.mark.parametrize(
    ("name", "version", "family", "repo"),
    [
        ("Ubuntu", "22.04", "apt", "ubuntu2204"),
        ("Ubuntu", "24.04", "apt", "ubuntu2404"),
        ("Debian", "12.8", "apt", "debian12"),
        ("RedHat", "9.4", "dnf", "rhel9"),
        ("Rocky", "8.10", "dnf", "rhel8"),
    ],
)
def test_supported_distributions(name: str, version: str, family: str, repo: str) -> None:
    distro = nd.resolve_distro(name, version)
    assert (distro.family, distro.repo_name) == (family, repo)


@pytest.mark.parametrize(
    ("name", "version"), [("Ubuntu", "20.04"), ("Fedora", "40"), ("Debian", "11")]
)
def test_unsupported_distribution_names_it_and_the_list(name: str, version: str) -> None:
    with pytest.raises(nd.PlanError) as err:
        nd.resolve_distro(name, version)
    text = str(err.value)
    assert f"unsupported distribution {name} {version}" in text
    assert "Ubuntu 22.04, Ubuntu 24.04, Debian 12, RedHat 8, RedHat 9, Rocky 8, Rocky 9" in text


# ------------------------------------------------------------------ repository files


def test_apt_repository_files_ubuntu_x86() -> None:
    repo = nd.cuda_repo(nd.resolve_distro("Ubuntu", "24.04"), "x86_64", NVIDIA_REPOS)
    assert repo.url == f"{NVIDIA_REPOS}/ubuntu2404/x86_64/"
    assert repo.key_url == f"{NVIDIA_REPOS}/ubuntu2404/x86_64/3bf863cc.pub"
    assert repo.apt_source_path == "/etc/apt/sources.list.d/cuda-ubuntu2404-x86_64.list"
    assert repo.apt_source == (
        "deb [signed-by=/etc/apt/keyrings/cuda-archive-keyring.asc] "
        f"{NVIDIA_REPOS}/ubuntu2404/x86_64/ /\n"
    )
    assert repo.dnf_repo == ""


def test_apt_repository_debian_arm_from_mirror() -> None:
    repo = nd.cuda_repo(nd.resolve_distro("Debian", "12"), "aarch64", "http://mirror.example/cuda/")
    assert repo.url == "http://mirror.example/cuda/debian12/sbsa/"
    assert repo.apt_source_path == "/etc/apt/sources.list.d/cuda-debian12-sbsa.list"


def test_dnf_repository_file_rhel9() -> None:
    repo = nd.cuda_repo(nd.resolve_distro("Rocky", "9.4"), "x86_64", NVIDIA_REPOS)
    assert repo.dnf_repo_path == "/etc/yum.repos.d/cuda-rhel9.repo"
    assert repo.dnf_repo.splitlines() == [
        "[cuda-rhel9-x86_64]",
        "name=cuda-rhel9-x86_64",
        f"baseurl={NVIDIA_REPOS}/rhel9/x86_64",
        "enabled=1",
        "gpgcheck=1",
        f"gpgkey={NVIDIA_REPOS}/rhel9/x86_64/D42D0685.pub",
    ]
    assert repo.apt_source == ""


@pytest.mark.parametrize("url", ["developer.download.nvidia.com/compute/cuda/repos", "ftp://x/"])
def test_repository_url_must_be_http_or_file(url: str) -> None:
    with pytest.raises(nd.PlanError, match="nvidia_driver_cuda_repo_url="):
        nd.cuda_repo(nd.resolve_distro("Debian", "12"), "x86_64", url)


def test_unknown_machine_has_no_cuda_repository() -> None:
    with pytest.raises(nd.PlanError, match="ppc64le"):
        nd.cuda_arch("ppc64le")


# ----------------------------------------------------------------------------- packages

V580 = nd.parse_driver_version("580.159.04")
V590 = nd.parse_driver_version("590.44.01")


@pytest.mark.parametrize(
    ("distro", "source", "flavor", "version", "packages", "stream"),
    [
        (("Ubuntu", "22.04"), "cuda_repo", "open", V580, ["nvidia-open-580=580.159.04-*"], ""),
        (
            ("Ubuntu", "22.04"),
            "cuda_repo",
            "proprietary",
            V580,
            ["cuda-drivers-580=580.159.04-*"],
            "",
        ),
        (("Debian", "12"), "cuda_repo", "open", V590, ["nvidia-open=590.44.01-*"], ""),
        (
            ("Ubuntu", "24.04"),
            "distro",
            "open",
            V580,
            [
                "nvidia-headless-580-server-open=580.159.04-*",
                "nvidia-utils-580-server=580.159.04-*",
            ],
            "",
        ),
        (
            ("Debian", "12"),
            "distro",
            "proprietary",
            V580,
            ["nvidia-kernel-dkms=580.159.04-*", "nvidia-smi=580.159.04-*", "libcuda1=580.159.04-*"],
            "",
        ),
        (
            ("RedHat", "9"),
            "cuda_repo",
            "open",
            V580,
            [
                "nvidia-driver-580.159.04",
                "nvidia-driver-cuda-580.159.04",
                "kmod-nvidia-open-dkms-580.159.04",
            ],
            "nvidia-driver:580-open",
        ),
        (
            ("Rocky", "8"),
            "cuda_repo",
            "proprietary",
            V580,
            [
                "nvidia-driver-580.159.04",
                "nvidia-driver-cuda-580.159.04",
                "kmod-nvidia-latest-dkms-580.159.04",
            ],
            "nvidia-driver:580-dkms",
        ),
    ],
)
def test_packages_per_family(distro, source, flavor, version, packages, stream) -> None:
    plan = nd.driver_packages(nd.resolve_distro(*distro), source, flavor, version)
    assert list(plan.packages) == packages
    assert plan.module_stream == stream


def test_rhel_distro_packages_refused() -> None:
    with pytest.raises(nd.PlanError, match=r"ships no NVIDIA driver packages.*cuda_repo"):
        nd.driver_packages(nd.resolve_distro("RedHat", "9"), "distro", "open", V580)


def test_hold_list_takes_driver_packages_at_the_pinned_release() -> None:
    installed = {
        "nvidia-open-580": ["580.159.04-0ubuntu1"],
        "libnvidia-compute-580": ["580.159.04-0ubuntu1"],
        "nvidia-driver": ["3:580.159.04-1.el9"],
        "nvidia-container-toolkit": ["1.18.0-1"],
        "libnvidia-old": ["570.86.15-1"],
        "curl": ["7.88.1-10"],
    }
    assert nd.packages_to_hold(installed, "580.159.04") == [
        "libnvidia-compute-580",
        "nvidia-driver",
        "nvidia-open-580",
    ]


# -------------------------------------------------------------------- GPUs and modules


@pytest.mark.parametrize(
    ("device_id", "arch"),
    [
        (0x2335, "Hopper"),  # H200 (tests/unit/data/gpu/h200-device/sysfs-pci-10de.txt)
        (0x2330, "Hopper"),  # H100 SXM5
        (0x2342, "Grace Hopper"),
        (0x20B0, "Ampere"),  # A100 SXM4 40GB
        (0x20F1, "Ampere"),  # A100 PCIe 40GB
        (0x2901, "Blackwell"),  # B200
        (0x26B5, "Ada Lovelace"),  # L40
        (0x1EB8, "Turing"),  # T4
        (0x1DB1, "Volta"),  # V100 SXM2
        (0x15F8, "Pascal"),  # P100 PCIe (inside a Maxwell range: the narrower range wins)
        (0x13BB, "Maxwell"),
        (0x0001, "unknown"),
    ],
)
def test_architecture_from_pci_device_id(device_id: int, arch: str) -> None:
    assert nd.architecture_of(device_id) == arch


def test_captured_sysfs_line_is_a_hopper_gpu() -> None:
    line = (GPU_DATA / "h200-device" / "sysfs-pci-10de.txt").read_text().split()
    fields = dict(item.split("=", 1) for item in line[1:])
    vendor, device, pci_class = (int(fields[k], 16) for k in ("vendor", "device", "class"))
    assert nd.is_gpu(vendor, pci_class)
    assert nd.PciGpu(line[0], device, pci_class).architecture == "Hopper"
    assert not nd.is_gpu(0x10DE, 0x068000)  # NVSwitch bridge
    assert not nd.is_gpu(0x10DE, 0x040300)  # HDMI audio function


@pytest.mark.parametrize(
    ("requested", "branch", "archs", "flavor"),
    [
        ("auto", 580, ["Hopper"], "open"),
        ("auto", 580, ["Ampere", "Hopper"], "open"),
        ("auto", 550, ["Hopper"], "proprietary"),
        ("auto", 550, ["Blackwell"], "open"),
        ("auto", 550, ["Grace Hopper"], "open"),
        ("auto", 580, ["Volta"], "proprietary"),
        ("auto", 580, [], "open"),
        ("proprietary", 580, ["Ampere"], "proprietary"),
        ("open", 535, ["Turing"], "open"),
    ],
)
def test_kernel_module_choice(requested: str, branch: int, archs: list[str], flavor: str) -> None:
    assert nd.choose_kernel_modules(requested, branch, archs)[0] == flavor


@pytest.mark.parametrize(
    ("requested", "branch", "archs", "message"),
    [
        ("proprietary", 580, ["Blackwell"], "nvidia_driver_kernel_modules=proprietary"),
        ("open", 580, ["Pascal"], "nvidia_driver_kernel_modules=open"),
        ("auto", 580, ["Volta", "Blackwell"], "one host cannot load both"),
        ("auto", 590, ["Volta"], "nvidia_driver_branch=590"),
        ("auto", 580, ["Kepler"], "Kepler"),
        ("both", 580, ["Hopper"], "nvidia_driver_kernel_modules='both'"),
    ],
)
def test_kernel_module_refusals(
    requested: str, branch: int, archs: list[str], message: str
) -> None:
    with pytest.raises(nd.PlanError, match=message.replace("(", r"\(")):
        nd.choose_kernel_modules(requested, branch, archs)


def test_loaded_module_from_captured_proc_file() -> None:
    text = (GPU_DATA / "h200-device" / "proc-driver-nvidia-version.txt").read_text()
    assert nd.parse_proc_version(text) == ("580.159.04", "open")


def test_loaded_proprietary_module_and_none() -> None:
    line = (
        "NVRM version: NVIDIA UNIX x86_64 Kernel Module  535.129.03  Tue Oct 31 01:11:11 UTC 2023\n"
    )
    assert nd.parse_proc_version(line) == ("535.129.03", "proprietary")
    assert nd.parse_proc_version(None) == (None, None)
    assert nd.parse_proc_version("") == (None, None)


def test_smi_list_from_captures() -> None:
    gpus = nd.parse_smi_list((GPU_DATA / "h200-x2-nvlink" / "smi-L.txt").read_text())
    assert [(g.index, g.name, g.uuid) for g in gpus] == [
        (0, "NVIDIA H200", "GPU-2a7b3c4d-5e6f-4a1b-8c2d-3e4f5a6b7c80"),
        (1, "NVIDIA H200", "GPU-9e8d7c6b-5a4f-4e3d-8c2b-1a0f9e8d7c61"),
    ]


def test_smi_list_skips_mig_devices() -> None:
    text = (
        "GPU 0: NVIDIA H200 (UUID: GPU-1f6a9c2e-0b4d-4e8a-9c3f-5d2e7a1b8c90)\n"
        "  MIG 1g.18gb     Device  0: (UUID: MIG-0b6b1d7a-7d0c-5d0e-9f61-2f3c1f1e2a10)\n"
    )
    assert [g.uuid for g in nd.parse_smi_list(text)] == ["GPU-1f6a9c2e-0b4d-4e8a-9c3f-5d2e7a1b8c90"]


@pytest.mark.parametrize(
    ("loaded", "nouveau", "action"),
    [
        ("580.159.04", False, "none"),
        (None, False, "modprobe"),
        (None, True, "reboot"),
        ("570.86.15", False, "reboot"),
    ],
)
def test_load_action(loaded, nouveau, action) -> None:
    assert nd.load_action(loaded, "580.159.04", nouveau) == action


def test_verification_names_lost_gpu_and_wrong_release() -> None:
    gpus = nd.parse_smi_list((GPU_DATA / "h200-single" / "smi-L.txt").read_text())
    assert nd.verify_driver("580.159.04", "580.159.04", ["580.159.04"], 1, gpus) == []
    problems = nd.verify_driver("580.159.04", "570.86.15", ["570.86.15"], 2, gpus)
    assert problems == [
        "the loaded kernel module is 570.86.15, nvidia_driver_version is 580.159.04",
        "nvidia-smi reports driver 570.86.15, nvidia_driver_version is 580.159.04",
        "2 NVIDIA GPUs on the PCI bus, nvidia-smi -L lists 1 "
        "(GPU-1f6a9c2e-0b4d-4e8a-9c3f-5d2e7a1b8c90); a GPU the driver does not see is lost "
        "to the cluster",
    ]
    assert nd.verify_driver("580.159.04", None, [], 1, [])[0].startswith("no NVIDIA kernel module")
    # /proc/driver/nvidia/version unreadable (a container): nvidia-smi's answer counts
    assert nd.verify_driver("580.159.04", None, ["580.159.04"], 1, gpus) == []


@pytest.mark.parametrize(
    "arch, release, supported",
    [
        ("Hopper", "535.129.03", True),
        ("Volta", "580.159.04", True),
        ("Volta", "590.44.01", False),
        ("Pascal", "590.44.01", False),
        ("Kepler", "525.60.13", False),
        ("Blackwell", "570.124.06", False),
        ("Blackwell", "570.133.20", True),
        ("unknown", "590.44.01", True),
    ],
)
def test_release_supports_each_architecture_by_nvidias_documents(
    arch: str, release: str, supported: bool
) -> None:
    why = nd.release_supports(arch, nd.parse_driver_version(release))
    assert (why is None) == supported
    if why:
        assert why.startswith(f"{arch} GPUs") and release in why
        assert nd.BRANCH_SUPPORT[arch][2].startswith("NVIDIA")
