"""What ``gpufleet migrate`` prints: the plan of moving a GPU pool between the device
plugin and DRA (the dict module ``gpufleet.cluster.gpu_path_plan`` returns:
``PoolMove.to_dict()`` of ``plugins/module_utils/migrate/plan.py``) and each batch's
result (module ``gpufleet.cluster.gpu_path_move``). Rendering only."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from rich.console import Console
from rich.table import Table

__all__ = ["render", "render_batch"]


def _requests(pod: Mapping[str, Any]) -> str:
    asked = [f"{k}: {v}" for k, v in (pod.get("requests") or {}).items()]
    asked += [f"claim {c}" for c in pod.get("claims") or []]
    return ", ".join(asked)


def render(plan: Mapping[str, Any], console: Console) -> None:
    """The nodes by batch with what each advertises and the pods it evicts, what serves
    each extended resource afterwards, and what blocks the move."""
    title = (
        f"pool {plan['pool']}: {plan['from']} -> {plan['to']} "
        f"(Kubernetes {plan.get('kubernetes_version') or '?'})"
    )
    nodes = Table(title=title)
    for col in ("batch", "host", "node", "advertises now", "GPU pods evicted"):
        nodes.add_column(col)
    for n in plan["nodes"]:
        pods = "\n".join(f"{p['namespace']}/{p['name']} ({_requests(p)})" for p in n["pods"])
        nodes.add_row(str(n["batch"]), n["host"], n["node"], n["advertises"], pods or "-")
    console.print(nodes)
    console.print(
        f"{len(plan['batches'])} batch(es), {len(plan['nodes'])} node(s), "
        f"{plan['evicted_pods']} GPU pod(s) evicted"
    )
    if plan["served_by"]:
        served = Table(title="extended resources after the move")
        served.add_column("resource")
        served.add_column("served by")
        for resource, device_class in plan["served_by"].items():
            by = (
                f"DeviceClass {device_class} (extendedResourceName)"
                if device_class
                else ("the device plugin" if plan["to"] == "device-plugin" else "nothing")
            )
            served.add_row(resource, by)
        console.print(served)
    for note in plan.get("notes") or []:
        console.print(f"note: {note}")
    render_blockers(plan.get("blockers") or [], console)


def render_blockers(blockers: Sequence[Mapping[str, Any]], console: Console) -> None:
    if not blockers:
        return
    table = Table(title="what blocks the move", title_style="bold red")
    for col in ("rule", "node", "why", "fix"):
        table.add_column(col)
    for b in blockers:
        table.add_row(b["rule"], b.get("node") or "-", b["message"], b["fix"])
    console.print(table)


def render_batch(nodes: Sequence[Mapping[str, Any]], console: Console) -> None:
    """One batch's result: per node the phase reached, the pods evicted and the seconds of
    each phase."""
    table = Table(title="batch")
    for col in ("node", "phase", "evicted", "cordon", "evict", "stop", "start", "uncordon"):
        table.add_column(col)
    for n in nodes:
        seconds = n.get("seconds") or {}
        times = [
            f"{seconds[k]:.1f}s" if k in seconds else "-"
            for k in ("cordon", "evict", "stop", "start", "uncordon")
        ]
        table.add_row(n["node"], n["phase"], str(len(n.get("evicted") or [])), *times)
    console.print(table)
