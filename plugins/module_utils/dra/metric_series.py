# Copyright: gpufleet contributors
# Apache License 2.0 (see LICENSE)
"""The metric series of the Kubernetes components that DRA monitoring reads, per release:
name, component, labels, the minors that serve it and the file of the Go module that
defines it. Minors of 1.x (``37`` is Kubernetes 1.37).

The one owner of these names: the monitoring role's alerting rules read only series of this
table (tests/unit/dra/test_metric_series.py renders them and checks), docs/monitoring.md
shows it, and ``gpufleet upgrade --plan`` warns from it when a step renames or removes a
series (``renamed_between``). tests/integration/test_metric_series_source.py reads the cited
file of each pinned release and checks both ways: each row is defined in exactly the minors
it names, and every DRA series those files define has a row.

A series registered only behind a feature gate names it in ``gate``: a component with the
gate off serves no such series even in a release that defines it.
"""

from __future__ import annotations

from dataclasses import dataclass

from ansible_collections.gpufleet.cluster.plugins.module_utils.dra import core as dra_core

#: The minors the table knows: the releases whose facts the version model is generated
#: from (gpufleet/build/releases.yaml ``release_facts``).
OLDEST_MINOR = 31
NEWEST_MINOR = 38

KUBERNETES = "k8s.io/kubernetes"
DRA_LIBRARY = "k8s.io/dynamic-resource-allocation"
APISERVER_LIBRARY = "k8s.io/apiserver"
COMPONENT_BASE = "k8s.io/component-base"

EVERY_COMPONENT = dra_core.COMPONENTS
KCM = dra_core.CONTROLLER_MANAGER
SCHEDULER = dra_core.SCHEDULER
KUBELET = dra_core.KUBELET
APISERVER = dra_core.APISERVER

COUNTER, GAUGE, HISTOGRAM = "counter", "gauge", "histogram"
#: The series a histogram ``x`` exposes besides its buckets' name: ``x_count``, ``x_sum``.
HISTOGRAM_SUFFIXES = ("_bucket", "_count", "_sum")

_KUBELET_METRICS = "pkg/kubelet/metrics/metrics.go"
_PLUGIN_MANAGER = "pkg/kubelet/pluginmanager/metrics/metrics.go"
_SCHEDULER_METRICS = "pkg/scheduler/metrics/metrics.go"
_CLAIM_CONTROLLER = "pkg/controller/resourceclaim/metrics/metrics.go"
_DRA_CLAIM_METRICS = "resourceclaim/metrics/metrics.go"
_STORAGE_METRICS = "pkg/storage/etcd3/metrics/metrics.go"
_FEATURE_METRICS = "metrics/prometheus/feature/metrics.go"


class UnknownMinor(ValueError):
    """A minor outside ``OLDEST_MINOR``..``NEWEST_MINOR``."""


@dataclass(frozen=True)
class Series:
    """One series in a run of consecutive minors ``first``..``last`` with the same labels.

    ``family`` groups the series that measure one thing across renames (an alert that reads
    a family reads, for each minor and component, one of its series served there);
    ``successor`` is the series (with ``successor_selector``, the part of it that this one
    counted) that replaces it in the minor after ``last``; ``gate`` the feature gate
    without which the component does not register it."""

    name: str
    components: tuple[str, ...]
    kind: str
    labels: tuple[str, ...]
    first: int
    last: int
    module: str
    path: str
    family: str
    successor: str | None = None
    successor_selector: str = ""
    gate: str | None = None

    def served_in(self, minor: int) -> bool:
        return self.first <= minor <= self.last

    @property
    def source(self) -> str:
        """``k8s.io/kubernetes pkg/kubelet/metrics/metrics.go``."""
        return f"{self.module} {self.path}"


def _s(name, components, kind, labels, minors, module, path, family, **more) -> Series:
    return Series(
        name, components, kind, labels, minors[0], minors[1], module, path, family, **more
    )


_ALL = (OLDEST_MINOR, NEWEST_MINOR)

