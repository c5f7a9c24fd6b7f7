"""The NVIDIA roles refuse bad input before any change, and fail verification naming the GPU.

Each case runs the real role (or module) with ansible-playbook against this machine
(``ansible_connection=local``), with every file the role would edit under ``tmp_path``.
The roles that would touch the machine's own packages run in check mode as well, so a
refusal that does not happen cannot change this machine. The GPU is a simulator: an
``nvidia-smi`` stand-in that prints the ``nvidia-smi -L`` capture of two H200s
(``data/gpu/h200-x2-nvlink/smi-L.txt``) and a sysfs tree with their PCI functions.
"""

from __future__ import annotations

import hashlib
import io
import stat
import textwrap
from pathlib import Path

import pytest
from rich.console import Console

from gpufleet import runner
from gpufleet.exit import EXIT_CANNOT_RUN, EXIT_FAILED, EXIT_OK

pytestmark = pytest.mark.ansible

GPU_DATA = Path(__file__).resolve().parents[1] / "unit" / "data" / "gpu"
SMI_L = GPU_DATA / "h200-x2-nvlink" / "smi-L.txt"
UUID_0 = "GPU-2a7b3c4d-5e6f-4a1b-8c2d-3e4f5a6b7c80"
UUID_1 = "GPU-9e8d7c6b-5a4f-4e3d-8c2b-1a0f9e8d7c61"
INVENTORY = """\
[gpu_nodes]
node1 ansible_connection=local
[all:vars]
ansible_python_interpreter="{{ ansible_playbook_python }}"
"""
MAIN_V3 = (
    'version = 3\nimports = ["{confd}/*.toml"]\n\n'
    '[plugins."io.containerd.cri.v1.runtime".containerd]\n  default_runtime_name = "runc"\n'
)


def _digests(root: Path) -> dict[str, str]:
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


def _playbook(tmp_path: Path, body: str) -> Path:
    book = tmp_path / "play.yml"
    book.write_text(textwrap.dedent(body))
    return book


def _run(
    tmp_path: Path, book: Path, extravars: dict, check: bool = False
) -> tuple[str, runner.RunResult]:
    inventory = tmp_path / "inventory.ini"
    inventory.write_text(INVENTORY)
    result = runner.run_playbook(
        str(book),
        str(inventory),
        extravars={**extravars, "ansible_become": False},
        check=check,
        console=Console(file=io.StringIO(), width=400),
        artifact_root=tmp_path / "artifacts",
    )
    messages = " ".join(msg for _, _, msg in result.progress.failures)
    return " ".join(messages.split()), result


def _nvidia_smi_simulator(tmp_path: Path, smi_l: str, driver: str = "580.159.04") -> Path:
    """An nvidia-smi simulator answering -L and --query-gpu=driver_version."""
    script = tmp_path / "nvidia-smi-simulator"
    script.write_text(
        "#!/usr/bin/env python3\n"
        "import sys\n"
        f"LISTING = {smi_l!r}\n"
        "gpus = [l for l in LISTING.splitlines() if l.startswith('GPU ')]\n"
        "if sys.argv[1:] == ['-L']:\n"
        "    print(LISTING, end='')\n"
        "elif sys.argv[1:2] == ['--query-gpu=driver_version']:\n"
        f"    print('\\n'.join({driver!r} for _ in gpus))\n"
        "else:\n"
        "    sys.exit(2)\n"
    )
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    return script


def _sysfs_with_gpus(tmp_path: Path, addresses: list[str]) -> Path:
    """sysfs tree of the GPU simulator: H200 PCI functions (device 0x2335, class 0x030200)."""
    root = tmp_path / "sysfs"
    for address in addresses:
        dev = root / "bus" / "pci" / "devices" / address
        dev.mkdir(parents=True)
        (dev / "vendor").write_text("0x10de\n")
        (dev / "device").write_text("0x2335\n")
        (dev / "class").write_text("0x030200\n")
    return root


def _listing() -> str:
    return "".join(
        line + "\n" for line in SMI_L.read_text().splitlines() if line.startswith("GPU ")
    )


