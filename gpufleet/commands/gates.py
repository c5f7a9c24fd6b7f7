"""``gpufleet gates``: DRA feature gates and runtime-config per Kubernetes version.

``gpufleet gates plan --to VERSION [--from VERSION] [--feature NAME ...]
[--gate NAME=true|false ...] [--json]`` answers offline from the DRA version model
(``plugins/module_utils/dra/``): per component (kube-apiserver,
kube-controller-manager, kube-scheduler, kubelet) the feature gates and runtime-config to
set for the target version and, with ``--from``, what changes on the way (gates added and
removed and why, runtime-config dropped or added, the kubeadm configuration API change).

Exit codes: 0 the plan is valid; 1 the plan's checks fail: a request the version model
refuses (a release outside it, a locked or removed gate, more than one minor; the reason
and the fix go to stderr); 2 malformed input (a bad version string, ``--gate`` without
``=``, an unknown feature name).
"""

from __future__ import annotations

import json
from typing import Any

import click
from ansible_collections.gpufleet.cluster.plugins.module_utils.dra import api as dra_api
from ansible_collections.gpufleet.cluster.plugins.module_utils.dra import core as dra_core
from ansible_collections.gpufleet.cluster.plugins.module_utils.dra import features as dra_features
from ansible_collections.gpufleet.cluster.plugins.module_utils.dra import gates as dra_gates
from ansible_collections.gpufleet.cluster.plugins.module_utils.dra import plan as dra_plan
from ansible_collections.gpufleet.cluster.plugins.module_utils.dra import settings as dra_settings
from ansible_collections.gpufleet.cluster.plugins.module_utils.dra import skew as dra_skew
from ansible_collections.gpufleet.cluster.plugins.module_utils.dra import (
    transition as dra_transition,
)
from ansible_collections.gpufleet.cluster.plugins.module_utils.kube import flags as kfl
from rich.console import Console
from rich.table import Table

from gpufleet.commands._options import extra_vars_flag, inventory_flag
from gpufleet.exit import EXIT_CANNOT_RUN, EXIT_FAILED, exit_with, run_or_exit, status_of