#: The table, by component. Sources: the ``path`` of ``module`` at each pinned release.
SERIES: tuple[Series, ...] = (
    # kubelet
    _s("dra_operations_duration_seconds", (KUBELET,), HISTOGRAM, ("operation_name", "is_error"),
       (32, 38), KUBERNETES, _KUBELET_METRICS, "prepare_operations"),
    _s("dra_grpc_operations_duration_seconds", (KUBELET,), HISTOGRAM,
       ("driver_name", "method_name", "grpc_status_code"),
       (32, 38), KUBERNETES, _KUBELET_METRICS, "plugin_calls"),
    _s("dra_resource_claims_in_use", (KUBELET,), GAUGE, ("driver_name",),
       (34, 38), KUBERNETES, _KUBELET_METRICS, "claims_in_use"),
    _s("dra_node_prepare_skips_total", (KUBELET,), COUNTER, ("driver_name",),
       (37, 38), KUBERNETES, _KUBELET_METRICS, "prepare_skips"),
    _s("dra_node_unprepare_skips_total", (KUBELET,), COUNTER, ("driver_name",),
       (37, 38), KUBERNETES, _KUBELET_METRICS, "unprepare_skips"),
    _s("plugin_manager_total_plugins", (KUBELET,), GAUGE, ("socket_path", "state"),
       _ALL, KUBERNETES, _PLUGIN_MANAGER, "registered_plugins"),
    # kube-scheduler
    _s("scheduler_unschedulable_pods", (SCHEDULER,), GAUGE, ("plugin", "profile"),
       _ALL, KUBERNETES, _SCHEDULER_METRICS, "unschedulable_pods"),
    _s("scheduler_resourceclaim_creates_total", (SCHEDULER,), COUNTER, ("status",),
       (35, 36), KUBERNETES, _SCHEDULER_METRICS, "claim_creates",
       successor="dynamic_resource_allocation_resourceclaim_creates_total",
       gate="DRAExtendedResource"),
    _s("scheduler_dra_bindingconditions_allocations_total", (SCHEDULER,), COUNTER,
       ("profile", "driver", "status"), (36, 38), KUBERNETES, _SCHEDULER_METRICS,
       "bindingconditions_allocations", gate="DRADeviceBindingConditions"),
    _s("scheduler_dra_bindingconditions_wait_duration_seconds", (SCHEDULER,), HISTOGRAM,
       ("profile", "driver", "status"), (36, 38), KUBERNETES, _SCHEDULER_METRICS,
       "bindingconditions_wait", gate="DRADeviceBindingConditions"),
    # kube-controller-manager (and kube-scheduler for the creation counter from 1.37)
    _s("resourceclaim_controller_create_attempts_total", (KCM,), COUNTER, (),
       (31, 33), KUBERNETES, _CLAIM_CONTROLLER, "claim_creates",
       successor="resourceclaim_controller_creates_total"),
    _s("resourceclaim_controller_create_failures_total", (KCM,), COUNTER, (),
       (31, 33), KUBERNETES, _CLAIM_CONTROLLER, "claim_creates",
       successor="resourceclaim_controller_creates_total",
       successor_selector='{status="failure"}'),
    _s("resourceclaim_controller_creates_total", (KCM,), COUNTER, ("status", "admin_access"),
       (34, 36), KUBERNETES, _CLAIM_CONTROLLER, "claim_creates",
       successor="dynamic_resource_allocation_resourceclaim_creates_total"),
    _s("dynamic_resource_allocation_resourceclaim_creates_total", (KCM, SCHEDULER), COUNTER,
       ("status", "admin_access", "owner_api_group", "owner_api_kind"),
       (37, 38), DRA_LIBRARY, _DRA_CLAIM_METRICS, "claim_creates"),
    _s("resourceclaim_controller_resource_claims", (KCM,), GAUGE, (),
       (32, 33), KUBERNETES, _CLAIM_CONTROLLER, "claims"),
    _s("resourceclaim_controller_allocated_resource_claims", (KCM,), GAUGE, (),
       (32, 33), KUBERNETES, _CLAIM_CONTROLLER, "claims",
       successor="resourceclaim_controller_resource_claims",
       successor_selector='{allocated="true"}'),
    _s("resourceclaim_controller_resource_claims", (KCM,), GAUGE, ("allocated", "admin_access"),
       (34, 34), KUBERNETES, _CLAIM_CONTROLLER, "claims"),
    _s("resourceclaim_controller_resource_claims", (KCM,), GAUGE,
       ("allocated", "admin_access", "source"), (35, 36), KUBERNETES, _CLAIM_CONTROLLER,
       "claims", successor="dynamic_resource_allocation_resource_claims"),
    _s("dynamic_resource_allocation_resource_claims", (KCM,), GAUGE,
       ("allocated", "admin_access", "source"), (37, 38), KUBERNETES, _CLAIM_CONTROLLER,
       "claims"),
    # kube-apiserver
    _s("apiserver_storage_objects", (APISERVER,), GAUGE, ("resource",),
       _ALL, APISERVER_LIBRARY, _STORAGE_METRICS, "stored_objects"),
    _s("apiserver_resource_objects", (APISERVER,), GAUGE, ("group", "resource"),
       (34, 38), APISERVER_LIBRARY, _STORAGE_METRICS, "stored_objects"),
    # every component
    _s("kubernetes_feature_enabled", EVERY_COMPONENT, GAUGE, ("name", "stage"),
       _ALL, COMPONENT_BASE, _FEATURE_METRICS, "feature_gates"),
)  # fmt: skip


