# Copyright: gpufleet contributors
# Apache License 2.0 (see LICENSE)
"""The utilization report (``report.fleet.build_report``) as Prometheus metrics, for the
alerting rules that need object state no Kubernetes component exports per object: claims
allocated for nobody, claims pending, GPU nodes that publish no device, nodes whose GPUs
NVIDIA's device plugin advertises as well.

``render(report, nodes)`` returns the text exposition format (version 0.0.4, the format
Prometheus scrapes from ``/metrics`` and node_exporter's textfile collector reads):

- ``gpufleet_dra_claim_leaked{namespace, claim, kind}`` 1 per leaked claim (the report's
  ``leaked``; ``kind`` as ``claims.leaks.find_leaks`` names it);
- ``gpufleet_dra_claim_pending{namespace, claim, reason}`` 1 per pending claim (the
  report's ``pending``; ``reason`` its first reason);
- ``gpufleet_gpu_node_resourceslice_devices{node}`` devices of the reported driver that
  ResourceSlices publish on each GPU node (a node labeled ``nvidia.com/gpu.present=true``,
  ``node_labels.DEFAULT_LABELS``), 0 for a GPU node with none, and on each other listed
  node they publish devices on;
- ``gpufleet_node_device_plugin_allocatable{node, resource}`` each device plugin resource
  (``nvidia.com/gpu``, ``nvidia.com/mig-*``: ``dra_driver.gpu_paths``) a Node lists in
  ``status.allocatable``, as a whole count (``report.paths.whole``; 0 for one listed at 0,
  a device plugin that stopped), the series kube-state-metrics names
  ``kube_node_status_allocatable{resource="nvidia_com_gpu"}``; with the previous one it
  shows a node advertised by both NVIDIA's device plugin and the DRA driver;
- ``gpufleet_dra_devices{state}`` published devices, ``allocated``, ``free`` and
  ``blocked`` (not allocated, but short of shared counters that allocated devices hold:
  placements of a dynamic MIG GPU; ``report.fleet``), which add up to those published;
- ``gpufleet_dra_claims_leaked``, ``gpufleet_dra_claims_pending`` the counts;
- ``gpufleet_team_{allocated,idle,leaked}_gpu_memory_bytes{team}`` and
  ``gpufleet_team_{allocated,idle,leaked}_devices{team}``: GPU memory and devices of the
  reported driver allocated to the claims of each team (the report's ``teams``,
  ``report.teams.waste``), idle among them (only with the activity measured: no sample
  otherwise) and leaked; ``gpufleet_namespace_...{namespace, team}`` the same per
  namespace. ``topk(1, gpufleet_team_idle_gpu_memory_bytes)`` names the team holding the
  most idle GPU memory.
- ``gpufleet_gpu_memory_slices{node, gpu, model}``, ``gpufleet_gpu_memory_slices_free``,
  ``gpufleet_gpu_stranded_memory_slices``, ``gpufleet_gpu_stranded_memory_bytes``,
  ``gpufleet_gpu_multiprocessors``, ``gpufleet_gpu_multiprocessors_free``,
  ``gpufleet_gpu_stranded_multiprocessors``: per GPU published with shared counters
  (NVIDIA's dynamic MIG; the report's ``gpus``, ``report.fleet.counter_gpus``) its memory
  slices and multiprocessors, free, and stranded (free but usable by no device that can
  be allocated now), and the GPU memory of its stranded memory slices.

The rules that read them are in roles/monitoring (docs/monitoring.md). Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from ansible_collections.gpufleet.cluster.plugins.module_utils.cluster.node_labels import (
    DEFAULT_LABELS,
)
from ansible_collections.gpufleet.cluster.plugins.module_utils.dra_driver import (
    gpu_paths as gp,
)
from ansible_collections.gpufleet.cluster.plugins.module_utils.report import paths as rpaths

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"


def _escape(value: str) -> str:
    """A label value as the exposition format writes it (backslash, quote, newline)."""
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _series(name: str, labels: Mapping[str, str], value: float | int) -> str:
    inner = ",".join(f'{k}="{_escape(str(v))}"' for k, v in labels.items())
    return f"{name}{{{inner}}} {value}" if inner else f"{name} {value}"


def _split(claim: str) -> tuple[str, str]:
    namespace, _sep, name = claim.partition("/")
    return (namespace, name) if name else ("", namespace)


def gpu_nodes(nodes: Iterable[Mapping[str, Any]]) -> list[str]:
    """Names of the nodes that carry every label of ``node_labels.DEFAULT_LABELS``."""
    out = []
    for node in nodes:
        meta = node.get("metadata") if isinstance(node, Mapping) else None
        if not isinstance(meta, Mapping) or not isinstance(meta.get("name"), str):
            continue
        labels = meta.get("labels") if isinstance(meta.get("labels"), Mapping) else {}
        if all(labels.get(k) == v for k, v in DEFAULT_LABELS.items()):
            out.append(meta["name"])
    return sorted(out)


def device_plugin_allocatable(nodes: Iterable[Mapping[str, Any]]) -> list[tuple[str, str, int]]:
    """``(node, resource, whole count)`` for each device plugin resource each Node lists
    in ``status.allocatable``, by node and resource."""
    out = []
    for node in nodes:
        meta = node.get("metadata") if isinstance(node, Mapping) else None
        if not isinstance(meta, Mapping) or not isinstance(meta.get("name"), str):
            continue
        listed = gp.device_plugin_resources(node.get("status"))
        for resource, (member, quantity) in sorted(listed.items()):
            if member == "allocatable":
                out.append((meta["name"], resource, rpaths.whole(quantity)))
    return sorted(out)


def _resourceslice_samples(
    report: Mapping[str, Any], nodes: Iterable[Mapping[str, Any]]
) -> list[str]:
    """``gpufleet_gpu_node_resourceslice_devices`` of each GPU node among ``nodes`` and
    each other listed node the report's devices are published on."""
    published: dict[str, int] = {}
    for row in report.get("nodes") or []:
        published[row["node"]] = published.get(row["node"], 0) + int(row["devices_published"])
    listed = {
        n["metadata"]["name"]
        for n in nodes
        if isinstance(n, Mapping)
        and isinstance(n.get("metadata"), Mapping)
        and isinstance(n["metadata"].get("name"), str)
    }
    publishing = {n for n, count in published.items() if count and n in listed}
    return [
        _series("gpufleet_gpu_node_resourceslice_devices", {"node": n}, published.get(n, 0))
        for n in sorted(set(gpu_nodes(nodes)) | publishing)
    ]


