# Copyright: gpufleet contributors
# Apache License 2.0 (see LICENSE)
"""Validation checks of the GPU nodes: ``nodes.gpu-labels``, ``nodes.plugin-running`` (the
DRA kubelet plugin pod on every GPU node of a DRA pool), ``nodes.resourceslices`` (devices
published that match the node's GPUs and the wanted MIG layout: ``expected_devices``, on
every GPU node of a DRA pool; on a dynamic-MIG node, whose devices consume counters, its full
GPUs only: ``validate.dynamic_mig.compare_published_gpus``) and ``nodes.orphan-slices``
(slices of a node that is gone, or of a driver whose plugin does not run on the node: the
configured driver and, for NVIDIA's chart, its ComputeDomain driver
``compute-domain.nvidia.com``, whose plugin is the ``compute-domains`` container of the
same pods). The GPU nodes whose pool declares the device-plugin path
(``validate.gpu_paths.declared_paths``) run no DRA kubelet plugin and publish no
ResourceSlice: the two DRA checks leave them out, ``nodes.device-plugin-gpus`` judges them.
Source of the ResourceSlice fields: ``spec.nodeName``,
``spec.driver``, ``spec.pool.generation`` and devices
(``staging/src/k8s.io/api/resource/v1/types.go``).
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable, Mapping
from typing import Any

from ansible_collections.gpufleet.cluster.plugins.module_utils.claims import slices as cslices
from ansible_collections.gpufleet.cluster.plugins.module_utils.cluster.listing import (
    MIB,
    Listing,
    Settings,
    label_selector_matches,
    labels_of,
    name_of,
    node_names,
    parse_label_selector,
)
from ansible_collections.gpufleet.cluster.plugins.module_utils.dra.resource_versions import (
    device_fields,
)
from ansible_collections.gpufleet.cluster.plugins.module_utils.dra_driver import chart as ddc
from ansible_collections.gpufleet.cluster.plugins.module_utils.dra_driver import (
    gpu_paths as gp,
)
from ansible_collections.gpufleet.cluster.plugins.module_utils.kube import client as vk
from ansible_collections.gpufleet.cluster.plugins.module_utils.kube.quantity import (
    QuantityError,
    parse_quantity,
)
from ansible_collections.gpufleet.cluster.plugins.module_utils.validate.dynamic_mig import (
    compare_published_gpus,
    is_dynamic,
)
from ansible_collections.gpufleet.cluster.plugins.module_utils.validate.gpu_paths import (
    declared_paths,
)
from ansible_collections.gpufleet.cluster.plugins.module_utils.validate.report import (
    FAIL,
    Check,
    Evidence,
    finish,
    skipped,
)

__all__ = [
    "nodes_checks",
]


# ------------------------------------------------------------------ nodes


def _gpu_nodes(listing: Listing, settings: Settings) -> tuple[list[str], list[str]]:
    """(GPU nodes of the inventory that have a Node object, those that do not)."""
    names = node_names(listing)
    return [n for n in settings.gpu_nodes if n in names], [
        n for n in settings.gpu_nodes if n not in names
    ]


def _dra_nodes(listing: Listing, settings: Settings) -> tuple[list[str], list[str]]:
    """(GPU nodes of the inventory with a Node object whose pool is on DRA, or declares
    both paths; those whose pool declares the device-plugin path)."""
    present, _missing = _gpu_nodes(listing, settings)
    declared = declared_paths(settings)
    plugin = [n for n in present if declared[n].path == gp.DEVICE_PLUGIN]
    on_plugin = set(plugin)
    return [n for n in present if n not in on_plugin], plugin


def _left_out(plugin: list[str]) -> Evidence:
    """The evidence that names the device-plugin nodes a DRA check leaves out."""
    shown = ", ".join(plugin[:10]) + (f" and {len(plugin) - 10} more" if len(plugin) > 10 else "")
    return Evidence(
        f"inventory group {gp.path_group(gp.DEVICE_PLUGIN)}",
        f"left out: {len(plugin)} GPU node(s) of device-plugin pools ({shown or 'none'}); "
        "nodes.device-plugin-gpus judges them",
    )


def _left_out_summary(plugin: list[str]) -> str:
    return f" ({len(plugin)} of device-plugin pools left out)" if plugin else ""


def _all_on_device_plugin(plugin: list[str]) -> str:
    return (
        f"every GPU node with a Node object is on the device-plugin path "
        f"({gp.path_group(gp.DEVICE_PLUGIN)}, {len(plugin)} node(s)): no DRA kubelet plugin "
        "or ResourceSlice is expected"
        if plugin
        else "no GPU node of the inventory has a Node object"
    )


class _PluginPods:
    """The fold (``kube.client.PagedList.derive``) of ``plugin_pods``."""

    def __init__(self, namespace: str, selector: str) -> None:
        self.namespace = namespace
        self.selector = parse_label_selector(selector)
        self.out: dict[str, list[Mapping[str, Any]]] = {}

    def add(self, pod: Mapping[str, Any]) -> None:
        meta = pod.get("metadata") or {}
        if self.namespace and meta.get("namespace") != self.namespace:
            return
        if not label_selector_matches(self.selector, labels_of(pod)):
            return
        node = (pod.get("spec") or {}).get("nodeName")
        if node:
            self.out.setdefault(node, []).append(pod)

    def result(self) -> dict[str, list[Mapping[str, Any]]]:
        return self.out


def plugin_pods_fold(settings: Settings) -> tuple[str, Callable[[], _PluginPods]]:
    """The key and the fold of ``plugin_pods``' walk of the pods, for a caller that walks
    them once for several readers (``validate.cluster.all_checks``)."""
    ns, selector = settings.plugin_namespace, settings.plugin_selector
    return f"dra-plugin-pods {ns!r} {selector!r}", lambda: _PluginPods(ns, selector)


def plugin_pods(listing: Listing, settings: Settings) -> dict[str, list[Mapping[str, Any]]]:
    """Node -> the driver's kubelet plugin pods on it (``plugin_namespace``,
    ``plugin_selector``). Of a ``PagedList`` of pods, the value is kept there and shared:
    read it, do not change it."""
    pods: dict[str, list[Mapping[str, Any]]] = vk.folded(
        listing.pods, dict([plugin_pods_fold(settings)])
    )[0]
    return pods


def _pod_running(pod: Mapping[str, Any]) -> bool:
    st = pod.get("status") or {}
    if st.get("phase") != "Running" or (pod.get("metadata") or {}).get("deletionTimestamp"):
        return False
    return all(cs.get("ready") for cs in st.get("containerStatuses") or []) and bool(
        st.get("containerStatuses")
    )


def _serves(pod: Mapping[str, Any], driver: str) -> bool:
    """The plugin pod runs and the container that serves ``driver`` is ready
    (``dra_driver.chart.PLUGIN_CONTAINERS``; a pod without containers of those names
    counts when all its containers are ready)."""
    if not _pod_running(pod):
        name = ddc.PLUGIN_CONTAINERS.get(driver)
        st = pod.get("status") or {}
        if name is None or st.get("phase") != "Running":
            return False
        if (pod.get("metadata") or {}).get("deletionTimestamp"):
            return False
        return any(
            cs.get("name") == name and cs.get("ready") for cs in st.get("containerStatuses") or []
        )
    return True


def nodes_checks(listing: Listing, settings: Settings) -> list[Check]:
    plugins = plugin_pods(listing, settings)  # one walk over the pods for both checks
    dra, plugin = _dra_nodes(listing, settings)
    return [
        _labels_check(listing, settings),
        _plugin_check(listing, settings, plugins, (dra, plugin)),
        _slices_check(listing, settings, (dra, plugin)),
        _orphans_check(listing, settings, plugins),
    ]


def _labels_check(listing: Listing, settings: Settings) -> Check:
    present, missing = _gpu_nodes(listing, settings)
    want = ", ".join(f"{k}={v}" for k, v in sorted(settings.gpu_labels.items()))
    c = Check(
        "nodes.gpu-labels",
        "every GPU node carries the GPU labels",
        evidence=[
            Evidence(
                f"{listing.src('nodes')} metadata.labels",
                f"{len(listing.nodes)} node(s); wanted on {len(settings.gpu_nodes)} GPU node(s): "
                f"{want}",
            )
        ],
    )
    if not settings.gpu_nodes:
        return skipped(c.id, c.title, "the inventory group gpu_nodes is empty", c.evidence)
    gpu_nodes = set(settings.gpu_nodes)
    labels_by_name = {name_of(n): labels_of(n) for n in listing.nodes if name_of(n) in gpu_nodes}
    for node in missing:
        c.problem(
            node,
            FAIL,
            "no Node object of this name: the host has not joined (or kubernetes_node_name is "
            "wrong)",
        )
    for node in present:
        labels = labels_by_name[node]
        wrong = [
            f"{k}={labels[k]!r}" if k in labels else f"{k} absent"
            for k, v in sorted(settings.gpu_labels.items())
            if labels.get(k) != v
        ]
        if wrong:
            c.problem(
                node,
                FAIL,
                f"labels: {', '.join(wrong)} (wanted {want}); the kubelet plugin DaemonSet's node "
                "affinity needs them",
            )
    c.fix = "label the GPU nodes: gpufleet up -i INVENTORY (role gpu_node_labels), or that play "
    c.fix += "alone: ansible-playbook -i INVENTORY gpufleet.cluster.gpu_node_labels"
    return finish(c, f"{len(present)} GPU node(s) carry {want}")


def _plugin_check(
    listing: Listing,
    settings: Settings,
    pods: Mapping[str, list[Mapping[str, Any]]],
    paths: tuple[list[str], list[str]],
) -> Check:
    """``nodes.plugin-running`` on the GPU nodes of DRA pools (``paths``: ``_dra_nodes``)."""
    present, plugin = paths
    where = (
        f"namespace {settings.plugin_namespace}" if settings.plugin_namespace else "all namespaces"
    )
    ds_names = []
    sel = parse_label_selector(settings.plugin_selector)
    for ds in listing.daemonsets:
        tmpl = ((ds.get("spec") or {}).get("template") or {}).get("metadata") or {}
        if label_selector_matches(sel, tmpl.get("labels") or {}) and (
            not settings.plugin_namespace
            or (ds.get("metadata") or {}).get("namespace") == settings.plugin_namespace
        ):
            st = ds.get("status") or {}
            ds_names.append(
                f"{(ds.get('metadata') or {}).get('namespace')}/{name_of(ds)} "
                f"desired={st.get('desiredNumberScheduled', 0)} ready={st.get('numberReady', 0)}"
            )
    c = Check(
        "nodes.plugin-running",
        f"the {settings.driver} kubelet plugin runs on every GPU node",
        evidence=[
            Evidence(
                f"{listing.src('pods')} ({where}, selector {settings.plugin_selector})",
                f"plugin pods on {', '.join(sorted(pods)) or 'no node'}",
            ),
            Evidence(
                listing.src("daemonsets"),
                "; ".join(ds_names) or "no DaemonSet whose pods match the selector",
            ),
        ],
    )
    if plugin:
        c.evidence.append(_left_out(plugin))
    if not present:
        return skipped(c.id, c.title, _all_on_device_plugin(plugin), c.evidence)
    for node in present:
        mine = pods.get(node, [])
        if not mine:
            c.problem(
                node,
                FAIL,
                f"no kubelet plugin pod ({settings.plugin_selector}, {where}) is scheduled here: "
                "its claims cannot be prepared",
            )
        elif not any(_pod_running(p) for p in mine):
            states = ", ".join(f"{name_of(p)} {(p.get('status') or {}).get('phase')}" for p in mine)
            c.problem(node, FAIL, f"kubelet plugin pod not Running and ready: {states}")
    c.fix = (
        "check the DaemonSet's nodeSelector/affinity against the node labels and the pod's "
        "events (kubectl -n <namespace> describe pod -l " + settings.plugin_selector + ")"
    )
    return finish(
        c, f"plugin pod Running on all {len(present)} GPU node(s)" + _left_out_summary(plugin)
    )


def attr_value(device: Mapping[str, Any], name: str) -> Any:
    body = device_fields(device)
    v = (body.get("attributes") or {}).get(name)
    if isinstance(v, Mapping) and v:
        return next(iter(v.values()))
    return None


def _capacity(device: Mapping[str, Any], name: str) -> Any:
    body = device_fields(device)
    v = (body.get("capacity") or {}).get(name)
    return v.get("value") if isinstance(v, Mapping) else v


def _semver(version: str | None) -> str | None:
    if not version:
        return None
    parts = [str(int(p)) for p in re.findall(r"\d+", version)[:3]]
    while len(parts) < 3:
        parts.append("0")
    return ".".join(parts)


def _wanted_layout(raw: Any, index: int) -> dict[str, int] | None:
    if not raw:
        return None
    if isinstance(raw, Mapping) and all(str(k).isdigit() for k in raw):
        layout = raw.get(index, raw.get(str(index)))
        return (
            {str(k): int(v) for k, v in (layout or {}).items() if int(v)}
            if layout is not None
            else None
        )
    return {str(k): int(v) for k, v in raw.items() if int(v)}


def expected_devices(facts: Mapping[str, Any]) -> list[dict[str, Any]]:
    """What the NVIDIA DRA driver publishes for a host's ``gpu_facts``: per GPU without
    MIG one ``gpu`` device (uuid, productName, memory bytes, driverVersion), per MIG
    device one ``mig`` device (uuid, parentUUID, profile, memory)."""
    out = []
    driver = _semver(facts.get("gpufleet_gpu_driver_version"))
    for g in facts.get("gpufleet_gpus") or []:
        if g.get("mig_mode_current") == "Enabled":
            for m in g.get("mig_devices") or []:
                out.append(
                    {
                        "type": "mig",
                        "uuid": m.get("uuid"),
                        "parentUUID": g.get("uuid"),
                        "gpu": g.get("index"),
                        "profile": m.get("profile"),
                        "productName": g.get("name"),
                        "driverVersion": driver,
                        "memory": m.get("memory_mib"),
                    }
                )
        else:
            out.append(
                {
                    "type": "gpu",
                    "uuid": g.get("uuid"),
                    "gpu": g.get("index"),
                    "productName": g.get("name"),
                    "driverVersion": driver,
                    "memory": g.get("memory_mib"),
                }
            )
    return out


def _compare_devices(
    c: Check, node: str, devices: list[Mapping[str, Any]], facts: Mapping[str, Any]
) -> None:
    """A problem on ``c`` for each GPU or MIG device of the host's GPU facts that ``node``
    does not publish or publishes with other attributes (type, product, driver version,
    MIG profile, parent, memory in MiB), and for each published device the host lacks."""
    by_uuid = {attr_value(d, "uuid"): d for d in devices}
    want = expected_devices(facts)
    for e in want:
        d = by_uuid.pop(e["uuid"], None)
        label = (
            f"GPU {e['gpu']}"
            + (f" MIG {e['profile']}" if e["type"] == "mig" else "")
            + f" {e['uuid']}"
        )
        if d is None:
            c.problem(node, FAIL, f"{label} is not published (nvidia-smi shows it)")
            continue
        diffs = []
        for attr in ("type", "productName", "driverVersion", "profile", "parentUUID"):
            if attr in e and e[attr] is not None and str(attr_value(d, attr)) != str(e[attr]):
                diffs.append(f"{attr} is {attr_value(d, attr)}, the host says {e[attr]}")
        cap = _capacity(d, "memory")
        if e.get("memory") and cap is not None:
            try:
                mib = parse_quantity(cap) / MIB
            except QuantityError:
                mib = None
            if mib is not None and mib != e["memory"]:
                diffs.append(f"memory is {cap}, the host says {e['memory']}Mi")
        if diffs:
            c.problem(node, FAIL, f"{label} ({d.get('name')}): " + "; ".join(diffs))
    for uuid, d in by_uuid.items():
        c.problem(
            node,
            FAIL,
            f"device {d.get('name')} ({uuid}) is published but the host has no such GPU or MIG "
            "device",
        )


def _compare_mig_layout(
    c: Check,
    node: str,
    devices: list[Mapping[str, Any]],
    facts: Mapping[str, Any],
    raw: Any,
) -> None:
    """A problem on ``c`` for each GPU of ``node`` whose published MIG devices (profile ->
    count) differ from the wanted layout ``raw`` (``mig_layout`` of the node)."""
    for g in facts.get("gpufleet_gpus") or []:
        layout = _wanted_layout(raw, int(g.get("index", 0)))
        if layout is None:
            continue
        have = Counter(
            attr_value(d, "profile")
            for d in devices
            if attr_value(d, "parentUUID") == g.get("uuid")
        )
        have.pop(None, None)
        if dict(have) != layout:
            c.problem(
                node,
                FAIL,
                f"GPU {g.get('index')}: published MIG devices "
                f"{dict(sorted(have.items())) or 'none'}, wanted layout "
                f"{dict(sorted(layout.items())) or 'MIG off'}",
            )


class _NodeDevices:
    """The fold (``kube.client.PagedList.derive``) of ``nodes.resourceslices``' walk of the
    newest generation: the devices of ``driver`` counted per node, and the slices of
    ``driver``."""

    def __init__(self, driver: str) -> None:
        self.driver = driver
        self.count: dict[str, int] = {}
        self.latest = 0

    def add(self, s: Mapping[str, Any]) -> None:
        spec = s.get("spec") or {}
        if spec.get("driver") != self.driver:
            return
        self.latest += 1
        node = spec.get("nodeName")
        if node:
            self.count[node] = self.count.get(node, 0) + len(spec.get("devices") or [])

    def result(self) -> tuple[dict[str, int], int]:
        return self.count, self.latest


def _devices_fold(settings: Settings) -> tuple[str, Callable[[], _NodeDevices]]:
    driver = settings.driver
    return f"devices per node of {driver!r}", lambda: _NodeDevices(driver)


def _compared_devices(
    listing: Listing, driver: str, compare: set[str]
) -> dict[str, list[Mapping[str, Any]]]:
    """The devices of ``driver`` on the nodes of ``compare`` (the newest generation): one
    walk, only when a node's GPU facts are compared (held for ``nodes.resourceslices``
    alone, not kept in the listing)."""
    kept: dict[str, list[Mapping[str, Any]]] = {}
    for s in cslices.iter_latest_slices(listing.slices) if compare else ():
        spec = s.get("spec") or {}
        node = spec.get("nodeName")
        if spec.get("driver") == driver and node and node in compare:
            kept.setdefault(node, []).extend(spec.get("devices") or [])
    return kept


class _SliceNodes:
    """The fold (``kube.client.PagedList.derive``) of ``nodes.orphan-slices``' walk of every
    slice: ``(node, driver)`` of each slice that names a node, in the order first seen,
    and the name of the first slice of each."""

    def __init__(self) -> None:
        self.first: dict[tuple[Any, Any], str] = {}

    def add(self, s: Mapping[str, Any]) -> None:
        spec = s.get("spec") or {}
        node, driver = spec.get("nodeName"), spec.get("driver", "")
        if node and (node, driver) not in self.first:
            self.first[(node, driver)] = name_of(s)

    def result(self) -> dict[tuple[Any, Any], str]:
        return self.first


def _slice_nodes_fold() -> tuple[str, Callable[[], _SliceNodes]]:
    return "node and driver of the slices", _SliceNodes


def slice_folds(listing: Listing, settings: Settings) -> dict[str, Callable[[], Any]]:
    """The folds of the slices the checks of ``nodes_checks`` read, for a caller that
    walks the slices once for several checks (``validate.cluster.all_checks``)."""
    return {
        **cslices.latest_folds(listing.slices, dict([_devices_fold(settings)])),
        **dict([_slice_nodes_fold()]),
    }


def _slices_check(
    listing: Listing, settings: Settings, paths: tuple[list[str], list[str]]
) -> Check:
    """``nodes.resourceslices`` on the GPU nodes of DRA pools (``paths``: ``_dra_nodes``)."""
    present, plugin = paths
    folds = cslices.latest_folds(listing.slices, dict([_devices_fold(settings)]))
    count, latest = vk.folded(listing.slices, folds)[0]
    # devices kept only for the nodes whose GPU facts they are compared with
    compare = {n for n in present if (settings.gpu_facts.get(n) or {}).get("gpufleet_gpus")}
    kept = _compared_devices(listing, settings.driver, compare)
    c = Check(
        "nodes.resourceslices",
        "each GPU node publishes ResourceSlices that match its GPUs",
        evidence=[
            Evidence(
                listing.src("resourceslices"),
                f"{len(listing.slices)} slice(s), {latest} of driver {settings.driver} "
                f"(newest generation) on {len(count)} node(s)",
            ),
        ],
    )
    if "resourceslices" in listing.errors:
        return skipped(
            c.id, c.title, f"ResourceSlices could not be listed: {listing.errors['resourceslices']}"
        )
    if plugin:
        c.evidence.append(_left_out(plugin))
    if not present:
        return skipped(c.id, c.title, _all_on_device_plugin(plugin), c.evidence)
    compared = 0
    for node in present:
        devices = kept.get(node, [])
        if not count.get(node):
            c.problem(
                node,
                FAIL,
                f"no ResourceSlice of driver {settings.driver} with devices: the scheduler cannot "
                "allocate a GPU here",
            )
            continue
        facts = settings.gpu_facts.get(node)
        if not facts or not facts.get("gpufleet_gpus"):
            continue
        compared += 1
        if is_dynamic(devices):  # every placement published: no MIG layout to compare
            compare_published_gpus(c, node, devices, facts)
            continue
        _compare_devices(c, node, devices, facts)
        _compare_mig_layout(c, node, devices, facts, settings.mig_layout.get(node))
    c.evidence.append(
        Evidence(
            "gpu_facts (gpufleet_gpus) per GPU node",
            f"compared on {compared} of {len(present)} node(s)",
        )
    )
    c.fix = (
        "restart the kubelet plugin on the node so it republishes (kubectl delete pod of the "
        "plugin there); check the driver and MIG state with nvidia-smi"
    )
    return finish(
        c,
        f"{len(present)} GPU node(s) publish devices"
        + (f" matching the GPU facts on {compared}" if compared else "")
        + _left_out_summary(plugin),
    )


def _orphans_check(
    listing: Listing, settings: Settings, pods: Mapping[str, list[Mapping[str, Any]]]
) -> Check:
    listed = node_names(listing)
    c = Check(
        "nodes.orphan-slices",
        "no ResourceSlice left by a driver without its plugin pod",
        evidence=[
            Evidence(listing.src("resourceslices"), f"{len(listing.slices)} slice(s)"),
            Evidence(
                listing.src("pods"),
                f"plugin pods of {settings.driver} on {', '.join(sorted(pods)) or 'no node'}",
            ),
        ],
    )
    if "resourceslices" in listing.errors:
        return skipped(
            c.id, c.title, f"ResourceSlices could not be listed: {listing.errors['resourceslices']}"
        )
    other_drivers: set[str] = set()
    # the chart's other driver (ComputeDomains) runs in the same kubelet plugin pods
    judged = set(ddc.chart_drivers(settings.driver))
    stale: set[str] = set()
    # each node and driver once: what is judged of a slice is its node's and driver's
    first: dict[tuple[Any, Any], str] = vk.folded(listing.slices, dict([_slice_nodes_fold()]))[0]
    for (node, driver), name in first.items():
        if node not in listed:
            c.problem(
                node,
                FAIL,
                f"ResourceSlice(s) of driver {driver} name node {node}, which no longer exists",
            )
        elif driver in judged and not any(_serves(p, driver) for p in pods.get(node, [])):
            c.problem(
                node,
                FAIL,
                f"ResourceSlice {name} of driver {driver} is published but no plugin pod "
                + ("" if driver == settings.driver else f"of {settings.driver}'s chart ")
                + "runs here"
                + (
                    f" with its {ddc.PLUGIN_CONTAINERS[driver]} container ready"
                    if driver in ddc.PLUGIN_CONTAINERS
                    else ""
                )
                + ": the scheduler may allocate devices the node cannot prepare",
            )
            stale.add(driver)
        elif driver not in judged:
            other_drivers.add(driver)
    if other_drivers:
        c.evidence.append(
            Evidence(
                "not judged",
                f"slices of other drivers ({', '.join(sorted(other_drivers))}): their plugin pods "
                "are not known to this check",
            )
        )
    c.fix = "start the plugin on that node again, or delete the slices it left: " + "; ".join(
        "kubectl delete resourceslices --field-selector spec.nodeName=<node>,spec.driver=" + d
        for d in sorted(stale or {settings.driver})
    )
    return finish(c, "every node slice has its node and plugin pod")