# ------------------------------------------------------------------ container toolkit

TOOLKIT_PLAY = """\
- name: Toolkit refusal
  hosts: gpu_nodes
  gather_facts: false
  roles:
    - role: gpufleet.cluster.nvidia_container_toolkit
"""


def _containerd_dir(tmp_path: Path) -> tuple[Path, dict]:
    etc = tmp_path / "containerd"
    confd = etc / "conf.d"
    confd.mkdir(parents=True)
    (etc / "config.toml").write_text(MAIN_V3.format(confd=confd))
    return etc, {
        "nvidia_container_toolkit_containerd_config": str(etc / "config.toml"),
        "nvidia_container_toolkit_containerd_dropin": str(confd / "99-nvidia.toml"),
        "nvidia_container_toolkit_install_packages": False,
        "nvidia_container_toolkit_cdi_generate": False,
    }


@pytest.mark.parametrize(
    ("extravars", "named"),
    [
        (
            {
                "nvidia_container_toolkit_containerd_version": "2.1.4",
                "nvidia_container_toolkit_version": "1.14.6",
            },
            "nvidia_container_toolkit_version=1.14.6: containerd 2.1.4 writes configuration "
            "version 3 or newer, which toolkit releases before 1.17.4 cannot read",
        ),
        (
            {
                "nvidia_container_toolkit_containerd_version": "1.6.20",
                "nvidia_container_toolkit_version": "1.18.0",
            },
            "nvidia_container_toolkit_enable_cdi=true: containerd 1.6.20 has no CDI support",
        ),
    ],
)
def test_toolkit_refuses_before_any_change(tmp_path: Path, extravars: dict, named: str) -> None:
    etc, paths = _containerd_dir(tmp_path)
    before = _digests(etc)
    message, result = _run(tmp_path, _playbook(tmp_path, TOOLKIT_PLAY), {**paths, **extravars})
    assert result.status == EXIT_CANNOT_RUN  # a refusal of the input: exit 2
    assert named in message
    assert _digests(etc) == before


def test_mismatched_dropin_refused_before_restart(tmp_path: Path) -> None:
    etc, paths = _containerd_dir(tmp_path)
    site = etc / "conf.d" / "50-site.toml"
    site.write_text('version = 2\n[plugins."io.containerd.grpc.v1.cri"]\n  enable_cdi = true\n')
    before = _digests(etc)
    message, result = _run(
        tmp_path,
        _playbook(tmp_path, TOOLKIT_PLAY),
        {**paths, "nvidia_container_toolkit_containerd_version": "2.1.4"},
    )
    assert result.status == EXIT_FAILED
    assert f"{site} is a version 2 drop-in but {etc / 'config.toml'} is version 3" in message
    assert "Check the containerd configuration before any change" in " ".join(
        task for _, task, _ in result.progress.failures
    )
    assert _digests(etc) == before


def test_cdi_spec_missing_a_gpu_fails_naming_it(tmp_path: Path) -> None:
    cdi = tmp_path / "cdi"
    cdi.mkdir()
    # generated while only the first GPU was visible: index 0, its UUID and "all"
    (cdi / "nvidia.yaml").write_text(
        "cdiVersion: 0.5.0\nkind: nvidia.com/gpu\ndevices:\n"
        f"- name: '0'\n- name: {UUID_0}\n- name: all\n"
    )
    smi = _nvidia_smi_simulator(tmp_path, _listing())
    book = _playbook(
        tmp_path,
        f"""\
        - name: CDI check
          hosts: gpu_nodes
          gather_facts: false
          tasks:
            - name: Toolkit | Every GPU has a CDI device named by its UUID
              gpufleet.cluster.nvidia_cdi_spec_check:
                spec_dirs: [{cdi}]
                nvidia_smi: {smi}
        """,
    )
    message, result = _run(tmp_path, book, {})
    assert result.status == EXIT_FAILED
    assert f"no CDI device nvidia.com/gpu=<UUID> for GPU 1 {UUID_1} (NVIDIA H200)" in message
    assert UUID_0 + " (" not in message