#: What each team and namespace family counts: (state, its help text).
HELD = (
    ("allocated", "allocated to the ResourceClaims"),
    ("idle", "allocated and idle (below the activity threshold)"),
    ("leaked", "allocated to ResourceClaims no live pod uses"),
)


def team_samples(report: Mapping[str, Any]) -> list[tuple[str, str, list[str]]]:
    """(name, help, samples) of the per team and per namespace families."""
    teams = report.get("teams") or {}
    measured = bool(teams.get("idle_measured"))
    out = []
    for group, keys in (("team", ("team",)), ("namespace", ("namespace", "team"))):
        rows = teams.get(f"{group}s") or []
        for state, doc in HELD:
            for unit, key, what in (
                ("gpu_memory_bytes", "memory", "GPU memory (bytes)"),
                ("devices", "devices", "Devices"),
            ):
                name = f"gpufleet_{group}_{state}_{unit}"
                samples = [
                    _series(name, {k: row[k] for k in keys}, row[f"{key}_{state}"])
                    for row in (rows if state != "idle" or measured else [])
                ]
                out.append((name, f"{what} of the DRA driver {doc} of each {group}.", samples))
    return out


#: The per GPU families of shared counters: (name, help, value of a ``gpus`` row).
COUNTER_FAMILIES = (
    ("gpufleet_gpu_memory_slices", "Memory slices of each GPU published with shared "
     "counters (dynamic MIG).", lambda r: r["memory_slices"]),
    ("gpufleet_gpu_memory_slices_free", "Memory slices of each such GPU that no allocated "
     "device consumes.", lambda r: len(r["memory_slices_free"])),
    ("gpufleet_gpu_stranded_memory_slices", "Free memory slices of each such GPU that no "
     "device that can be allocated now consumes.", lambda r: len(r["memory_slices_stranded"])),
    ("gpufleet_gpu_stranded_memory_bytes", "GPU memory (bytes) of the stranded memory "
     "slices of each such GPU.", lambda r: r["memory_stranded"]),
    ("gpufleet_gpu_multiprocessors", "Multiprocessors of each such GPU.",
     lambda r: r["multiprocessors"]),
    ("gpufleet_gpu_multiprocessors_free", "Multiprocessors of each such GPU that no "
     "allocated device consumes.", lambda r: r["multiprocessors_free"]),
    ("gpufleet_gpu_stranded_multiprocessors", "Free multiprocessors of each such GPU when "
     "no device of it can be allocated.", lambda r: r["multiprocessors_stranded"]),
)  # fmt: skip


