"""GPU facts as the DRA driver publishes them: absent answers, versions, architectures and
MIG profile names (``plugins/module_utils/nvidia/gpu.py``).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from ansible_collections.gpufleet.cluster.plugins.module_utils.nvidia import gpu as ginfo
from ansible_collections.gpufleet.cluster.plugins.module_utils.nvidia import smi as smip

from tests.unit.nvidia.gpu_captures import SINGLE, capture

pytestmark = pytest.mark.unit


@pytest.mark.parametrize("answer", ["N/A", "[N/A]", "Not Supported", "[Not Supported]"])
def test_absent_answers_mean_no_feature(answer: str) -> None:
    # nvidia-smi's words for a missing feature (MIG guide: "[N/A], [N/A]" for a non-MIG GPU
    # in --query-gpu; "N/A" in -q on the RTX 4070 capture).
    assert ginfo.absent(answer) is None
    assert ginfo.mig_mode(answer) is None
    assert ginfo.to_int(answer) is None


def nvml_capture(directory: Path) -> dict[str, str]:
    """Top-level ``key value`` lines of a captured nvml.txt (driver, cuda_driver, ...)."""
    out = {}
    for line in (directory / "nvml.txt").read_text().splitlines():
        if line.strip() and not line.startswith(" "):
            key, _, value = line.partition(" ")
            out.setdefault(key, value)
    return out


def test_semver_as_the_dra_driver_publishes_it() -> None:
    # docs/reference: driverVersion 580.95.05 is published as 580.95.5.
    assert ginfo.semver("580.95.05") == "580.95.5"
    assert ginfo.semver("580.159.04") == "580.159.4"
    assert ginfo.semver("13.0") == "13.0.0"
    assert ginfo.semver("9.0") == "9.0.0"
    assert ginfo.semver("N/A") is None
    assert ginfo.semver("580.159.04-beta") is None


def test_nvml_numbers_match_nvidia_smi_words() -> None:
    nvml = nvml_capture(SINGLE)
    xml = smip.parse_smi_xml(capture(SINGLE / "smi-q.xml"))
    assert nvml["driver"] == xml.driver_version
    assert ginfo.cuda_version_from_int(int(nvml["cuda_driver"])) == xml.cuda_driver_version
    text = (SINGLE / "nvml.txt").read_text()
    arch = int(text.split("\n arch ")[1].split()[0])
    assert ginfo.NVML_ARCHITECTURES[arch] == xml.gpus[0].architecture == "Hopper"
    total = int(text.split(" memory total bytes ")[1].split()[0])
    assert total // ginfo.MIB == xml.gpus[0].memory_mib
    assert ginfo.architecture_from_compute_capability("9.0") == "Hopper"
    assert ginfo.profile_name(text.split("name ")[1].splitlines()[0]) == "1g.18gb"
