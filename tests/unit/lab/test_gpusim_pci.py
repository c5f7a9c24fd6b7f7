"""GPU simulator state: PCIe root complex and addressing mode of each simulated GPU.

NVIDIA's DRA kubelet plugin publishes ``resource.kubernetes.io/pcieRoot`` and
``addressingMode``; the simulator's state file (schema 1, optional fields ``pcie_root``
and ``addressing_mode``) carries them for its kubelet plugin. The values of the real H200
are in ``data/gpu/h200-single/resourceslice-nvidia-dra-driver-0.4.1.json``.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gpufleet.lab.gpusim import admin, hardware, state

pytestmark = pytest.mark.unit

CAPTURE = Path(__file__).resolve().parents[1] / "data" / "gpu" / "h200-single"
CAPTURE_SLICE = CAPTURE / "resourceslice-nvidia-dra-driver-0.4.1.json"


def real_h200_attributes() -> dict:
    return json.loads(CAPTURE_SLICE.read_text())["spec"]["devices"][0]["attributes"]


def test_simulated_h200_gets_the_real_h200s_pcie_root_and_addressing_mode() -> None:
    real = real_h200_attributes()
    gpu = admin.build_state("NVIDIA H200", 1, "lab-worker-1").gpus[0]
    # The simulated bus ID is the captured one (00000000:00:06.0 -> 0000:00:06.0).
    assert (
        gpu.pci_bus_id.lower().removeprefix("0000")
        == real["resource.kubernetes.io/pciBusID"]["string"]
    )
    assert gpu.pcie_root == real["resource.kubernetes.io/pcieRoot"]["string"] == "pci0000:00"
    assert gpu.addressing_mode == real["addressingMode"]["string"] == "None"


def test_every_gpu_of_a_node_gets_the_root_of_its_bus() -> None:
    gpus = admin.build_state("NVIDIA H100 80GB HBM3", 3, "n").gpus
    assert [(g.pci_bus_id, g.pcie_root) for g in gpus] == [
        ("00000000:00:06.0", "pci0000:00"),
        ("00000000:00:07.0", "pci0000:00"),
        ("00000000:00:08.0", "pci0000:00"),
    ]
    assert {g.addressing_mode for g in gpus} == {"None"}


@pytest.mark.parametrize(
    ("name", "mode"),
    [
        ("NVIDIA H200", "None"),
        ("NVIDIA A100-SXM4-80GB", "None"),
        ("NVIDIA B200", "None"),
        ("NVIDIA GH200 144G HBM3e", "ATS"),
        ("NVIDIA GB200", "ATS"),
    ],
)
def test_addressing_mode_per_model(name: str, mode: str) -> None:
    assert hardware.addressing_mode(name) == mode
    assert admin.build_state(name, 1, "n").gpus[0].addressing_mode == mode


def test_pcie_root_keeps_the_domain_and_refuses_a_bad_bus_id() -> None:
    assert hardware.pcie_root("00000001:3B:00.0") == "pci0001:00"
    with pytest.raises(ValueError, match=r"'19:00\.0' is not a PCI bus ID"):
        hardware.pcie_root("19:00.0")
    with pytest.raises(ValueError, match="wider than 16 bits"):
        hardware.pcie_root("00010000:19:00.0")


def test_fields_round_trip_and_are_optional(tmp_path: Path) -> None:
    st = admin.build_state("NVIDIA H200", 1, "n")
    st.gpus[0].pcie_root, st.gpus[0].addressing_mode = "pci0000:17", "HMM"
    path = tmp_path / "state.json"
    state.save(st, path)
    raw = json.loads(path.read_text())
    assert (raw["gpus"][0]["pcie_root"], raw["gpus"][0]["addressing_mode"]) == ("pci0000:17", "HMM")
    assert state.load(path).gpus[0] == st.gpus[0]
    # A file written before these fields existed still loads: the GPU reports neither.
    del raw["gpus"][0]["pcie_root"], raw["gpus"][0]["addressing_mode"]
    old = state.from_dict(raw).gpus[0]
    assert (old.pcie_root, old.addressing_mode) == ("", "")


@pytest.mark.parametrize(
    ("key", "value", "message"),
    [
        ("pcie_root", "0000:00", "state.gpus[0].pcie_root = '0000:00': expected a root complex"),
        ("pcie_root", 7, "state.gpus[0].pcie_root = 7: expected str"),
        ("addressing_mode", "none", "state.gpus[0].addressing_mode = 'none': expected one of"),
    ],
)
def test_bad_values_name_the_field(key: str, value: object, message: str) -> None:
    raw = admin.build_state("NVIDIA H200", 1, "n").to_dict()
    raw["gpus"][0][key] = value
    with pytest.raises(state.StateError) as exc:
        state.from_dict(raw)
    assert message in str(exc.value)