def counter_samples(report: Mapping[str, Any]) -> list[tuple[str, str, list[str]]]:
    """(name, help, samples) of the per GPU families of shared counters."""
    rows = report.get("gpus") or []
    return [
        (
            name,
            doc,
            [
                _series(name, {"node": r["node"], "gpu": r["gpu"], "model": r["model"]}, value(r))
                for r in rows
            ],
        )
        for name, doc, value in COUNTER_FAMILIES
    ]


def render(report: Mapping[str, Any], nodes: Iterable[Mapping[str, Any]]) -> str:
    """The metrics of ``report`` (``report.fleet.build_report``) and the GPU nodes among
    ``nodes`` (Node objects as the API returns them), as exposition text."""
    lines: list[str] = []
    nodes = list(nodes)

    def family(name: str, kind: str, doc: str, samples: list[str]) -> None:
        lines.extend([f"# HELP {name} {doc}", f"# TYPE {name} {kind}", *samples])

    family(
        "gpufleet_dra_claim_leaked",
        "gauge",
        "1 for each ResourceClaim allocated that no live pod uses.",
        [
            _series(
                "gpufleet_dra_claim_leaked",
                {
                    "namespace": _split(item["claim"])[0],
                    "claim": _split(item["claim"])[1],
                    "kind": item.get("kind", ""),
                },
                1,
            )
            for item in report.get("leaked") or []
        ],
    )
    family(
        "gpufleet_dra_claim_pending",
        "gauge",
        "1 for each ResourceClaim without an allocation.",
        [
            _series(
                "gpufleet_dra_claim_pending",
                {
                    "namespace": _split(item["claim"])[0],
                    "claim": _split(item["claim"])[1],
                    "reason": item.get("reason", ""),
                },
                1,
            )
            for item in report.get("pending") or []
        ],
    )
    family(
        "gpufleet_gpu_node_resourceslice_devices",
        "gauge",
        "Devices of the driver that ResourceSlices publish on each GPU node.",
        _resourceslice_samples(report, nodes),
    )
    family(
        "gpufleet_node_device_plugin_allocatable",
        "gauge",
        "Device plugin resources (nvidia.com/gpu, nvidia.com/mig-*) in each Node's "
        "status.allocatable.",
        [
            _series(
                "gpufleet_node_device_plugin_allocatable",
                {"node": node, "resource": resource},
                count,
            )
            for node, resource, count in device_plugin_allocatable(nodes)
        ],
    )
    cluster = report.get("cluster") or {}
    family(
        "gpufleet_dra_devices",
        "gauge",
        "Published devices of the driver by state (allocated, free, blocked by shared counters).",
        [
            _series("gpufleet_dra_devices", {"state": state}, cluster.get(f"devices_{state}", 0))
            for state in ("allocated", "free", "blocked")
        ],
    )
    family(
        "gpufleet_dra_claims_leaked",
        "gauge",
        "ResourceClaims allocated that no live pod uses.",
        [_series("gpufleet_dra_claims_leaked", {}, cluster.get("claims_leaked", 0))],
    )
    family(
        "gpufleet_dra_claims_pending",
        "gauge",
        "ResourceClaims without an allocation.",
        [_series("gpufleet_dra_claims_pending", {}, cluster.get("claims_pending", 0))],
    )
    for name, doc, samples in [*team_samples(report), *counter_samples(report)]:
        family(name, "gauge", doc, samples)
    return "\n".join(lines) + "\n"
