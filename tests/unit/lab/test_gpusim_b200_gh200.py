"""Simulated NVIDIA B200 (Blackwell) and GH200 144G HBM3e (Grace Hopper) GPUs.

What the GPU simulator's ``nvidia-smi`` prints for them is built from the MIG tables
(``plugins/module_utils/mig/tables.py``, through ``mig.profiles``). Read back with the
project's own parsers (``mig.profiles.parse_lgip``/``parse_lgipp``, ``nvidia.smi``),
the output must give the table's profiles, placements, name, memory and PCI device ID.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from ansible_collections.gpufleet.cluster.plugins.module_utils.mig import gpu_state as mgs
from ansible_collections.gpufleet.cluster.plugins.module_utils.mig import profiles as mprof
from ansible_collections.gpufleet.cluster.plugins.module_utils.nvidia import smi as smip

from gpufleet.lab.gpusim import admin, cli, state

pytestmark = pytest.mark.unit

MODELS = ["NVIDIA B200", "NVIDIA GH200 144G HBM3e"]


def simulated(tmp_path: Path, model: str, mig: bool = True) -> Path:
    path = tmp_path / "state.json"
    state.save(admin.build_state(model, 1, "lab-worker-1"), path)
    if mig:
        assert cli.run(["-i", "0", "-mig", "1"], path).rc == 0
    return path


def smi(path: Path, *argv: str) -> str:
    result = cli.run(list(argv), path)
    assert result.rc == 0, result.err
    return result.out


@pytest.mark.parametrize("model", MODELS)
def test_lgip_and_lgipp_give_the_tables_profiles_back(tmp_path: Path, model: str) -> None:
    table = mprof.model(model)
    path = simulated(tmp_path, model)
    rows = {r["name"]: r for r in mprof.parse_lgip(smi(path, "mig", "-lgip"))}
    placements = mprof.parse_lgipp(smi(path, "mig", "-lgipp"))[0]
    assert sorted(rows) == sorted(p.name for p in table.profiles)
    for p in table.profiles:
        row = rows[p.name]
        assert row["profile_id"] == p.profile_id, p.name
        assert row["total"] == row["free"] == p.max_instances, p.name
        assert row["memory_mib"] == p.memory_mib, p.name
        got = tuple(row[k] for k in ("multiprocessors", "copy_engines", "decoders",
                                     "encoders", "jpeg_engines", "ofa_engines"))  # fmt: skip
        want = (p.multiprocessors, p.copy_engines, p.decoders, p.encoders,
                p.jpeg_engines, p.ofa_engines)  # fmt: skip
        assert got == want, p.name
        assert placements[p.profile_id] == (p.placements, p.slices), p.name


@pytest.mark.parametrize("model", MODELS)
def test_a_node_model_read_from_the_output_plans_like_the_table(tmp_path: Path, model: str) -> None:
    table = mprof.model(model)
    path = simulated(tmp_path, model)
    node = mprof.model_from_nvidia_smi(
        model, table.memory_mib, smi(path, "mig", "-lgip"), smi(path, "mig", "-lgipp")
    )
    assert node.profiles == table.profiles  # compares every field but ``derived``


@pytest.mark.parametrize(
    ("model", "architecture", "addressing"),
    [("NVIDIA B200", "Blackwell", "None"), ("NVIDIA GH200 144G HBM3e", "Hopper", "ATS")],
)
def test_q_xml_names_the_model_and_its_table_device_id(
    tmp_path: Path, model: str, architecture: str, addressing: str
) -> None:
    table = mprof.model(model)
    path = simulated(tmp_path, model, mig=False)
    xml = smi(path, "-q", "-x")
    host = smip.parse_smi_xml(xml)
    gpu = host.gpus[0]
    assert (gpu.name, gpu.architecture, gpu.memory_mib) == (model, architecture, table.memory_mib)
    # the nvidia_mig module's reader of the device ID, and its model lookup by it
    assert mgs.device_ids(xml) == [table.pci_device_ids[0]]
    assert mprof.model_by_device_id(table.pci_device_ids[0]) == table
    assert f"<addressing_mode>{addressing}</addressing_mode>" in xml
    assert f"Addressing Mode                                    : {addressing}" in smi(path, "-q")
    listed = smip.parse_smi_list(smi(path, "-L"))
    assert [(g.index, g.name) for g in listed] == [(0, model)]
