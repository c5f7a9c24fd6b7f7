"""The metric series table (``dra/metric_series.py``): lookups and the table's own shape.
Its agreement with the Kubernetes source is tests/integration/test_metric_series_source.py;
the rules that read it, tests/unit/test_monitoring_rule_series.py."""

from __future__ import annotations

import pytest
from ansible_collections.gpufleet.cluster.plugins.module_utils.dra import core as dra_core
from ansible_collections.gpufleet.cluster.plugins.module_utils.dra import metric_series as ms
from ansible_collections.gpufleet.cluster.plugins.module_utils.dra.metric_series import (
    SeriesChange,
)

pytestmark = pytest.mark.unit

KCM, SCHED, KUBELET, APISERVER = (
    dra_core.CONTROLLER_MANAGER,
    dra_core.SCHEDULER,
    dra_core.KUBELET,
    dra_core.APISERVER,
)


def _names(minor: int) -> set[str]:
    return {s.name for s in ms.served(minor)}


def test_served_names_the_claims_gauge_of_each_release() -> None:
    assert "resourceclaim_controller_allocated_resource_claims" in _names(33)
    assert "resourceclaim_controller_allocated_resource_claims" not in _names(34)
    assert "resourceclaim_controller_resource_claims" in _names(36)
    assert "resourceclaim_controller_resource_claims" not in _names(37)
    assert "dynamic_resource_allocation_resource_claims" in _names(37)
    assert "dra_resource_claims_in_use" not in _names(33)
    assert "dra_resource_claims_in_use" in _names(34)
    labels = {
        s.labels for s in ms.served(34) if s.name == "resourceclaim_controller_resource_claims"
    }
    assert labels == {("allocated", "admin_access")}


@pytest.mark.parametrize("minor", [30, 39, -1])
def test_a_minor_outside_the_table_is_refused_naming_the_range(minor: int) -> None:
    with pytest.raises(ms.UnknownMinor, match=r"1\.31 to 1\.38"):
        ms.served(minor)
    with pytest.raises(ms.UnknownMinor):
        ms.renamed_between(37, minor)


def test_the_1_37_rename_of_the_claim_series() -> None:
    assert ms.renamed_between(36, 37) == [
        SeriesChange(
            KCM,
            "resourceclaim_controller_creates_total",
            "dynamic_resource_allocation_resourceclaim_creates_total",
        ),
        SeriesChange(
            KCM,
            "resourceclaim_controller_resource_claims",
            "dynamic_resource_allocation_resource_claims",
        ),
        SeriesChange(
            SCHED,
            "scheduler_resourceclaim_creates_total",
            "dynamic_resource_allocation_resourceclaim_creates_total",
        ),
        SeriesChange(KUBELET, None, "dra_node_prepare_skips_total"),
        SeriesChange(KUBELET, None, "dra_node_unprepare_skips_total"),
    ]


def test_the_1_34_change_names_the_part_of_the_new_series() -> None:
    assert ms.renamed_between(33, 34) == [
        SeriesChange(APISERVER, None, "apiserver_resource_objects"),
        SeriesChange(
            KCM,
            "resourceclaim_controller_allocated_resource_claims",
            "resourceclaim_controller_resource_claims",
            '{allocated="true"}',
        ),
        SeriesChange(
            KCM,
            "resourceclaim_controller_create_attempts_total",
            "resourceclaim_controller_creates_total",
        ),
        SeriesChange(
            KCM,
            "resourceclaim_controller_create_failures_total",
            "resourceclaim_controller_creates_total",
            '{status="failure"}',
        ),
        SeriesChange(KUBELET, None, "dra_resource_claims_in_use"),
    ]


def test_a_change_over_several_minors_follows_the_successors_to_the_target() -> None:
    changes = {(c.component, c.old): c for c in ms.renamed_between(33, 37)}
    allocated = changes[(KCM, "resourceclaim_controller_allocated_resource_claims")]
    assert (allocated.new, allocated.new_selector) == (
        "dynamic_resource_allocation_resource_claims",
        '{allocated="true"}',
    )
    # 1.33's scheduler had no creation counter; 1.37's is new to it
    gained = {c.new for c in ms.renamed_between(33, 37) if c.component == SCHED and c.old is None}
    assert gained == {
        "dynamic_resource_allocation_resourceclaim_creates_total",
        "scheduler_dra_bindingconditions_allocations_total",
        "scheduler_dra_bindingconditions_wait_duration_seconds",
    }


@pytest.mark.parametrize(("a", "b"), [(37, 38), (38, 38), (31, 31)])
def test_no_change_where_the_names_stay(a: int, b: int) -> None:
    assert ms.renamed_between(a, b) == []


def test_a_downgrade_reads_as_the_loss_of_the_newer_names() -> None:
    back = ms.renamed_between(37, 36)
    assert SeriesChange(KCM, "dynamic_resource_allocation_resource_claims", None) in back


def test_histogram_series_map_to_their_histogram_only() -> None:
    assert (
        ms.base_name("dra_operations_duration_seconds_count") == "dra_operations_duration_seconds"
    )
    assert ms.base_name("dra_operations_duration_seconds") == "dra_operations_duration_seconds"
    assert ms.base_name("plugin_manager_total_plugins_count") is None
    assert ms.base_name("resourceclaim_controller_claims") is None


def test_rows_of_one_name_never_overlap_and_stay_in_the_table() -> None:
    for s in ms.SERIES:
        assert ms.OLDEST_MINOR <= s.first <= s.last <= ms.NEWEST_MINOR, s
        assert s.kind in (ms.COUNTER, ms.GAUGE, ms.HISTOGRAM), s
        assert set(s.components) <= set(dra_core.COMPONENTS), s
        others = [o for o in ms.rows(s.name) if o is not s]
        assert not [o for o in others if o.first <= s.last and s.first <= o.last], s.name


def test_each_successor_is_served_by_the_same_components_right_after() -> None:
    for s in ms.SERIES:
        if s.successor is None:
            assert not s.successor_selector, s
            continue
        after = {n.name for n in ms.served(s.last + 1) if set(s.components) <= set(n.components)}
        assert s.successor in after, s
        assert s.name not in {n.name for n in ms.served(s.last + 1)}, s


def test_a_name_that_ends_before_the_newest_minor_names_its_successor() -> None:
    ended = [
        s
        for s in ms.SERIES
        if s.last < ms.NEWEST_MINOR and not [o for o in ms.rows(s.name) if o.first == s.last + 1]
    ]
    assert ended, "the table records no rename"
    assert [s.name for s in ended if s.successor is None] == []
