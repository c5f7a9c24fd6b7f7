"""dra.next_release: what the minor after a plan's release removes or locks. Past the newest
generated release the facts are the release's own announcements (its source comments, read
by release_facts.announced_lifecycle, tested here on source text of both shapes Kubernetes
has used); inside the model they are the next release's generated facts."""

from __future__ import annotations

import pytest
from ansible_collections.gpufleet.cluster.plugins.module_utils.dra import gates as dra_gates
from ansible_collections.gpufleet.cluster.plugins.module_utils.dra import next_release as nr
from ansible_collections.gpufleet.cluster.plugins.module_utils.dra import plan as dra_plan
from ansible_collections.gpufleet.cluster.plugins.module_utils.dra import release_data

from gpufleet.build import release_facts as rf

pytestmark = pytest.mark.unit

#: The pinned release the 1.38 facts come from (a pre-release until 1.38.0 is pinned).
R38 = next(r.version for r in rf.load_fact_releases() if r.minor == 38)

NEWEST = release_data.newest_minor()


def changes(version: str) -> set[tuple[str, str]]:
    return {(c.subject, c.change) for c in nr.coming_changes(version)}


def test_after_1_38_the_source_announces_what_1_39_removes_and_locks() -> None:
    # The 1.38 source (v1.38.0-beta.0 when written): DRAAdminAccess "GA in 1.36; remove in 1.39";
    # DRAConsumableCapacity and DRAFractionalCapacityRange "LockToDefault: true in 1.39";
    # resource.k8s.io/v1beta2's lifecycle names removal in 1.39.
    assert changes("1.38") == {
        ("DRAAdminAccess", nr.REMOVE),
        ("DRAConsumableCapacity", nr.LOCK),
        ("DRAFractionalCapacityRange", nr.LOCK),
        ("resource.k8s.io/v1beta2", nr.STOP_SERVING),
    }
    text = "\n".join(nr.advice(R38))
    assert "Kubernetes 1.39 will remove the feature gate DRAAdminAccess" in text
    assert "DRAConsumableCapacity=false will not start" in text
    assert f"announced in the v{R38} source" in text


def test_inside_the_model_the_next_releases_facts_say_it() -> None:
    found = nr.coming_changes("1.37.2")
    for c in found:
        after = dra_gates.gate_state(c.subject, "1.38") if c.change != nr.STOP_SERVING else None
        if c.change == nr.REMOVE:
            assert after is not None and after.status == dra_gates.REMOVED, c
        elif c.change == nr.LOCK:
            assert after is not None and after.locked and after.default == c.value, c
    assert ("DynamicResourceAllocation", nr.REMOVE) in {(c.subject, c.change) for c in found}
    assert ("resource.k8s.io/v1beta1", nr.STOP_SERVING) in {(c.subject, c.change) for c in found}
    assert all(c.source == f"facts of v{R38}" for c in found)


def test_every_generated_release_gets_advice_without_error() -> None:
    for minor in release_data.releases():
        for sentence in nr.advice(f"1.{minor}"):
            assert sentence.startswith(f"Kubernetes 1.{minor + 1} will "), sentence


def test_plans_carry_the_advice() -> None:
    plan = dra_plan.plan_components(f"1.{NEWEST}")
    assert set(nr.advice(f"1.{NEWEST}")) <= set(plan.warnings)
    assert nr.advice(f"1.{NEWEST}"), "the newest release announces nothing"


VERSIONED = """\
\tDRAOld featuregate.Feature = "DRAOld"
\tDRANew featuregate.Feature = "DRANewName"
var defaultVersionedKubernetesFeatureGates = map[featuregate.Feature]featuregate.VersionedSpecs{
\tDRAOld: {
\t\t{Version: v("1.30"), Default: false},
\t\t{Version: v("1.36"), Default: true, LockToDefault: true}, // GA in 1.36; remove in 1.39
\t},
\tDRANew: {
\t\t{Version: v("1.38"), Default: true}, // LockToDefault: true in 1.39; remove in v1.42
\t},
\tDRAPast: {
\t\t{Version: v("1.37"), Default: true}, // locked in 1.37; remove in 1.38
\t},
}
"""

SINGLE_LINE = """\
\tAppArmor: {Default: true, PreRelease: featuregate.GA, LockToDefault: true}, // remove in 1.33
\tOther: {Default: false, PreRelease: featuregate.Beta},
"""


def test_announcements_are_read_from_both_shapes_of_the_gate_table() -> None:
    assert rf.announced_lifecycle(VERSIONED, 38) == {
        "DRANewName": {"lock": "1.39", "remove": "1.42"},
        "DRAOld": {"remove": "1.39"},
    }
    # DRAPast's announcements are of minors already out: not announcements any more.
    assert "DRAPast" not in rf.announced_lifecycle(VERSIONED, 38)
    assert rf.announced_lifecycle(SINGLE_LINE, 31) == {"AppArmor": {"remove": "1.33"}}
    assert rf.announced_lifecycle(SINGLE_LINE, 33) == {}
