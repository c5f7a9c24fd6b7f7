"""``gpufleet mig advise`` and ``gpufleet mig apply --proposal``: re-carving MIG GPUs for
the claims that wait.

``gpufleet mig advise [--kubeconfig PATH] [--context NAME] [--json FILE|-] [--max-gpus
N] [--allow-disturb]`` lists Nodes, Pods, ResourceSlices and ResourceClaims once (the
listing of ``gpufleet report``) and prints, per GPU to re-carve, its node, index, current
and proposed layout, the pending claims it would serve and the running claims it would
disturb (with their pods). The decisions are ``plugins/module_utils/report/mig_advice.py``.
``--json`` writes the proposal that ``mig apply --proposal`` takes.

Exit codes: 0 the proposal was written (also when there is nothing to propose: a line
says so); 2 it could not run (kubeconfig, API server, DRA not served, an output path that
cannot be written, a bad option).

``gpufleet mig apply -i INV --proposal FILE [--kubeconfig PATH] [--maintenance-window
START/END] [--allow-disturb] [--check]`` lists the cluster again and refuses (exit 1) a
proposal whose current layouts no longer match it, or (exit 2) one that would disturb
running claims unless the proposal was made with ``--allow-disturb`` and the operator
passes ``--allow-disturb`` again; outside the maintenance window it refuses (exit 1).
Then each node's changed GPUs get role ``mig`` variables (``report.mig_advice.host_vars``)
and ``playbooks/mig.yml`` runs on those nodes only.
"""

from __future__ import annotations

import datetime as _dt
import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import click
from ansible_collections.gpufleet.cluster.plugins.module_utils.common import limits as ig
from ansible_collections.gpufleet.cluster.plugins.module_utils.kube import client as vk
from ansible_collections.gpufleet.cluster.plugins.module_utils.report import fleet as fr
from ansible_collections.gpufleet.cluster.plugins.module_utils.report import mig_advice as ma
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from gpufleet.commands.report import read_cluster
from gpufleet.commands.validate import check_outputs, write_json
from gpufleet.exit import EXIT_CANNOT_RUN, EXIT_FAILED, exit_with

#: Role ``mig`` variables a proposal sets per host (``report.mig_advice.host_vars``).
ROLE_VARS = ("mig_enabled", "mig_devices", "mig_layout", "mig_config", "mig_config_name",
             "mig_config_file")  # fmt: skip
#: Extra variable that carries the per-host variables into the play.
PROPOSAL_VAR = "gpufleet_mig_proposal"


def _layout(layout: Mapping[str, int] | None, enabled: bool = True) -> str:
    if not enabled:
        return "MIG disabled"
    return ", ".join(f"{n} x {p}" for p, n in sorted(layout.items())) if layout else "none"


def _check_kubeconfig(kubeconfig: str | None) -> None:
    if kubeconfig:
        try:
            vk.check_kubeconfig(kubeconfig)
        except vk.KubeError as exc:
            raise click.BadParameter(exc.message, param_hint="'--kubeconfig'") from None


def render(console: Console, doc: Mapping[str, Any]) -> None:
    """The changes as one table, then the summary and the claims left waiting."""
    s = doc["summary"]
    if doc["changes"]:
        table = Table(title="proposed MIG re-carving", title_justify="left")
        for head in ("node", "GPU", "tier", "current layout", "proposed layout", "serves",
                     "disturbs"):  # fmt: skip
            table.add_column(head, overflow="fold")
        for c in doc["changes"]:
            cur = c["current"]
            disturbs = "; ".join(
                f"{d['claim']} (pods {', '.join(d['pods']) or 'none'})" for d in c["disturbs"]
            )
            table.add_row(
                escape(c["node"]),
                str(c["gpu"]),
                c["tier"],
                escape(_layout(cur["layout"], cur["mig_enabled"])),
                escape(_layout(c["proposed"]["layout"])),
                escape(", ".join(c["serves"])),
                escape(disturbs or "none"),
            )
        console.print(table)
    else:
        console.print("nothing to propose: no GPU layout change serves a pending MIG claim")
    console.print(
        f"pending claims {s['pending_claims']}: MIG {s['pending_mig']} (served by idle "
        f"devices now {s['servable_now']}, by the changes {s['served']}, left waiting "
        f"{s['unserved']}), other shapes {s['not_considered']}; GPUs seen {s['gpus_seen']}, "
        f"to re-carve {s['gpus_changed']}, running claims disturbed {s['claims_disturbed']}"
    )
    for u in doc["unserved"][:10]:
        console.print(f"  waiting {escape(u['claim'])}: {escape(u['reason'])}")
    for g in doc["gpus_skipped"][:10]:
        where = f"GPU {g['gpu']}" if "gpu" in g else f"device {g.get('device')}"
        console.print(f"  skipped node {escape(g['node'])} {where}: {escape(g['reason'])}")


