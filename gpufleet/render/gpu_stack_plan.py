"""What ``gpufleet upgrade-gpu-stack --plan`` prints: the order (waves), per node what
changes, what stops first and how the new driver loads, the warnings and the refusals.
Rendering only: the plan is the dict of ``GpuStackPlan.to_dict()``
(``plugins/module_utils/upgrade/gpu_stack.py``: ``{kubernetes_version, target, up_to_date,
chart, nodes, waves, batch_size, min_gpu_available_percent, warnings, refused}``)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rich.console import Console
from rich.table import Table

__all__ = ["render", "render_refused"]


def _change(entry: Mapping[str, Any]) -> str:
    current, target = entry.get("current") or "none", entry.get("target") or "none"
    return str(current) if current == target else f"{current} -> {target}"


def render(plan: Mapping[str, Any], console: Console) -> None:
    """Tables for humans: the order, the nodes, then the warnings and the refusals."""
    t = plan["target"]
    console.print(
        f"GPU stack plan on Kubernetes {plan['kubernetes_version']}: driver {t['driver']}, "
        f"toolkit {t['toolkit']}, DRA driver chart {t['dra_driver_chart']}  (batch size "
        f"{plan['batch_size']}, GPU floor {float(plan['min_gpu_available_percent']):g}%)"
    )
    chart = plan["chart"]
    order = Table(title="order")
    for col in ("wave", "what", "hosts", "GPU devices drained", "GPU available %"):
        order.add_column(col)
    for w in plan["waves"]:
        what = (
            "chart: " + "; ".join(chart["steps"])
            if w["kind"] == "chart"
            else "nodes: driver, toolkit"
        )
        order.add_row(
            str(w["index"]), what, ", ".join(w["hosts"]) or "-",
            str(w["gpu_devices_drained"]), f"{w['gpu_available_percent']:g}",
        )  # fmt: skip
    nodes = Table(title="nodes")
    for col in ("host", "node", "driver", "toolkit", "load", "stops first", "wave"):
        nodes.add_column(col)
    for n in plan["nodes"]:
        nodes.add_row(
            n["host"], n["name"], _change(n["driver"]), _change(n["toolkit"]), n["load"],
            ", ".join(n["stop"]) or "-", str(n["wave"]) if n["wave"] >= 0 else "-",
        )  # fmt: skip
    console.print(f"chart: {_change(chart)}")
    if plan["up_to_date"]:
        console.print("[green]the GPU stack runs the targets: nothing to do[/green]")
    else:
        console.print(order)
    console.print(nodes)
    for w in plan["warnings"]:
        console.print(f"[yellow]warning:[/yellow] {w}")
    render_refused(plan, console)


def render_refused(plan: Mapping[str, Any], console: Console) -> None:
    """The refusals, one table row each: node, variable, value, reason, fix, source."""
    if not plan["refused"]:
        return
    table = Table(title="refused: the plan cannot run")
    for col in ("node", "variable", "value", "reason", "fix", "source"):
        table.add_column(col)
    for r in plan["refused"]:
        table.add_row(
            r["node"] or "-", r["variable"], str(r["value"]), r["reason"], r["fix"], r["source"]
        )
    console.print(table)
