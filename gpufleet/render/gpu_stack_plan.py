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

from gpufleet.render.text import shown

__all__ = ["render", "render_refused"]


def _change(entry: Mapping[str, Any]) -> str:
    current, target = entry.get("current") or "none", entry.get("target") or "none"
    return shown(current) if current == target else f"{shown(current)} -> {shown(target)}"


def render(plan: Mapping[str, Any], console: Console) -> None:
    """Tables for humans: the order, the nodes, then the warnings and the refusals. Every
    text of the plan shows as it is (``render.text.shown``): a node name or a value is
    never read as markup nor reaches the terminal as an escape sequence."""
    t = plan["target"]
    console.print(
        f"GPU stack plan on Kubernetes {shown(plan['kubernetes_version'])}: driver "
        f"{shown(t['driver'])}, toolkit {shown(t['toolkit'])}, DRA driver chart "
        f"{shown(t['dra_driver_chart'])}  (batch size "
        f"{plan['batch_size']}, GPU floor {float(plan['min_gpu_available_percent']):g}%)"
    )
    chart = plan["chart"]
    order = Table(title="order")
    for col in ("wave", "what", "hosts", "GPU devices drained", "GPU available %"):
        order.add_column(col)
    for w in plan["waves"]:
        what = (
            "chart: " + "; ".join(map(shown, chart["steps"]))
            if w["kind"] == "chart"
            else "nodes: driver, toolkit"
        )
        order.add_row(
            str(w["index"]), what, ", ".join(map(shown, w["hosts"])) or "-",
            str(w["gpu_devices_drained"]), f"{w['gpu_available_percent']:g}",
        )  # fmt: skip
    nodes = Table(title="nodes")
    for col in ("host", "node", "driver", "toolkit", "load", "stops first", "wave"):
        nodes.add_column(col)
    for n in plan["nodes"]:
        nodes.add_row(
            shown(n["host"]), shown(n["name"]), _change(n["driver"]), _change(n["toolkit"]),
            shown(n["load"]), ", ".join(n["stop"]) or "-",
            str(n["wave"]) if n["wave"] >= 0 else "-",
        )  # fmt: skip
    console.print(f"chart: {_change(chart)}")
    if plan["up_to_date"]:
        console.print("[green]the GPU stack runs the targets: nothing to do[/green]")
    else:
        console.print(order)
    console.print(nodes)
    for w in plan["warnings"]:
        console.print(f"[yellow]warning:[/yellow] {shown(w)}")
    render_refused(plan, console)


def render_refused(plan: Mapping[str, Any], console: Console) -> None:
    """The refusals, one table row each: node, variable, value, reason, fix, source."""
    if not plan["refused"]:
        return
    table = Table(title="refused: the plan cannot run")
    for col in ("node", "variable", "value", "reason", "fix", "source"):
        table.add_column(col)
    for r in plan["refused"]:
        keys = ("variable", "value", "reason", "fix", "source")
        table.add_row(shown(r["node"] or "-"), *(shown(r[k]) for k in keys))
    console.print(table)
