"""Benchmark: planning from a node's own ``nvidia-smi mig -lgip``/``-lgipp`` capture is
bounded in time and memory, for the 7-instance GPUs and for a hostile capture.

Run it with ``.venv/bin/pytest -m bench tests/bench/test_mig_capture_planning.py``. Each
case parses the capture (``mig.profiles.model_from_nvidia_smi``) and plans one layout
(``mig.planner.plan``), fitting or refused with its explanation; the figures are the wall
time of the median of 3 runs and the peak memory traced (``tracemalloc``) of a fourth.
Each figure is printed beside its floor and the test fails when one is missed. The
former search (a bitmask of the placed instances per state) did not finish
``hostile-21x3g`` in 60 s.
"""

from __future__ import annotations

import statistics
import time
import tracemalloc
from pathlib import Path

import pytest
from ansible_collections.gpufleet.cluster.plugins.module_utils.mig import placement as mpla
from ansible_collections.gpufleet.cluster.plugins.module_utils.mig import planner as pl
from ansible_collections.gpufleet.cluster.plugins.module_utils.mig import profiles as mp

from tests.unit.mig import mig_captures as mc

pytestmark = pytest.mark.bench

DATA = Path(__file__).resolve().parents[1] / "unit" / "data" / "gpu"
H200_LGIP = (DATA / "h200-single" / "smi-mig-lgip.txt").read_text()
H200_LGIPP = (DATA / "h200-single" / "smi-mig-lgipp.txt").read_text()
A30_LGIP = (DATA / "public" / "a30-24gb" / "lgip-all-used.txt").read_text()
A30_LGIPP = (DATA / "public" / "a30-24gb" / "lgipp.txt").read_text()
HOSTILE = mc.hostile_rows()
HOSTILE_LGIP, HOSTILE_LGIPP = mc.lgip(HOSTILE), mc.lgipp(HOSTILE)

# Floors: seconds (median wall time) and MiB (peak traced memory) per case.
REAL_FLOOR = (0.25, 8.0)
HOSTILE_FLOOR = (3.0, 64.0)

CASES = [
    ("h200-7x1g", H200_LGIP, H200_LGIPP, {"1g.18gb": 7}, "fit", REAL_FLOOR),
    ("h200-6x1g+2g", H200_LGIP, H200_LGIPP, {"1g.18gb": 6, "2g.35gb": 1}, "refused", REAL_FLOOR),
    ("h200-8x1g", H200_LGIP, H200_LGIPP, {"1g.18gb": 8}, "refused", REAL_FLOOR),
    (
        "h200-mixed-6",
        H200_LGIP,
        H200_LGIPP,
        {"1g.18gb": 4, "1g.18gb+me": 1, "1g.35gb": 1},
        "fit",
        REAL_FLOOR,
    ),
    (
        "h200-refused-mixed-8",
        H200_LGIP,
        H200_LGIPP,
        {"1g.18gb": 5, "1g.18gb+me": 1, "1g.35gb": 1, "2g.35gb": 1},
        "refused",
        REAL_FLOOR,
    ),
    ("a30-4x1g", A30_LGIP, A30_LGIPP, {"1g.6gb": 4}, "fit", REAL_FLOOR),
    (
        "hostile-40-kinds",
        HOSTILE_LGIP,
        HOSTILE_LGIPP,
        {r.name: 1 for r in HOSTILE[:40]},
        "refused",
        HOSTILE_FLOOR,
    ),
    (
        "hostile-20x2",
        HOSTILE_LGIP,
        HOSTILE_LGIPP,
        {r.name: 2 for r in HOSTILE[:20]},
        "refused",
        HOSTILE_FLOOR,
    ),
    ("hostile-30-kinds", HOSTILE_LGIP, HOSTILE_LGIPP, {r.name: 1 for r in HOSTILE[:30]}, "fit",
     HOSTILE_FLOOR),
    ("hostile-21x3g", HOSTILE_LGIP, HOSTILE_LGIPP, {HOSTILE[2].name: 21}, "refused",
     HOSTILE_FLOOR),
]  # fmt: skip


def _once(lgip: str, lgipp: str, layout: dict[str, int]) -> str:
    model = mp.model_from_nvidia_smi("GPU from the capture", 0, lgip, lgipp)
    try:
        pl.plan(model, layout)
    except mpla.LayoutDoesNotFit as exc:
        assert exc.reason  # the refusal is explained
        return "refused"
    return "fit"


@pytest.mark.parametrize(
    ("case", "lgip", "lgipp", "layout", "verdict", "floor"), CASES, ids=[c[0] for c in CASES]
)
def test_planning_from_a_capture_is_bounded(
    case: str, lgip: str, lgipp: str, layout: dict, verdict: str, floor: tuple[float, float]
) -> None:
    times = []
    for _ in range(3):
        t0 = time.perf_counter()
        got = _once(lgip, lgipp, layout)
        times.append(time.perf_counter() - t0)
        assert got == verdict, (case, got)
    tracemalloc.start()
    try:
        _once(lgip, lgipp, layout)
        peak_mib = tracemalloc.get_traced_memory()[1] / 2**20
    finally:
        tracemalloc.stop()
    wall = statistics.median(times)
    max_s, max_mib = floor
    print(
        f"\n{case}: {sum(layout.values())} instances, {verdict}: {wall:.3f} s "
        f"(floor {max_s} s) {'pass' if wall <= max_s else 'MISS'}; peak {peak_mib:.1f} MiB "
        f"(floor {max_mib} MiB) {'pass' if peak_mib <= max_mib else 'MISS'}"
    )
    assert wall <= max_s, f"{case}: {wall:.3f} s over the floor of {max_s} s"
    assert peak_mib <= max_mib, f"{case}: {peak_mib:.1f} MiB over the floor of {max_mib} MiB"
