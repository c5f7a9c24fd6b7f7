"""``gpufleet mig advise``: propose re-carving MIG GPUs for the claims that wait (applied
by ``gpufleet mig apply --proposal``, commands/mig_apply.py).

``gpufleet mig advise [--kubeconfig PATH] [--context NAME] [--json FILE|-] [--max-gpus
N] [--allow-disturb]`` lists Nodes, Pods, ResourceSlices and ResourceClaims once (the
listing of ``gpufleet report``) and prints, per GPU to re-carve, its node, index, current
and proposed layout, the pending claims it would serve and the running claims it would
disturb (with their pods). GPUs published with shared counters (NVIDIA's dynamic MIG) are
not re-carved: per GPU the largest profile that fits now, the claims to move for each
larger profile and for the largest one a pending claim asks for, and per node the GPU
cheapest to drain. The decisions are ``plugins/module_utils/report/mig_advice.py`` and
``plugins/module_utils/claims/counter_moves.py``.
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
from ansible_collections.gpufleet.cluster.plugins.module_utils.kube import client as vk
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


def _slices(slices: list[int]) -> str:
    return ",".join(map(str, slices)) or "none"


def _moves(moves: list[Mapping[str, Any]]) -> str:
    if not moves:
        return "fits now"
    return "move " + ", ".join(
        f"{m['claim']} (memory slices {_slices(m['memory_slices'])})" for m in moves
    )


def render_dynamic(console: Console, doc: Mapping[str, Any]) -> None:
    """Per GPU with shared counters what to move for larger profiles, then the drain
    order per node."""
    if not doc["dynamic"]:
        return
    console.print(f"dynamic MIG (shared counters), GPUs {len(doc['dynamic'])}:")
    for g in doc["dynamic"]:
        console.print(
            f"  {escape(g['node'])} {escape(g['gpu'])} ({escape(g['model'] or 'unknown')}): "
            f"free memory slices {_slices(g['memory_slices_free'])}; largest profile that "
            f"fits now {escape(g['largest_fitting'] or 'none')}"
        )
        for b in g["blocked"]:
            where = "; ".join(f"at {p['start']}: {_moves(p['moves'])}" for p in b["placements"])
            console.print(f"    {escape(b['profile'])}: {escape(where or 'no placement')}")
        t = g["target"]
        if t:
            why = f"asked by {', '.join(t['asked_by'])}" if t["asked_by"] else "largest profile"
            console.print(
                f"    for {escape(t['profile'])} ({escape(why)}): {escape(_moves(t['moves']))}"
                f" -> {escape(t['device'])} (memory slices {_slices(t['memory_slices'])})"
            )
    console.print("drain order (moving these claims frees the whole GPU):")
    for n in doc["drain"]:
        order = "; ".join(
            f"{i}. {g['gpu']}: {_moves(g['moves'])}" for i, g in enumerate(n["order"], 1)
        )
        free = f" (free now: {', '.join(n['gpus_free'])})" if n["gpus_free"] else ""
        console.print(f"  {escape(n['node'])}: {escape(order or 'no GPU holds a claim')}{free}")


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
    render_dynamic(console, doc)


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
    with vk.gc_paused():  # the pages walked make millions of objects, no cycles
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