# ------------------------------------------------------------------------------ driver

DRIVER_PLAY = """\
- name: Driver refusal
  hosts: gpu_nodes
  gather_facts: false
  roles:
    - role: gpufleet.cluster.nvidia_driver
"""


def test_branch_too_old_for_dra_refused_with_reason(tmp_path: Path) -> None:
    message, result = _run(
        tmp_path,
        _playbook(tmp_path, DRIVER_PLAY),
        {"nvidia_driver_branch": "550", "nvidia_driver_version": "550.163.01"},
        check=True,
    )
    assert result.status == EXIT_CANNOT_RUN  # a refusal of the input: exit 2
    assert (
        "nvidia_driver_branch=550: GPU allocation with the NVIDIA DRA driver needs branch 565"
        in message
    )
    assert result.progress.stats is not None
    assert not result.progress.stats["changed"]


def test_unsupported_distribution_refused_naming_it(tmp_path: Path) -> None:
    # This machine is a supported Debian 12, so the role's plan step is run as the role
    # runs it (the same filter in a block whose rescue names the variables) with the facts
    # a Fedora 40 host reports.
    book = _playbook(
        tmp_path,
        """\
        - name: Driver plan on a Fedora host
          hosts: gpu_nodes
          gather_facts: false
          tasks:
            - name: Driver | Check the pin, the distribution and the kernel modules
              ansible.builtin.set_fact:
                plan: >-
                  {{ {'mode': 'install', 'branch': '580', 'version': '580.159.04',
                      'for_dra': true, 'distribution': 'Fedora', 'distribution_version': '40',
                      'architecture': 'x86_64', 'source': 'cuda_repo', 'kernel_modules': 'auto',
                      'gpu_architectures': ['Hopper'],
                      'repo_url': 'https://developer.download.nvidia.com/compute/cuda/repos',
                      'packages': []} | gpufleet.cluster.nvidia_driver_plan }}
        """,
    )
    message, result = _run(tmp_path, book, {})
    assert result.status == EXIT_FAILED
    assert "unsupported distribution Fedora 40" in message
    assert (
        "support Ubuntu 22.04, Ubuntu 24.04, Debian 12, RedHat 8, RedHat 9, Rocky 8, Rocky 9"
        in message
    )


def test_preinstalled_driver_that_misses_a_gpu_fails_verification(tmp_path: Path) -> None:
    sysfs = _sysfs_with_gpus(tmp_path, ["0000:00:06.0", "0000:00:07.0"])
    only_first = _listing().splitlines()[0] + "\n"
    smi = _nvidia_smi_simulator(tmp_path, only_first, driver="580.95.05")
    message, result = _run(
        tmp_path,
        _playbook(tmp_path, DRIVER_PLAY),
        {
            "nvidia_driver_mode": "preinstalled",
            "nvidia_driver_version": "580.159.04",
            "nvidia_driver_sysfs_root": str(sysfs),
            "nvidia_driver_nvidia_smi": str(smi),
        },
    )
    assert result.status == EXIT_FAILED
    assert "nvidia-smi reports driver 580.95.05, nvidia_driver_version is 580.159.04" in message
    assert f"2 NVIDIA GPUs on the PCI bus, nvidia-smi -L lists 1 ({UUID_0})" in message


def test_preinstalled_driver_that_sees_every_gpu_passes(tmp_path: Path) -> None:
    sysfs = _sysfs_with_gpus(tmp_path, ["0000:00:06.0", "0000:00:07.0"])
    smi = _nvidia_smi_simulator(tmp_path, _listing())
    message, result = _run(
        tmp_path,
        _playbook(tmp_path, DRIVER_PLAY),
        {
            "nvidia_driver_mode": "preinstalled",
            "nvidia_driver_sysfs_root": str(sysfs),
            "nvidia_driver_nvidia_smi": str(smi),
        },
    )
    assert result.status == EXIT_OK, message
