"""What ``gpufleet upgrade-gpu-stack --plan`` prints: the order (waves), per node what
changes, what stops first and how the new driver loads, the warnings and the refusals.
Rendering only: the plan is the dict of ``GpuStackPlan.to_dict()``
(``plugins/module_utils/upgrade/gpu_stack.py``: ``{kubernetes_version, target, up_to_date,
chart, nodes, waves, batch_size, min_gpu_available_percent, warnings, refused}``)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from rich.console import Console
from rich.table import Table
from rich.text import Text

from gpufleet.render.text import printable, shown

__all__ = ["RUN_TIMINGS", "render", "render_refused", "render_run"]


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
        f"{shown(t['driver'] or 'kept')}, toolkit {shown(t['toolkit'] or 'kept')}, DRA driver "
        f"chart {shown(t['dra_driver_chart'] or 'kept')}  (batch size "
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
            else "nodes: "
            + ", ".join(p for p in ("driver", "toolkit") if p not in t.get("kept", []))
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


#: The timings a node of the GPU-stack run records (the report's ``timings_s``), in order.
RUN_TIMINGS = (
    "drain_s", "stop_clients_s", "driver_s", "toolkit_s", "mig_s", "dra_plugin_s", "node_total_s",
)  # fmt: skip


def _seconds(value: Any) -> str:
    """A timing of the report: ``-`` when absent, seconds to a tenth when a finite number,
    else the value as it is written (a report edited by hand is shown, never trusted)."""
    if value is None:
        return "-"
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        try:
            return f"{float(value):.1f}"
        except OverflowError:
            pass
    return shown(value)


def render_run(
    report: Mapping[str, Any], hosts: Sequence[str], since: str, wall_s: float, console: Console
) -> None:
    """After a run: per host of ``hosts`` that this run touched (its report entry updated at
    or after ``since``, UTC ``%Y-%m-%dT%H:%M:%SZ``) its state, phase and the seconds of each
    phase, then the failed nodes' causes and the run's wall-clock time. A report of another
    shape (nodes or an entry not a mapping, a timing not a number) shows what it holds;
    every text folds, so a long one costs its length and no more."""
    table = Table(title="GPU stack: nodes (s)")
    for col in ("host", "node", "state", "phase", *(k[:-2].replace("_", " ") for k in RUN_TIMINGS)):
        table.add_column(
            col,
            justify="right" if col not in ("host", "node", "state", "phase") else "left",
            overflow="fold",
        )
    nodes = report.get("nodes") if isinstance(report, Mapping) else None
    nodes = nodes if isinstance(nodes, Mapping) else {}
    failed = []
    for host in hosts:
        e = nodes.get(host)
        if not e or not isinstance(e, Mapping) or str(e.get("updated") or "") < since:
            continue
        t = e.get("timings_s")
        t = t if isinstance(t, Mapping) else {}
        table.add_row(
            shown(host), shown(e.get("node") or host), shown(e.get("state") or "-"),
            shown(e.get("phase") or "-"), *(_seconds(t.get(k)) for k in RUN_TIMINGS),
        )  # fmt: skip
        if e.get("state") == "failed":
            failed.append(e)
    console.print(table)
    for e in failed:
        cordon = " (left cordoned)" if e.get("cordoned") else ""
        line = (
            f"{e.get('node') or ''}: failed in phase {e.get('phase') or ''}{cordon}: "
            f"{e.get('cause') or ''}"
        )
        console.print(Text(printable(line), style="red", overflow="fold"))
    console.print(f"run wall-clock {wall_s:.1f}s")