@click.command("advise")
@click.option("--kubeconfig", type=click.Path(dir_okay=False), default=None, help="Kubeconfig.")
@click.option("--context", default=None, help="Kubeconfig context.")
@click.option(
    "--json", "json_file", metavar="FILE", help="Write the proposal as JSON ('-': stdout)."
)
@click.option(
    "--max-gpus",
    type=click.IntRange(min=1),
    default=None,
    metavar="N",
    help="Re-carve at most N GPUs (default: as many as serve a claim).",
)
@click.option(
    "--allow-disturb",
    is_flag=True,
    help="Also propose layouts that destroy GPU instances running claims use (listed).",
)
def advise(
    kubeconfig: str | None,
    context: str | None,
    json_file: str | None,
    max_gpus: int | None,
    allow_disturb: bool,
) -> None:
    """Propose MIG layouts per GPU that serve the pending MIG claims; exit 0 written, 2
    could not run."""
    check_outputs({"--json": json_file})
    _check_kubeconfig(kubeconfig)
    kube, listing = read_cluster(kubeconfig, context)
    doc = ma.advise(
        listing.slices,
        listing.claims,
        listing.pods,
        listing.nodes,
        max_gpus=max_gpus,
        allow_disturb=allow_disturb,
    ).to_dict()
    doc["allow_disturb"] = allow_disturb
    doc["max_gpus"] = max_gpus
    doc["meta"] = {
        "server": kube.server,
        "api_requests": kube.requests,
        "generated_at": _dt.datetime.now(_dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
    }
    render(Console(stderr=json_file == "-", soft_wrap=True), doc)
    if json_file:
        try:
            write_json(doc, json_file)
        except OSError as err:
            click.echo(
                f"Error: cannot write {json_file}: {err}; fix: give a writable path", err=True
            )
            exit_with(EXIT_CANNOT_RUN)


# ------------------------------------------------------------------ apply --proposal


def read_proposal(path: str) -> dict[str, Any]:
    """The proposal document of ``path``; click.BadParameter (exit 2) for a missing file,
    invalid JSON or a document that is not a ``gpufleet mig advise`` proposal."""
    what = f"--proposal {path}"
    try:
        doc = ig.load_json(
            ig.read_text(Path(path), what) or "", what, "gpufleet mig advise --json F"
        )
    except ig.InputError as exc:
        raise click.BadParameter(str(exc), param_hint="'--proposal'") from None
    fix = "fix: write it with gpufleet mig advise --json FILE"
    if not isinstance(doc, dict) or doc.get("kind") != ma.PROPOSAL_KIND:
        raise click.BadParameter(
            f"{path} is not a MIG proposal (kind {ma.PROPOSAL_KIND!r} missing); {fix}",
            param_hint="'--proposal'",
        )
    changes = doc.get("changes")
    keys = ("node", "gpu", "current", "proposed")
    if not isinstance(changes, list) or not all(
        isinstance(c, dict) and all(k in c for k in keys) for c in changes
    ):
        raise click.BadParameter(
            f"{path}: 'changes' must be a list of objects with {', '.join(keys)}; {fix}",
            param_hint="'--proposal'",
        )
    return doc


def parse_window(value: str) -> tuple[_dt.datetime, _dt.datetime]:
    """``START/END`` (ISO 8601 with a time zone, e.g. ``2026-12-03T22:00Z/2026-12-04T02:00Z``)
    as two aware datetimes; click.BadParameter (exit 2) otherwise."""
    example = "2026-12-03T22:00:00Z/2026-12-04T02:00:00Z"
    parts = value.split("/")
    try:
        if len(parts) != 2:
            raise ValueError
        start, end = (_dt.datetime.fromisoformat(p.strip().replace("Z", "+00:00")) for p in parts)
    except ValueError:
        raise click.BadParameter(
            f"{value[:80]!r} is not START/END; write e.g. {example}",
            param_hint="'--maintenance-window'",
        ) from None
    if start.tzinfo is None or end.tzinfo is None or end <= start:
        raise click.BadParameter(
            f"{value[:80]!r}: give both times with a time zone (Z or +HH:MM) and END after "
            f"START, e.g. {example}",
            param_hint="'--maintenance-window'",
        )
    return start, end


def inventory_hosts(inventories: Sequence[str], nodes: Sequence[str]) -> dict[str, str]:
    """Node name -> inventory host of group ``gpu_nodes`` (the host's
    ``kubernetes_node_name``, else its name, as role ``mig`` names its node). Exits 2
    naming the nodes no host stands for."""
    from ansible.inventory.manager import InventoryManager
    from ansible.parsing.dataloader import DataLoader
    from ansible.vars.manager import VariableManager

    from gpufleet import runner

    try:
        runner.check_inventory(inventories, groups=("gpu_nodes",))
    except runner.RunError as exc:
        click.echo(f"Error: {exc}", err=True)
        exit_with(EXIT_CANNOT_RUN)
    loader = DataLoader()
    inv = InventoryManager(loader=loader, sources=[str(Path(i).resolve()) for i in inventories])
    variables = VariableManager(loader=loader, inventory=inv)
    names: dict[str, str] = {}
    for host in inv.groups["gpu_nodes"].get_hosts():
        name = variables.get_vars(host=host).get("kubernetes_node_name") or host.name
        names[host.name if "{{" in str(name) else str(name)] = host.name
    missing = [n for n in nodes if n not in names]
    if missing:
        click.echo(
            f"Error: --proposal names node(s) {', '.join(missing)} that no host of group "
            f"gpu_nodes of -i {' '.join(inventories)} stands for; fix: add them to gpu_nodes "
            "(host name = node name, or set kubernetes_node_name)",
            err=True,
        )
        exit_with(EXIT_CANNOT_RUN)
    return {n: names[n] for n in nodes}


def proposal_run(
    inventories: Sequence[str],
    proposal: str,
    kubeconfig: str | None,
    context: str | None,
    window: str | None,
    allow_disturb: bool,
    now: _dt.datetime | None = None,
) -> tuple[dict[str, Any], str] | None:
    """Check ``proposal`` against the cluster and return (extra variables, ``--limit``)
    for ``playbooks/mig.yml``; None when it changes nothing. Exits 1 for a stale proposal
    or outside the maintenance window, 2 for bad input or disturbance not confirmed."""
    doc = read_proposal(proposal)
    if window:
        start, end = parse_window(window)
        moment = now or _dt.datetime.now(_dt.UTC)
        if not start <= moment < end:
            click.echo(
                f"Error: it is {moment:%Y-%m-%dT%H:%M:%SZ}, outside the maintenance window "
                f"{window}; run it within the window",
                err=True,
            )
            exit_with(EXIT_FAILED)
    changes = doc["changes"]
    if not changes:
        click.echo("the proposal changes no GPU; nothing to apply")
        return None
    _check_kubeconfig(kubeconfig)
    _, listing = read_cluster(kubeconfig, context)
    slices, _ = fr.readable_objects("resourceslices", listing.slices)
    claims, _ = fr.readable_objects("resourceclaims", listing.claims)
    gpus, _ = ma.gpus_of(slices, claims)
    stale = ma.stale_reasons(changes, gpus)
    if stale:
        click.echo(
            "Error: the proposal is stale: "
            + "; ".join(stale)
            + "; fix: run gpufleet mig advise again and apply its new proposal",
            err=True,
        )
        exit_with(EXIT_FAILED)
    by_key = {(g.node, g.index): g for g in gpus}
    disturbed = {
        f"{c['node']} GPU {c['gpu']}": ma.disturbed_by(
            by_key[(c["node"], c["gpu"])], c["proposed"]["placements"]
        )
        for c in changes
    }
    disturbed = {k: v for k, v in disturbed.items() if v}
    if disturbed and not (doc.get("allow_disturb") and allow_disturb):
        said = "the proposal allows it" if doc.get("allow_disturb") else "the proposal does not"
        click.echo(
            "Error: applying it would disturb running claims: "
            + "; ".join(f"{k}: {', '.join(v)}" for k, v in disturbed.items())
            + f" ({said}); fix: drain those pods in a maintenance window, make the proposal "
            "with gpufleet mig advise --allow-disturb and pass --allow-disturb here too",
            err=True,
        )
        exit_with(EXIT_CANNOT_RUN)
    per_node = ma.host_vars(changes)
    hosts = inventory_hosts(inventories, list(per_node))
    extravars: dict[str, Any] = {PROPOSAL_VAR: {hosts[n]: v for n, v in per_node.items()}}
    for name in ROLE_VARS:
        extravars[name] = f"{{{{ {PROPOSAL_VAR}[inventory_hostname].{name} }}}}"
    return extravars, ",".join(hosts[n] for n in per_node)


def describe(extravars: Mapping[str, Any]) -> str:
    """One line per host: the GPUs and layouts the run will carve."""
    lines = []
    for host, v in extravars[PROPOSAL_VAR].items():
        if v["mig_layout"]:
            what = json.dumps(v["mig_layout"], sort_keys=True)
        else:
            entries = v["mig_config"]["mig-configs"][ma.CONFIG_NAME]
            what = "; ".join(
                f"GPU {e['devices'][0]}: {json.dumps(e['mig-devices'], sort_keys=True)}"
                for e in entries
            )
        lines.append(f"{host}: GPUs {v['mig_devices']} -> {what}")
    return "\n".join(lines)
