"""Differential test of the MIG tables and planner against NVIDIA's own layouts: every
(config entry, PCI device ID) pair that NVIDIA's mig-parted default config writes for a
GPU (``nvidia_layouts``) must find the GPU by its device ID and by the name it prints, and
plan to exactly the counts asked."""

from __future__ import annotations

import pytest
from ansible_collections.gpufleet.cluster.plugins.module_utils.mig import placement as mpla
from ansible_collections.gpufleet.cluster.plugins.module_utils.mig import planner as pl
from ansible_collections.gpufleet.cluster.plugins.module_utils.mig import profiles as mp

from tests.unit.mig import nvidia_layouts as nl

pytestmark = pytest.mark.unit


def pairs() -> list[tuple[str, int, str, dict[str, int]]]:
    """(config, entry index, device ID, layout) of every pair NVIDIA targets."""
    out = []
    for config, entries in nl.CONFIGS.items():
        for i, (device_filter, layout) in enumerate(entries):
            if device_filter is not None:
                ids = device_filter
            else:
                ids = tuple(d for g in nl.TARGETS[config] for d in nl.GROUPS[g])
            out.extend((config, i, d, layout) for d in ids)
    return out


def verdict(device_id: str, layout: dict[str, int]) -> str:
    """``right`` or why not: ``no model for the device ID``, ``printed name unknown``,
    ``printed name finds another model``, ``unknown profile``, ``refused``,
    ``planned other counts``."""
    m = mp.model_by_device_id(device_id)
    if m is None:
        return "no model for the device ID"
    if device_id in nl.PRINTED_NAMES:
        try:
            by_name = mp.model(nl.PRINTED_NAMES[device_id][0])
        except mp.UnknownGpuModel:
            return "printed name unknown"
        if by_name is not m:
            return "printed name finds another model"
    try:
        plan = pl.plan(m, layout)
    except mp.UnknownProfile:
        return "unknown profile"
    except mpla.LayoutDoesNotFit:
        return "refused"
    asked = {k: v for k, v in layout.items() if v}
    return "right" if plan.counts == asked else "planned other counts"


PAIRS = pairs()


def test_the_pairs_cover_every_targeted_config_and_device() -> None:
    configs = {c for c, *_ in PAIRS}
    untargeted = {c for c, t in nl.TARGETS.items() if not t}
    assert configs == set(nl.CONFIGS) - untargeted
    assert {d for _, _, d, _ in PAIRS} == {d for g in nl.GROUPS.values() for d in g}
    assert len(PAIRS) == 237


@pytest.mark.parametrize(
    ("config", "entry", "device_id", "layout"),
    PAIRS,
    ids=[f"{c}[{i}]@{d}" for c, i, d, _ in PAIRS],
)
def test_nvidia_layout_plans_on_its_gpu(
    config: str, entry: int, device_id: str, layout: dict[str, int]
) -> None:
    assert verdict(device_id, layout) == "right", (config, entry, device_id, layout)


@pytest.mark.parametrize("device_id", sorted(nl.PRINTED_NAMES))
def test_the_printed_name_and_the_device_id_find_one_model(device_id: str) -> None:
    name, source = nl.PRINTED_NAMES[device_id]
    m = mp.model(name)
    assert m is mp.model_by_device_id(device_id), source
    assert mp.model(name.upper()) is m and mp.model(f"  {name}  ") is m


def test_every_name_of_every_model_finds_it_and_no_other() -> None:
    seen: dict[str, str] = {}
    for m in mp.MODELS.values():
        for name in m.nvml_names:
            assert mp.model(name) is m, name
            assert name.lower() not in seen, (name, seen.get(name.lower()))
            seen[name.lower()] = m.name
    for m in mp.MODELS.values():
        for name, source in m.other_names:
            assert source and name.startswith("NVIDIA "), (m.name, name)


@pytest.mark.parametrize(
    "near_miss",
    ["NVIDIA B300 SXM6", "NVIDIA B300 SXM6 AC2", "NVIDIA GH200", "NVIDIA GH200 480", "B300*"],
)
def test_names_are_matched_exactly_not_by_likeness(near_miss: str) -> None:
    with pytest.raises(mp.UnknownGpuModel):
        mp.model(near_miss)


def test_every_device_id_of_the_tables_is_in_pci_ids_and_every_mig_parted_id_in_the_tables() -> (
    None
):
    table_ids = {
        d.upper().replace("0X", "0x") for m in mp.MODELS.values() for d in m.pci_device_ids
    }
    assert table_ids == set(nl.PCI_IDS)
    mig_parted_ids = {d for entries in nl.CONFIGS.values() for f, _ in entries if f for d in f}
    assert mig_parted_ids <= table_ids
    # the IDs the tables add beyond mig-parted's filters, each from pci.ids
    assert table_ids - mig_parted_ids == {
        "0x233910DE", "0x2BB110DE", "0x2BB310DE", "0x2BB410DE", "0x2C3110DE",
    }  # fmt: skip