@dataclass(frozen=True)
class SeriesChange:
    """Across an upgrade, on ``component``: ``old`` (served before, not after) becomes
    ``new`` (``new_selector`` the part of it that ``old`` counted); ``new`` None: removed
    without a successor; ``old`` None: a series the target adds."""

    component: str
    old: str | None
    new: str | None
    new_selector: str = ""


def known_minors() -> range:
    return range(OLDEST_MINOR, NEWEST_MINOR + 1)


def _check(minor: int) -> int:
    if not OLDEST_MINOR <= minor <= NEWEST_MINOR:
        raise UnknownMinor(
            f"the metric series of Kubernetes 1.{minor} are not known: the table "
            f"(dra/metric_series.py) knows 1.{OLDEST_MINOR} to 1.{NEWEST_MINOR}"
        )
    return minor


def served(minor: int) -> tuple[Series, ...]:
    """The rows served by Kubernetes 1.``minor``. Raises UnknownMinor outside the table."""
    _check(minor)
    return tuple(s for s in SERIES if s.served_in(minor))


def rows(name: str) -> tuple[Series, ...]:
    """Every row of series ``name`` (one per run of minors with the same labels)."""
    return tuple(s for s in SERIES if s.name == name)


def base_name(name: str) -> str | None:
    """The table's name of a series as a query writes it: ``name`` itself, or the
    histogram a ``_count``/``_sum``/``_bucket`` series belongs to; None if neither."""
    if rows(name):
        return name
    for suffix in HISTOGRAM_SUFFIXES:
        base = name.removesuffix(suffix)
        if base != name and any(s.kind == HISTOGRAM for s in rows(base)):
            return base
    return None


def _names(minor: int, component: str) -> set[str]:
    return {s.name for s in served(minor) if component in s.components}


def _successor(name: str, component: str, to_minor: int) -> tuple[str | None, str]:
    """Follow ``successor`` from ``name`` to a series ``component`` serves at ``to_minor``."""
    selector = ""
    seen = {name}
    current = name
    while True:
        nexts = [s for s in rows(current) if s.successor]
        if not nexts:
            return None, selector
        row = max(nexts, key=lambda s: s.last)
        current = row.successor  # type: ignore[assignment]
        selector = selector or row.successor_selector
        if current in seen:
            return None, selector
        seen.add(current)
        if current in _names(to_minor, component):
            return current, selector


def renamed_between(from_minor: int, to_minor: int) -> list[SeriesChange]:
    """What the monitoring of a fleet loses and gains going from 1.``from_minor`` to
    1.``to_minor``, per component: each series served before and not after with the
    series that replaces it (or None), then each series the target adds that replaces
    none. Sorted by component, then old name. Raises UnknownMinor outside the table."""
    _check(from_minor)
    _check(to_minor)
    changes: list[SeriesChange] = []
    for component in EVERY_COMPONENT:
        before, after = _names(from_minor, component), _names(to_minor, component)
        replacing: set[str] = set()
        for old in sorted(before - after):
            new, selector = _successor(old, component, to_minor)
            changes.append(SeriesChange(component, old, new, selector if new else ""))
            if new:
                replacing.add(new)
        for new in sorted(after - before - replacing):
            changes.append(SeriesChange(component, None, new))
    return changes