def _version(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    """Reject a malformed version string with exit code 2 (click.BadParameter)."""
    if value is None:
        return None
    try:
        dra_core.parse_version(value, name=f"--{param.name.split('_')[0]}")
    except dra_core.VersionParseError as exc:
        raise click.BadParameter(str(exc)) from None
    return value


def _gates(ctx: click.Context, param: click.Parameter, values: tuple[str, ...]) -> dict[str, bool]:
    """Parse repeated ``--gate NAME=true|false`` into ``{NAME: bool}`` (exit 2 if malformed)."""
    out: dict[str, bool] = {}
    for raw in values:
        name, sep, val = raw.partition("=")
        if not sep or not name.strip():
            raise click.BadParameter(
                f"{raw!r} is not NAME=true|false; write e.g. --gate DRAPrioritizedList=true"
            )
        value = kfl.parse_go_bool(val.strip())  # as the components read it
        if value is None:
            hint = "; repeat --gate for each gate" if "," in val else ""
            raise click.BadParameter(
                f"{raw!r} has value {val!r}; the value of --gate must be a boolean "
                f"({kfl.GO_BOOL_HELP}){hint}"
            )
        key = name.strip()
        try:
            dra_gates.require_known_gate(key)
        except dra_core.VersionModelError as exc:
            raise click.BadParameter(f"{exc.reason} {exc.fix}") from None
        if out.get(key, value) != value:
            raise click.BadParameter(
                f"{key} is given twice with different values; keep one --gate {key}=..."
            )
        out[key] = value
    return out


@click.group("gates")
def gates() -> None:
    """DRA feature gates and runtime-config: plan them per Kubernetes version (offline),
    audit a cluster, apply them to a cluster."""


@gates.command("plan")
@click.option(
    "--to",
    "to_version",
    required=True,
    metavar="VERSION",
    callback=_version,
    help=(
        f"Target Kubernetes version, e.g. {dra_core.example_release()} "
        f"or v{dra_core.example_release()}."
    ),
)
@click.option(
    "--from",
    "from_version",
    default=None,
    metavar="VERSION",
    callback=_version,
    help="Current version: also show what changes from it (one minor at most).",
)
@click.option(
    "--feature",
    "features",
    multiple=True,
    type=click.Choice(dra_features.ALL_FEATURES),
    metavar="NAME",
    help="A DRA feature to enable (repeat): " + ", ".join(dra_features.ALL_FEATURES) + ".",
)
@click.option(
    "--gate",
    "gate_wishes",
    multiple=True,
    metavar="NAME=true|false",
    callback=_gates,
    help="An explicit feature-gate wish (repeat).",
)
@click.option("--json", "as_json", is_flag=True, help="Print stable JSON instead of tables.")
def plan(
    to_version: str,
    from_version: str | None,
    features: tuple[str, ...],
    gate_wishes: dict[str, bool],
    as_json: bool,
) -> None:
    """Print per component the feature gates and runtime-config DRA needs at --to."""
    try:
        if from_version is not None:
            transition = dra_transition.plan_transition(
                from_version, to_version, features, gate_wishes
            )
            target = transition.target
        else:
            transition = None
            target = dra_plan.plan_components(to_version, features, gate_wishes)
    except dra_core.VersionParseError as exc:
        click.echo(f"Error: {exc}", err=True)
        exit_with(EXIT_CANNOT_RUN)
    except dra_core.VersionModelError as exc:  # a well-formed request the plan's checks refuse
        asked = f"--to {to_version}" + (f" --from {from_version}" if from_version else "")
        click.echo(f"Error: {asked}: {exc.reason}", err=True)
        if exc.fix:
            click.echo(f"Fix: {exc.fix}", err=True)
        exit_with(EXIT_FAILED)
    if as_json:
        click.echo(json.dumps(plan_document(target, transition), indent=2, sort_keys=True))
        return
    render(target, transition, Console(width=max(120, Console().width), soft_wrap=False))


def plan_document(
    target: dra_settings.ComponentPlan, transition: dra_transition.TransitionPlan | None
) -> dict[str, Any]:
    """The ``--json`` document: ``{"to": plan, "from": plan|null, "transition": ...|null,
    "release": what the target release registers (``dra.api.release_document``)}``."""
    return {
        "release": dra_api.release_document(target.version),
        "to": target.to_dict(),
        "from": transition.source.to_dict() if transition else None,
        "transition": transition.to_dict() if transition else None,
    }


def _cell(entries: list[str]) -> str:
    return "\n".join(entries) if entries else "-"


def render(
    target: dra_settings.ComponentPlan,
    transition: dra_transition.TransitionPlan | None,
    console: Console,
) -> None:
    """Tables for humans: the target plan, then the changes from --from."""
    v = target.version
    ka = target.kubeadm
    console.print(
        f"Kubernetes {v}: DRA settings (kubeadm config API {ka.preferred}, extraArgs as a "
        f"{ka.extra_args_shape})"
    )
    table = Table()
    table.add_column("component", no_wrap=True)
    table.add_column("feature-gates", no_wrap=True)
    table.add_column("runtime-config", no_wrap=True)
    for c in dra_core.COMPONENTS:
        settings = target.components[c]
        gates = [
            f"{k}={str(settings.feature_gates[k]).lower()}" for k in sorted(settings.feature_gates)
        ]
        rc = sorted(settings.runtime_config) if c == dra_core.APISERVER else []
        table.add_row(c, _cell(gates), _cell(rc) if c == dra_core.APISERVER else "")
    console.print(table)
    if target.features:
        console.print("features: " + ", ".join(target.features))
    for gate, why in sorted(target.omitted.items()):
        console.print(f"not set: {gate} ({why})")
    forbidden = target.components[dra_core.APISERVER].forbidden_gates
    removed = [
        g
        for g in sorted(forbidden)
        if dra_gates.gate_state(g, v).status == "removed"
        or (dra_gates.gate_state(g, v).locked and dra_gates.GATES[g].dra)
    ]
    for g in removed:
        st = dra_gates.gate_state(g, v)
        what = (
            "must be absent" if st.status == "removed" else f"must not be {not st.default}".lower()
        )
        console.print(f"{what} on every component: {g} ({forbidden[g].reason})")
    absent = target.components[dra_core.APISERVER].runtime_config_absent
    if absent:
        console.print("must be absent from --runtime-config: " + ", ".join(sorted(absent)))
    if transition is not None:
        _render_transition(transition, console)
    for warning in transition.warnings if transition is not None else target.warnings:
        console.print(f"warning: {warning}")
    verdict = dra_skew.supported_for_provision(v)
    if not verdict.ok:
        console.print(f"provision: not supported ({verdict.reason})")


def _render_transition(t: dra_transition.TransitionPlan, console: Console) -> None:
    console.print(f"Changes from {t.source.version} to {t.target.version}")
    for sc in t.state_changes:
        console.print(f"gate {sc.gate}: {sc.before} -> {sc.after}: {sc.consequence}")
    table = Table()
    table.add_column("component", no_wrap=True)
    table.add_column("change", no_wrap=True)
    table.add_column("entry", no_wrap=True)
    table.add_column("reason")
    for c in t.gate_changes:
        if c.action == "remove":
            entry = f"{c.gate}={str(c.before).lower()}"
            change = "remove feature gate"
        elif c.action == "add":
            entry = f"{c.gate}={str(c.after).lower()}"
            change = "add feature gate"
        else:
            entry = f"{c.gate}={str(c.before).lower()} -> {str(c.after).lower()}"
            change = "change feature gate"
        table.add_row(c.component, change, entry, c.reason)
    for r in t.runtime_config_changes:
        change = (
            ("drop runtime-config (required)" if r.required else "drop runtime-config")
            if r.action == "drop"
            else "add runtime-config"
        )
        table.add_row(dra_core.APISERVER, change, r.entry, r.reason)
    if table.row_count:
        console.print(table)
    else:
        console.print(f"no feature-gate or runtime-config change from {t.source.version}")
    k = t.kubeadm_change
    if k["changed"]:
        console.print(f"kubeadm config API: {k['from']} -> {k['to']}: {k['note']}")
    else:
        line = f"kubeadm config API: {k['to']} (unchanged)"
        if k["note"]:
            line += f": {k['note']}"
        console.print(line)
    for step in t.order:
        console.print(f"order: {step}")


# --------------------------------------------------------------------------- audit, apply
#
# ``gpufleet gates audit -i INVENTORY [-e KEY=VALUE ...] [--json]`` runs
# ``playbooks/dra_gate_audit.yml`` (read-only) and renders the audit the module
# ``dra_gate_audit`` returns: exit 0 when no finding failed, 1 when one did, 2 when the audit
# could not run (no inventory, no result). ``gpufleet gates apply -i INVENTORY [-e ...]
# [--check] [--diff]`` runs ``playbooks/dra_feature_gates.yml`` and exits with the runner's
# status (0 ok, 1 a host failed, 2 could not run).

AUDIT_PLAYBOOK = "dra_gate_audit"
APPLY_PLAYBOOK = "dra_feature_gates"
#: Names the audit task's action has in ansible-runner events.
AUDIT_ACTIONS = frozenset({"gpufleet.cluster.dra_gate_audit", "dra_gate_audit"})


_INVENTORY = inventory_flag()
_EXTRA = extra_vars_flag("Extra variable for the playbook (repeat); the value is read as YAML.")


def audit_result_from_event(event: dict[str, Any]) -> dict[str, Any] | None:
    """The audit dict carried by the ``runner_on_ok``/``runner_on_failed`` event of the
    ``dra_gate_audit`` task (``event_data.res.audit``), else None."""
    if event.get("event") not in ("runner_on_ok", "runner_on_failed"):
        return None
    data = event.get("event_data") or {}
    action = data.get("resolved_action") or data.get("task_action")
    res = data.get("res") or {}
    audit_doc = res.get("audit") if isinstance(res, dict) else None
    if action in AUDIT_ACTIONS and isinstance(audit_doc, dict):
        return audit_doc
    return None


def audit_exit_status(audit_doc: dict[str, Any] | None) -> int:
    """0 no failed finding, 1 a finding failed, 2 no audit result (it could not run)."""
    if audit_doc is None:
        return EXIT_CANNOT_RUN
    return status_of(bool((audit_doc.get("counts") or {}).get("fail")))


_SEVERITY_STYLE = {"fail": "bold red", "warn": "yellow"}


def _entries_text(cell: dict[str, Any]) -> Any:
    from rich.text import Text

    flagged = cell.get("flagged") or {}
    text = Text()
    entries = [(k, "true" if v else "false") for k, v in (cell.get("feature_gates") or {}).items()]
    entries += list((cell.get("runtime_config") or {}).items())
    for i, (name, value) in enumerate(entries):
        if i:
            text.append("\n")
        text.append(f"{name}={value}", style=_SEVERITY_STYLE.get(flagged.get(name, ""), ""))
    return text if entries else Text("-", style="dim")


def render_audit(audit_doc: dict[str, Any], console: Console) -> None:
    """The audit for humans: a table host x component (entries with a failed finding in
    red, with a warning in yellow; the ConfigMaps as the last row), then the findings,
    failures first."""
    from rich.text import Text

    summary = audit_doc.get("summary") or {}
    counts = audit_doc.get("counts") or {}
    components = summary.get("components") or list(dra_core.COMPONENTS)
    cells = summary.get("cells") or {}
    console.print(
        f"DRA gate audit against Kubernetes {audit_doc.get('version')}: "
        f"[bold red]{counts.get('fail', 0)} failed[/bold red], "
        f"[yellow]{counts.get('warn', 0)} warnings[/yellow]"
    )
    table = Table(
        caption="each cell: the process state, then the feature gates and runtime-config it "
        "sets (- none: every gate at its default); red a failed finding, yellow a warning",
        caption_justify="left",
    )
    table.add_column("host", no_wrap=True)
    for c in components:
        table.add_column(c, no_wrap=True)
    for host in summary.get("hosts") or []:
        row: list[Any] = [host]
        for c in components:
            cell = cells.get(c, {}).get(host)
            if cell is None:
                row.append(Text("", style="dim"))
                continue
            text = Text()
            state = cell.get("state", "")
            text.append(state, style="bold red" if state != "running" else "dim")
            if cell.get("metrics") == "read":
                text.append(", /metrics", style="dim")
            text.append("\n")
            text.append_text(_entries_text(cell))
            row.append(text)
        table.add_row(*row)
    configmaps = summary.get("configmaps")
    if configmaps is not None:
        table.add_row(
            Text("ConfigMaps", style="italic"),
            *(
                _entries_text(configmaps[c]) if c in configmaps else Text("-", style="dim")
                for c in components
            ),
        )
    console.print(table)
    findings = audit_doc.get("findings") or []
    if not findings:
        console.print("[green]no findings[/green]")
    for f in findings:
        line = Text()
        line.append(f"{f['severity'].upper():4} ", style=_SEVERITY_STYLE[f["severity"]])
        line.append(f"{f['id']} ", style="bold")
        where = " ".join(x for x in (f.get("host") or "(cluster)", f.get("component")) if x)
        line.append(where + (f" {f['name']}" if f.get("name") else ""))
        values = ", ".join(
            f"{k}: {'-' if v is None else v}" for k, v in (f.get("values") or {}).items()
        )
        if values:
            line.append(f" [{values}]", style="dim")
        console.print(line)
        console.print(Text(f"     {f['message']}"))
        console.print(Text(f"     fix: {f['fix']}", style="cyan"))


@gates.command("audit")
@_INVENTORY
@_EXTRA
@click.option("--json", "as_json", is_flag=True, help="Print the audit as JSON on stdout.")
def audit_command(inventories: tuple[str, ...], extra_vars: dict[str, Any], as_json: bool) -> None:
    """Audit the DRA feature gates of a cluster: processes, files, ConfigMaps, hosts and the
    version model (read-only; playbooks/dra_gate_audit.yml).

    Exit 0 when no finding failed, 1 when one did, 2 when the audit could not run."""
    from gpufleet import runner

    extravars = {"dra_gate_audit_fail_on_drift": False, **extra_vars}
    found: list[dict[str, Any]] = []
    errors: list[str] = []

    def on_event(event: dict[str, Any]) -> None:
        doc = audit_result_from_event(event)
        if doc is not None:
            found.append(doc)
        elif event.get("event") == "runner_on_failed":
            data = event.get("event_data") or {}
            if (data.get("resolved_action") or data.get("task_action")) in AUDIT_ACTIONS:
                errors.append(str((data.get("res") or {}).get("msg") or "the audit task failed"))

    progress = Console(stderr=True) if as_json else Console()
    result = run_or_exit(
        lambda: runner.run_playbook(
            AUDIT_PLAYBOOK,
            list(inventories),
            extravars=extravars,
            console=progress,
            on_event=on_event,
        ),
        runner.RunError,
    )
    audit_doc = found[-1] if found else None
    status = audit_exit_status(audit_doc)
    if audit_doc is None:
        why = f": {errors[-1]}" if errors else " (see the failures above)"
        click.echo(
            f"Error: the audit did not produce a result{why}; ansible-playbook status "
            f"{result.status}",
            err=True,
        )
        exit_with(status)
    if as_json:
        click.echo(json.dumps(audit_doc, indent=2, sort_keys=True))
    else:
        render_audit(audit_doc, Console(width=max(160, Console().width)))
    exit_with(status)


@gates.command("apply")
@_INVENTORY
@_EXTRA
@click.option("--check", is_flag=True, help="Report what would change; change nothing.")
@click.option("--diff", is_flag=True, help="Show the changes to files and ConfigMaps.")
def apply_command(
    inventories: tuple[str, ...], extra_vars: dict[str, Any], check: bool, diff: bool
) -> None:
    """Set the DRA feature gates and runtime-config on every component of a cluster
    (playbooks/dra_feature_gates.yml), with a live progress display.

    Exit 0 when every host succeeded, 1 when a host failed, 2 when it could not run."""
    from gpufleet import runner

    result = run_or_exit(
        lambda: runner.run_playbook(
            APPLY_PLAYBOOK, list(inventories), extravars=extra_vars, check=check, diff=diff
        ),
        runner.RunError,
    )
    exit_with(result.status)
