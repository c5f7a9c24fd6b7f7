"""gpu_facts' nvidia-smi backend on simulated nodes: NVLink facts from the simulator's
``topo -m`` and ``nvlink -s``, and no warning (each command it runs is answered)."""

from __future__ import annotations

from pathlib import Path

import pytest
from ansible_collections.gpufleet.cluster.plugins.module_utils.host.gpu_facts import (
    collect_nvidia_smi,
)

from gpufleet.lab.gpusim import admin, cli, state

pytestmark = pytest.mark.unit


def node(tmp_path: Path, model: str, count: int):
    path = tmp_path / "state.json"
    state.save(admin.build_state(model, count, "lab-gpu-1"), path)
    ran: list[list[str]] = []

    def run(argv: list[str]) -> tuple[int, str, str]:
        ran.append(argv[1:])
        r = cli.run(argv[1:], path)
        return r.rc, r.out, r.err

    return state.load(path), run, ran


def test_two_simulated_h200s_are_nvlinked_peers(tmp_path: Path) -> None:
    st, run, ran = node(tmp_path, "NVIDIA H200", 2)
    host = collect_nvidia_smi(run)
    assert ["topo", "-m"] in ran and ["nvlink", "-s"] in ran
    assert host.warnings == []
    g0, g1 = host.gpus
    assert [(p.index, p.uuid, p.pci_bus_id, p.links) for p in g0.nvlink_peers] == [
        (1, st.gpus[1].uuid, "00000000:00:07.0", 18)
    ]
    assert [(p.index, p.uuid, p.links) for p in g1.nvlink_peers] == [(0, st.gpus[0].uuid, 18)]
    assert (g0.nvlink_active_links, g1.nvlink_active_links) == (18, 18)


def test_gpus_without_nvlink_have_no_peers_and_no_warning(tmp_path: Path) -> None:
    # NVIDIA L4 (PCIe card): the simulator gives it no NVLink
    _, run, ran = node(tmp_path, "NVIDIA L4", 2)
    host = collect_nvidia_smi(run)
    assert ["topo", "-m"] in ran and ["nvlink", "-s"] in ran
    assert host.warnings == []
    # nvlink -s prints nothing without NVLink (h200-single-cli/smi-nvlink-s.txt), which
    # gpu_facts reads as "not known" (None)
    assert [(g.nvlink_peers, g.nvlink_active_links) for g in host.gpus] == [
        ([], None),
        ([], None),
    ]


def test_one_gpu_runs_no_nvlink_command(tmp_path: Path) -> None:
    _, run, ran = node(tmp_path, "NVIDIA H200", 1)
    host = collect_nvidia_smi(run)
    assert host.warnings == []
    assert not [a for a in ran if a[0] in ("topo", "nvlink")]
