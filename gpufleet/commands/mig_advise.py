"""``gpufleet mig advise``: propose re-carving MIG GPUs for the claims that wait (applied
by ``gpufleet mig apply --proposal``, commands/mig_apply.py).

``gpufleet mig advise [--kubeconfig PATH] [--context NAME] [--json FILE|-] [--max-gpus
N] [--allow-disturb]`` lists Nodes, Pods, ResourceSlices and ResourceClaims once (the
listing of ``gpufleet report``) and prints, per GPU to re-carve, its node, index, current
and proposed layout, the pending claims it would serve and the running claims it would
disturb (with their pods). The decisions are ``plugins/module_utils/report/mig_advice.py``.
``--json`` writes the proposal that ``mig apply --proposal`` takes.

Exit codes: 0 the proposal was written (also when there is nothing to propose: a line
says so); 2 it could not run (kubeconfig, API server, DRA not served, an output path that
cannot be written, a bad option).
"""

from __future__ import annotations

import datetime as _dt
from collections.abc import Mapping
from typing import Any

import click
from ansible_collections.gpufleet.cluster.plugins.module_utils.report import mig_advice as ma
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from gpufleet.commands._cluster import check_kubeconfig, read_cluster
from gpufleet.commands._output import check_outputs, write_json


def _layout(layout: Mapping[str, int] | None, enabled: bool = True) -> str:
    if not enabled:
        return "MIG disabled"
    return ", ".join(f"{n} x {p}" for p, n in sorted(layout.items())) if layout else "none"


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
    check_kubeconfig(kubeconfig)
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
        write_json(doc, json_file)
