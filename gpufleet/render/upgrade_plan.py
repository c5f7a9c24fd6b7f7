"""What ``gpufleet upgrade`` prints: the plan's tables (the nodes as found, per step the
waves and the DRA setting changes), the entries that block the upgrade, and the timings
of a step's run from the upgrade report. Rendering only: the plan is the dict that module
``gpufleet.cluster.upgrade_plan`` returns (``UpgradePlan.to_dict()`` of
``plugins/module_utils/upgrade/plan.py``: ``{target, up_to_date, path, batch_size,
min_gpu_available_percent, nodes, steps, warnings, blocking}``), the timings come from
the upgrade report."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from rich.console import Console
from rich.table import Table

__all__ = ["WAIT_KEYS", "blocking_rows", "render", "render_blocking", "render_timings",
           "timing_rows"]  # fmt: skip

#: ``blocking[].source`` of an entry in a kubeadm ConfigMap (module_utils upgrade_blocking).
CONFIGMAP = "configmap"
#: ``blocking[].kind`` of a feature gate (else a runtime-config entry).
FEATURE_GATE = "feature-gate"


def render(plan: Mapping[str, Any], console: Console) -> None:
    """Tables for humans: the nodes as found, then per step the waves and the changes,
    then what blocks the upgrade."""
    nodes = Table(title=f"nodes now (target {plan['target']})")
    for col in ("host", "node", "role", "kubelet", "apiserver", "kubeadm", "GPU devices", "state"):
        nodes.add_column(col)
    for n in plan["nodes"]:
        state = ("cordoned " if n["unschedulable"] else "") + (
            "Ready" if n["ready"] else "NotReady"
        )
        nodes.add_row(
            n["host"],
            n["name"],
            "control-plane" if n["control_plane"] else "worker",
            n["kubelet"] or "?",
            n["apiserver"] or "-",
            n["kubeadm"] or "?",
            str(n["gpu_devices"]),
            state,
        )
    console.print(nodes)
    for w in plan["warnings"]:
        console.print(f"[yellow]warning:[/yellow] {w}")
    steps = plan["steps"]
    if not steps:
        console.print(f"[green]every component runs {plan['target']}: nothing to do[/green]")
        return
    console.print(
        "path: "
        + " -> ".join([str(steps[0]["source"])] + [s["version"] for s in steps])
        + f"  (batch size {plan['batch_size']}, GPU floor "
        f"{float(plan['min_gpu_available_percent']):g}%)"
    )
    for i, step in enumerate(steps, 1):
        _render_step(i, step, console)
    render_blocking(plan, console)


def _render_step(i: int, step: Mapping[str, Any], console: Console) -> None:
    """One step: repository, packages, kubeadm, the order of the nodes, the DRA changes."""
    console.rule(f"step {i}: {step['source']} -> {step['version']}")
    console.print(f"repository: {step['repo_url']}")
    console.print("packages: " + ", ".join(f"{k}={v}" for k, v in sorted(step["packages"].items())))
    api = step["kubeadm_api"]
    console.print(
        f"kubeadm config API: {api['from']} -> {api['to']}; "
        f"UpgradeConfiguration: {'yes' if step['upgrade_configuration'] else 'no (flags)'}"
    )
    console.print(
        f"on {step['apply_host'] or '(already applied)'}: {' '.join(step['apply_command'])}"
    )
    waves = Table(title="order")
    for col in ("wave", "kind", "hosts", "GPU devices drained", "GPU available %"):
        waves.add_column(col)
    for w in step["waves"]:
        waves.add_row(
            str(w["index"]),
            w["kind"],
            ", ".join(w["hosts"]),
            str(w["gpu_devices_drained"]),
            f"{float(w['gpu_available_percent']):g}",
        )
    for n in step["nodes"]:
        if n["skip"]:
            waves.add_row("-", "skip", n["host"], "0", n["reason"])
    console.print(waves)
    for n in step["nodes"]:
        if n["resume"]:
            console.print(f"resume {n['host']} (wave {n['wave']}): {n['reason']}")
    changes = _changes_table(step)
    if changes.row_count:
        console.print(changes)
    else:
        console.print("DRA settings: no change")
    for w in step["warnings"]:
        console.print(f"[yellow]warning:[/yellow] {w}")


def _changes_table(step: Mapping[str, Any]) -> Table:
    """The DRA setting changes of a step: the transition's gate and runtime-config changes,
    what the ConfigMaps hold and the target refuses (not the blocking entries), advice."""
    changes = Table(title="DRA settings (version model)")
    for col in ("component", "entry", "change", "reason"):
        changes.add_column(col, overflow="fold")
    tr = step["transition"]
    shown: set[tuple[str, str]] = set()  # (component, gate or runtime-config key)
    for c in tr["gate_changes"]:
        before = "-" if c["before"] is None else str(c["before"]).lower()
        after = "-" if c["after"] is None else str(c["after"]).lower()
        changes.add_row(
            c["component"], c["gate"], f"{c['action']} {before} -> {after}", c["reason"]
        )
        shown.add((c["component"], c["gate"]))
    for c in tr["runtime_config_changes"]:
        # a drop the target does not need is advice: the run keeps the entry
        action = (
            "advise drop (kept)" if c["action"] == "drop" and not c["required"] else c["action"]
        )
        changes.add_row("kube-apiserver", f"runtime-config {c['entry']}", action, c["reason"])
        shown.add(("kube-apiserver", c["entry"].split("=", 1)[0]))
    blocked = {(b["component"], b["entry"]) for b in step["blocking"] if b["source"] == CONFIGMAP}
    for component, rep in sorted(step["sanitize"].items()):
        for f in rep["remove"]:
            if (component, f["entry"]) in blocked:
                continue  # not the upgrade's to remove: in the blocking table
            changes.add_row(component, f["entry"], "remove (found now)", f["reason"])
        for f in rep["advice"]:
            if (component, f["entry"].split("=", 1)[0]) in shown:
                continue  # the same entry as a transition row above
            changes.add_row(component, f["entry"], "advise remove", f["reason"])
        for entry in rep["not_checked"]:
            changes.add_row(
                component, entry, "kept", f"no generated gate table for {step['version']}"
            )
    return changes


def blocking_rows(plan: Mapping[str, Any]) -> list[dict[str, str]]:
    """One row per entry of ``plan["blocking"]``: ``{host, place, component, gate, reason,
    fix}``; ``host`` is ``-`` for a ConfigMap, ``place`` the file, the ConfigMap or the
    process; ``gate`` names a runtime-config entry as ``runtime-config KEY``."""
    return [
        {
            "host": b["host"] or "-",
            "place": b["where"],
            "component": b["component"],
            "gate": b["entry"] if b["kind"] == FEATURE_GATE else f"runtime-config {b['entry']}",
            "reason": b["reason"],
            "fix": b["fix"],
        }
        for b in plan["blocking"]
    ]


def render_blocking(plan: Mapping[str, Any], console: Console) -> None:
    """The blocking table (nothing when the plan has none): host, file or ConfigMap,
    component, gate, reason, fix, and the line that says the upgrade is refused."""
    rows = blocking_rows(plan)
    if not rows:
        return
    table = Table(title=f"blocking the upgrade to {plan['target']}")
    for col, key in (("host", "host"), ("file or ConfigMap", "place"),
                     ("component", "component"), ("gate", "gate")):  # fmt: skip
        table.add_column(col, no_wrap=key != "place", overflow="fold")
    table.add_column("reason", overflow="fold", ratio=1)
    table.add_column("fix", overflow="fold", ratio=1)
    for r in rows:
        table.add_row(r["host"], r["place"], r["component"], r["gate"], r["reason"], r["fix"])
    console.print(table)
    versions = sorted({str(b["version"]) for b in plan["blocking"]})
    console.print(
        f"[red]blocked: {len(rows)} feature gate or runtime-config entr"
        f"{'y' if len(rows) == 1 else 'ies'} that {' and '.join(versions)} refuses to start "
        "with and the upgrade does not change itself; nothing was changed. Apply the fixes "
        "and plan again.[/red]"
    )


#: Timings of a node in the report that are waiting on Kubernetes, not on the toolkit.
WAIT_KEYS = ("drain_s", "restart_ready_s", "dra_plugin_s")


def timing_rows(
    report: Mapping[str, Any], hosts: Sequence[str], since: str = ""
) -> list[dict[str, Any]]:
    """Per host of ``hosts`` that has timings in the report: ``{host, node, state,
    control_plane_s, drain_s, restart_ready_s, dra_plugin_s, node_total_s, waits_s,
    overhead_s}`` in seconds. ``node_total_s`` is the node's whole time (for a
    control-plane node its kubeadm part plus its kubelet part), ``waits_s`` the sum of
    drain, restart to Ready and plugin, ``overhead_s`` the rest (kubeadm, packages,
    checks, Ansible). ``since`` (``%Y-%m-%dT%H:%M:%SZ``, UTC): only entries upgraded or
    failed at or after it, i.e. by this run (a node skipped now keeps the timings of the
    run that upgraded it)."""
    rows = []
    nodes = report.get("nodes") or {}
    for host in hosts:
        e = nodes.get(host) or {}
        t = e.get("timings_s") or {}
        if not t or (since and (e.get("state") == "skipped" or str(e.get("updated")) < since)):
            continue
        waits = sum(float(t.get(k) or 0) for k in WAIT_KEYS)
        parts = [float(t[k]) for k in ("control_plane_s", "node_total_s") if t.get(k) is not None]
        total = round(sum(parts), 1) if parts else None
        rows.append(
            {
                "host": host,
                "node": e.get("node") or host,
                "state": e.get("state"),
                **{k: t.get(k) for k in (*WAIT_KEYS, "control_plane_s")},
                "node_total_s": total,
                "waits_s": round(waits, 1),
                "overhead_s": round(float(total) - waits, 1) if total is not None else None,
            }
        )
    return rows


def render_timings(rows: Sequence[Mapping[str, Any]], wall_s: float, console: Console) -> None:
    """The per-node timing table and the step's wall-clock time against the summed waits."""
    table = Table(title="timings (s)")
    cols = ("host", "state", "control plane", "drain", "restart->Ready", "plugin+slices",
            "node total", "waits", "overhead")  # fmt: skip
    for col in cols:
        table.add_column(col, justify="left" if col in ("host", "state") else "right")

    def f(v: Any) -> str:
        return "-" if v is None else f"{float(v):.1f}"

    for r in rows:
        table.add_row(
            r["host"], str(r["state"]), f(r["control_plane_s"]), f(r["drain_s"]),
            f(r["restart_ready_s"]), f(r["dra_plugin_s"]), f(r["node_total_s"]),
            f(r["waits_s"]), f(r["overhead_s"]),
        )  # fmt: skip
    console.print(table)
    waits = sum(r["waits_s"] for r in rows)
    console.print(
        f"step wall-clock {wall_s:.1f}s; drain + restart->Ready + plugin summed over the "
        f"nodes {waits:.1f}s; the rest {wall_s - waits:.1f}s (plan, preflight, backups, "
        "kubeadm, packages, checks, Ansible)"
    )
