"""Reading a GPU's state through nvidia-smi (``plugins/module_utils/mig/gpu_state.py``):
running programs, GPU processes and PCI device IDs."""

from __future__ import annotations

import pytest
from ansible_collections.gpufleet.cluster.plugins.module_utils.mig import gpu_state as mgs

pytestmark = pytest.mark.unit


def missing(argv: list[str]) -> tuple[int, str, str]:
    raise FileNotFoundError(2, "No such file or directory")


def test_run_program_gives_empty_outputs_for_none() -> None:
    assert mgs.run_program(lambda argv: (0, None, None), ["x"]) == (0, "", "")


def test_a_missing_program_says_to_install_the_driver() -> None:
    with pytest.raises(mgs.MigApplyError, match=r"nvidia-smi not found.*install the NVIDIA driver"):
        mgs.run_program(missing, ["nvidia-smi"])


def test_run_program_ok_quotes_the_command_and_its_output() -> None:
    assert mgs.run_program_ok(lambda argv: (0, "ok", ""), ["nvidia-smi", "-L"]) == "ok"
    with pytest.raises(mgs.MigApplyError, match="'nvidia-smi -L' exited 1: out err"):
        mgs.run_program_ok(lambda argv: (1, "out", "err"), ["nvidia-smi", "-L"])


def test_compute_apps_by_gpu_with_unreported_memory() -> None:
    text = "GPU-1, 123, python, 500\nGPU-1, 124, /usr/bin/x, [N/A]\nGPU-2, 5, y, 10\n"
    assert mgs.parse_compute_apps(text) == {
        "GPU-1": [mgs.Process(123, "python", 500), mgs.Process(124, "/usr/bin/x", None)],
        "GPU-2": [mgs.Process(5, "y", 10)],
    }


def test_device_ids_per_gpu_in_order() -> None:
    xml = (
        "<nvidia_smi_log><gpu><pci><pci_device_id>233510DE</pci_device_id></pci></gpu>"
        "<gpu><pci></pci></gpu></nvidia_smi_log>"
    )
    assert mgs.device_ids(xml) == ["0x233510DE", None]
