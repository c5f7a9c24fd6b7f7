"""The MIG tables embedded in the simulator's kubelet plugin
(``gpufleet.lab.gpusim.plugin_profiles``) are the collection's, regenerated."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from ansible_collections.gpufleet.cluster.plugins.module_utils.mig import profiles as mig_profiles

from gpufleet.lab.gpusim import plugin_profiles as pp

pytestmark = pytest.mark.unit

ROOT = Path(__file__).parents[3]


def test_embedded_file_is_current() -> None:
    assert (ROOT / pp.RELATIVE_PATH).read_text(encoding="utf-8") == pp.render(), (
        "run python -m gpufleet.lab.gpusim.plugin_profiles"
    )
    assert pp.main(["--check"]) == 0


def test_every_model_with_a_table_is_embedded() -> None:
    doc = json.loads(pp.render())
    embedded = {m["names"][0] for m in doc["models"]}
    assert embedded == {m.name for m in mig_profiles.MODELS.values() if m.profiles}
    (h200,) = [m for m in doc["models"] if m["names"][0] == "NVIDIA H200"]
    row = {p["name"]: p for p in h200["profiles"]}["7g.141gb"]
    assert (row["id"], row["slices"], row["memory_mib"], row["placements"]) == (0, 8, 143360, [0])


def test_bad_arguments() -> None:
    assert pp.main(["--write"]) == 2
