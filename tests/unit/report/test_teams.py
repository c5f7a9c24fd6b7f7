"""GPU memory and devices held per team and namespace (``report/teams.py``): allocated,
idle and leaked, summed from a small fleet built from API-shaped objects; every figure is
derived by hand from those objects."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from ansible_collections.gpufleet.cluster.plugins.module_utils.report import fleet as fr
from ansible_collections.gpufleet.cluster.plugins.module_utils.report import teams as ft

from tests.unit.report.test_fleet import DRIVER, GI, claim, device, node, pod, rslice

pytestmark = pytest.mark.unit

LABEL = ft.DEFAULT_TEAM_LABEL


def moved(obj: dict[str, Any], namespace: str) -> dict[str, Any]:
    out = copy.deepcopy(obj)
    out["metadata"]["namespace"] = namespace
    return out


def namespace(name: str, team: str | None = None) -> dict[str, Any]:
    return {"metadata": {"name": name, "labels": {LABEL: team} if team else {}}}


#: Node a: two whole H200 (141Gi each); node b: one H100 carved into MIG devices
#: 3g.40gb (40Gi) and 1g.10gb (10Gi, 10Gi).
SLICES = [
    rslice("a", [device("gpu-0", "NVIDIA H200", "141Gi"), device("gpu-1", "NVIDIA H200", "141Gi")]),
    rslice(
        "b",
        [
            device("mig-0", "NVIDIA H100", "40Gi", "3g.40gb"),
            device("mig-1", "NVIDIA H100", "10Gi", "1g.10gb"),
            device("mig-2", "NVIDIA H100", "10Gi", "1g.10gb"),
        ],
    ),
]
NODES = [node("a", "NVIDIA-H200"), node("b", "NVIDIA-H100")]
# team vision: train (ml-train, gpu-0, running, idle), old (ml-dev, gpu-1, leaked),
# tune (ml-dev, mig-0, running); no team: nb (sandbox, mig-1, running, idle); mig-2 free
CLAIMS = [
    moved(claim("train", allocated=[("a", "gpu-0")], reserved=["trainer"]), "ml-train"),
    moved(claim("old", allocated=[("a", "gpu-1")], reserved=["gone"]), "ml-dev"),
    moved(claim("tune", allocated=[("b", "mig-0")], reserved=["tuner"]), "ml-dev"),
    moved(claim("nb", allocated=[("b", "mig-1")], reserved=["notebook"]), "sandbox"),
]
PODS = [
    moved(pod("trainer", "train"), "ml-train"),
    moved(pod("tuner", "tune"), "ml-dev"),
    moved(pod("notebook", "nb"), "sandbox"),
]
NAMESPACES = [namespace("ml-train", "vision"), namespace("ml-dev", "vision"), namespace("sandbox")]
ACTIVITY = {
    f"{DRIVER}/a/gpu-0": 0.5,
    f"{DRIVER}/a/gpu-1": 0.0,
    f"{DRIVER}/b/mig-0": 80.0,
    f"{DRIVER}/b/mig-1": 1.0,
}


def build(activity: dict[str, float] | None = ACTIVITY, namespaces: Any = NAMESPACES) -> dict:
    return fr.build_report(
        SLICES, CLAIMS, PODS, NODES, driver=DRIVER, activity=activity, namespaces=namespaces
    )


def by(rows: list[dict[str, Any]], key: str) -> dict[str, dict[str, Any]]:
    return {row[key]: row for row in rows}


def test_a_team_sums_its_namespaces_idle_leaked_and_mig_memory() -> None:
    teams = build()["teams"]
    assert teams["label"] == LABEL and teams["idle_measured"] and teams["namespaces_listed"]
    vision = by(teams["teams"], "team")["vision"]
    assert vision["namespaces"] == ["ml-dev", "ml-train"]
    assert vision["devices_allocated"] == 3
    assert vision["memory_allocated"] == (141 + 141 + 40) * GI
    # gpu-0 (0.5%) and gpu-1 (0%, leaked) are below 5%; the MIG device at 80% is not
    assert (vision["devices_idle"], vision["memory_idle"]) == (2, 282 * GI)
    assert (vision["devices_leaked"], vision["memory_leaked"]) == (1, 141 * GI)


def test_a_namespace_without_the_label_has_no_team() -> None:
    teams = build()["teams"]
    none = by(teams["teams"], "team")[ft.NO_TEAM]
    assert none["namespaces"] == ["sandbox"]
    assert (none["devices_allocated"], none["memory_allocated"]) == (1, 10 * GI)
    assert (none["devices_idle"], none["memory_idle"]) == (1, 10 * GI)
    assert none["devices_leaked"] == 0


def test_per_namespace_rows_name_their_team_most_idle_first() -> None:
    rows = build()["teams"]["namespaces"]
    assert [(r["namespace"], r["team"]) for r in rows] == [
        ("ml-dev", "vision"),
        ("ml-train", "vision"),
        ("sandbox", ft.NO_TEAM),
    ]
    dev = rows[0]
    assert (dev["memory_allocated"], dev["memory_idle"], dev["memory_leaked"]) == (
        181 * GI,
        141 * GI,
        141 * GI,
    )
    assert [r["team"] for r in build()["teams"]["teams"]] == ["vision", ft.NO_TEAM]


def test_without_activity_idle_is_not_measured() -> None:
    teams = build(activity=None)["teams"]
    assert not teams["idle_measured"]
    assert all(r["devices_idle"] == 0 == r["memory_idle"] for r in teams["teams"])
    assert by(teams["teams"], "team")["vision"]["memory_leaked"] == 141 * GI


def test_namespaces_not_listed_make_every_team_no_team() -> None:
    teams = build(namespaces=None)["teams"]
    assert not teams["namespaces_listed"]
    assert [r["team"] for r in teams["teams"]] == [ft.NO_TEAM]
    assert teams["teams"][0]["memory_allocated"] == (141 + 141 + 40 + 10) * GI


def test_another_label_key_and_unreadable_namespaces() -> None:
    namespaces = [
        {"metadata": {"name": "ml-train", "labels": {"org/owner": "alice"}}},
        {"metadata": {"name": "ml-dev", "labels": ["not", "a", "mapping"]}},
        "not an object",
    ]
    doc = fr.build_report(
        SLICES, CLAIMS, PODS, NODES, driver=DRIVER, namespaces=namespaces, team_label="org/owner"
    )
    teams = by(doc["teams"]["teams"], "team")
    assert teams["alice"]["namespaces"] == ["ml-train"]
    assert teams[ft.NO_TEAM]["namespaces"] == ["ml-dev", "sandbox"]
    assert doc["cluster"]["objects_skipped"] == {"namespaces": 2}


def test_waste_sums_what_it_is_given() -> None:
    labels = ft.namespace_labels([namespace("a", "t"), namespace("b", "t"), {"metadata": {}}])
    assert labels == {"a": {LABEL: "t"}, "b": {LABEL: "t"}}
    got = ft.waste(
        [("d1", "a/c1", 10), ("d2", "b/c2", 20), ("d3", "b/c3", 5), ("d4", "c/c4", 7)],
        ["d2", "d4"],
        ["b/c3"],
        labels,
    )
    t = by(got["teams"], "team")["t"]
    assert (t["devices_allocated"], t["memory_allocated"]) == (3, 35)
    assert (t["devices_idle"], t["memory_idle"], t["memory_leaked"]) == (1, 20, 5)
    assert by(got["teams"], "team")[ft.NO_TEAM]["namespaces"] == ["c"]
    assert [r["team"] for r in got["teams"]] == ["t", ft.NO_TEAM]
