"""What to destroy and create to go from the GPU's MIG instances to a planned layout
(``plugins/module_utils/mig/placement.py``).
"""

from __future__ import annotations

import pytest
from ansible_collections.gpufleet.cluster.plugins.module_utils.mig import placement as mpla
from ansible_collections.gpufleet.cluster.plugins.module_utils.mig import planner as pl
from ansible_collections.gpufleet.cluster.plugins.module_utils.mig import profiles as mp

from tests.unit.mig.mig_data import DATA

pytestmark = pytest.mark.unit


def a100_pcie_current() -> list[dict]:
    return mp.parse_lgi((DATA / "public/a100-pcie-40gb/lgi.txt").read_text())


def test_diff_same_layout_keeps_everything() -> None:
    model = mp.model("NVIDIA A100-PCIE-40GB")
    current = a100_pcie_current()
    target = pl.plan(model, {"3g.20gb": 1, "2g.10gb": 1, "1g.5gb": 2}, current=current)
    d = mpla.diff(current, target)
    assert not d.changed
    assert sorted(g.instance_id for g in d.keep) == [1, 6, 11, 12]


def test_diff_new_layout_keeps_matching_gi() -> None:
    model = mp.model("NVIDIA A100-PCIE-40GB")
    current = a100_pcie_current()
    target = pl.plan(model, {"3g.20gb": 2}, current=current)
    d = mpla.diff(current, target)
    assert [(g.profile, g.start) for g in d.keep] == [("3g.20gb", 4)]
    assert sorted(g.instance_id for g in d.destroy) == [6, 11, 12]
    assert [(p.profile, p.start) for p in d.create] == [("3g.20gb", 0)]
    assert d.changed


def test_diff_reads_simulator_state_instances() -> None:
    state_gi = {
        "id": 1,
        "profile": "1g.18gb",
        "profile_id": 19,
        "placement_start": 0,
        "placement_size": 1,
    }
    target = pl.plan(mp.model("h200"), {"1g.18gb": 2})
    d = mpla.diff([state_gi], target)
    assert [g.instance_id for g in d.keep] == [1]
    assert [(p.profile, p.start) for p in d.create] == [("1g.18gb", 1)]


def test_diff_orders_creates_largest_first() -> None:
    target = pl.plan(mp.model("h200"), {"1g.18gb": 2, "2g.35gb": 1, "3g.71gb": 1})
    sizes = [p.size for p in mpla.diff([], target).create]
    assert sizes == sorted(sizes, reverse=True)


def test_diff_refuses_incomplete_instance() -> None:
    with pytest.raises(ValueError, match="start"):
        mpla.diff([{"profile": "1g.18gb", "profile_id": 19}], pl.plan(mp.model("h200"), {}))
