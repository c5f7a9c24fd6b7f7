"""Layouts built the way a mig-parted default config is (each profile alone at its
instance limit, and a balanced mix of two 1g, one 2g and one 3g), generated here from the
tables, judged on every built-in model: each model takes its own, none is refused."""

from __future__ import annotations

import pytest
from ansible_collections.gpufleet.cluster.plugins.module_utils.mig import config as mcfg
from ansible_collections.gpufleet.cluster.plugins.module_utils.mig import placement as mig_placement
from ansible_collections.gpufleet.cluster.plugins.module_utils.mig import planner as pl
from ansible_collections.gpufleet.cluster.plugins.module_utils.mig import profiles as mp

pytestmark = pytest.mark.unit


def default_style_layouts(m: mp.GpuModel) -> dict[str, dict[str, int]]:
    """``all-<profile>`` (that profile alone, as many as the GPU allows) and
    ``all-balanced`` (two of the smallest 1g, one 2g and one 3g, those the model has, when
    they fit in its memory slices)."""
    out = {f"all-{p.name}": {p.name: p.max_instances} for p in m.profiles}
    plain = [p for p in m.profiles if "+" not in p.name and "-" not in p.name]
    balanced: dict[str, int] = {}
    for compute, count in ((1, 2), (2, 1), (3, 1)):
        sized = sorted((p for p in plain if p.compute_slices == compute), key=lambda p: p.slices)
        if sized:
            balanced[sized[0].name] = count
    if balanced and sum(m.profile(n).slices * c for n, c in balanced.items()) <= m.total_slices:
        out["all-balanced"] = balanced
    return out


def judge(config: mcfg.MigConfig, m: mp.GpuModel) -> dict[str, int]:
    """fits / refusals (known profiles that do not fit) / unplannable (a profile the
    model lacks) over the configs of ``config``."""
    counts = {"fits": 0, "refusals": 0, "unplannable": 0}
    for name, entries in config.configs.items():
        wanted = dict(entries[0].mig_devices)
        try:
            pl.plan(m, wanted)
        except mp.UnknownProfile:
            counts["unplannable"] += 1
        except mig_placement.LayoutDoesNotFit:
            counts["refusals"] += 1
        else:
            counts["fits"] += 1
        assert name
    return counts


def union_config() -> mcfg.MigConfig:
    configs: dict[str, list] = {}
    for m in mp.MODELS.values():
        for name, layout in default_style_layouts(m).items():
            key = f"{m.layout}-{name}"
            configs.setdefault(
                key, [{"devices": "all", "mig-enabled": True, "mig-devices": layout}]
            )
    return mcfg.load_mig_config({"version": "v1", "mig-configs": configs})


@pytest.mark.parametrize("name", sorted(n for n, m in mp.MODELS.items() if m.profiles))
def test_every_model_takes_its_own_default_style_layouts(name: str) -> None:
    m = mp.MODELS[name]
    own = default_style_layouts(m)
    # all-balanced on every GPU of 4 memory slices or more
    assert len(own) == len(m.profiles) + (m.total_slices >= 4)
    for layout in own.values():
        plan = pl.plan(m, layout)
        assert plan.counts == {k: v for k, v in layout.items() if v}


def test_judging_the_union_config_per_model() -> None:
    config = union_config()
    h200 = judge(config, mp.model("h200"))
    # its own 8 (7 profiles + balanced) fit, and GH200 144G's all-1g.18gb and
    # all-1g.18gb+me (same names); GB300's all-1g.35gb (7 one-slice instances) is refused:
    # H200's 1g.35gb is two slices, 4 at most; H200 NVL shares the layout key
    assert h200 == {"fits": 10, "refusals": 1, "unplannable": len(config.configs) - 11}
    b300 = judge(config, mp.model("b300"))
    # its own 8; no other GPU names a profile 1g.34gb, 1g.67gb, 2g.67gb, ...
    assert b300 == {"fits": 8, "refusals": 0, "unplannable": len(config.configs) - 8}
    gb300 = judge(config, mp.model("gb300"))
    # its own 8 and H200's all-1g.35gb (4 of GB300's one-slice 1g.35gb fit)
    assert gb300 == {"fits": 9, "refusals": 0, "unplannable": len(config.configs) - 9}
    gb200 = judge(config, mp.model("gb200"))
    # its own 8 and B200's all-1g.23gb and all-1g.23gb+me (same names on both)
    assert gb200 == {"fits": 10, "refusals": 0, "unplannable": len(config.configs) - 10}
    pg506 = judge(config, mp.model("pg506-96gb"))
    # its own 6 (5 profiles + balanced), the 6 of H100 96GB whose names it has (all but
    # the +me and 1g.24gb ones), and H100 NVL's all-1g.12gb and all-2g.24gb
    assert pg506 == {"fits": 14, "refusals": 0, "unplannable": len(config.configs) - 14}
