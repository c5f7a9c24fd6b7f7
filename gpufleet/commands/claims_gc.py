"""``gpufleet claims gc`` and ``gpufleet claims explain``: leaked and pending ResourceClaims.

``gpufleet claims gc [--apply] [--namespace NS] [--kubeconfig PATH] [--json]`` lists the
claims and pods once, finds claims that hold devices for pods that are gone (as
kube-controller-manager's resource claim controller would clean them up, see
``plugins/module_utils/claims/leaks.py``) and, with ``--apply``, releases them
(``plugins/module_utils/claims/release.py``): drops
the dead ``status.reservedFor`` entries, clears ``status.allocation``, removes the
``resource.kubernetes.io/delete-protection`` finalizer and deletes generated claims whose
pod is gone. Without ``--apply`` it only prints the plan. A claim that a live pod reserves
or references is never touched. Every update carries the listed ``resourceVersion``: a
claim that changed since the list is skipped (409), never overwritten.

``gpufleet claims explain NAMESPACE/CLAIM [--kubeconfig PATH] [--json]`` evaluates the
claim's DeviceClass and request selectors (Kubernetes' CEL environment on cel-python)
against every published device and prints per request and node how many devices match
and why the others do not. Whether a selector compiles is judged for the release the API
server reports (``GET /version``): by that release's own environment when its
``gpufleet-celcheck`` is cached, otherwise by the Python environment of that release
(``gpufleet.build.celcheck.judge_for``); ``celJudgedBy`` says which.

Exit codes: gc: 0 nothing to do or everything applied, 1 an update failed, 2 cannot run.
explain: 0 the claim is allocated or would fit, 1 it cannot be allocated as published
now, 2 cannot run (no such claim, API unreachable).

gpufleet/cli.py adds both to the ``claims`` group.
"""

from __future__ import annotations

import json
from typing import Any

import click
from ansible_collections.gpufleet.cluster.plugins.module_utils.claims import explain as cexplain
from ansible_collections.gpufleet.cluster.plugins.module_utils.claims import gc as cgc
from ansible_collections.gpufleet.cluster.plugins.module_utils.claims import metadata as cm
from ansible_collections.gpufleet.cluster.plugins.module_utils.claims import pods as cpods
from ansible_collections.gpufleet.cluster.plugins.module_utils.claims import (
    release as claim_release,
)
from ansible_collections.gpufleet.cluster.plugins.module_utils.claims import slices as cslices
from ansible_collections.gpufleet.cluster.plugins.module_utils.cluster import (
    listing as cluster_listing,
)
from ansible_collections.gpufleet.cluster.plugins.module_utils.dra import core as dra_core
from ansible_collections.gpufleet.cluster.plugins.module_utils.dra import resource_versions
from ansible_collections.gpufleet.cluster.plugins.module_utils.kube import client as vk
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from gpufleet.commands._cel import judge_for
from gpufleet.exit import EXIT_CANNOT_RUN, exit_with, status_of


def _kube(kubeconfig: str | None, context: str | None) -> vk.Kube:
    try:
        return vk.Kube(kubeconfig, context)
    except vk.KubeError as err:
        Console(stderr=True).print(f"[red]error:[/red] {escape(err.message)}")
        exit_with(EXIT_CANNOT_RUN)


def _name(value: str, hint: str, subdomain: bool) -> str:
    """``value`` when it is a valid namespace (DNS label) or object name (DNS subdomain);
    click.BadParameter (exit 2) naming ``hint`` otherwise."""
    try:
        return cm.check_name(value, "namespace" if not subdomain else "name", subdomain)
    except cm.ClaimTemplateError as exc:
        raise click.BadParameter(str(exc), param_hint=hint) from None


def _resource_version(kube: vk.Kube) -> str:
    try:
        _, rv = cluster_listing.resource_version(kube)
    except vk.KubeError as err:
        what = escape(err.message if err.status is None else f"{err.status}: {err.message}")
        Console(stderr=True).print(f"[red]error:[/red] cannot read {kube.server}: {what}")
        exit_with(EXIT_CANNOT_RUN)
    if not rv:
        Console(stderr=True).print(
            "[red]error:[/red] the cluster serves no resource.k8s.io version this command reads "
            f"({', '.join(resource_versions.OBJECT_RESOURCE_VERSIONS)}); DRA is not enabled"
        )
        exit_with(EXIT_CANNOT_RUN)
    return rv


def cluster_release(kube: vk.Kube) -> tuple[str | None, str]:
    """The release the API server reports (``GET /version`` gitVersion ``v1.37.2`` ->
    ``1.37.2``) and where it came from; None and why when it cannot be read (the selectors
    are then judged for the default pinned release)."""
    try:
        git = (kube.get("/version") or {}).get("gitVersion")
        return str(dra_core.parse_version(git, "gitVersion")), "GET /version"
    except vk.KubeError as err:
        return None, f"GET /version failed: {err.message}"
    except (dra_core.VersionParseError, AttributeError) as err:
        return None, f"GET /version gave no release: {err}"


@click.command("gc")
@click.option(
    "--apply", "apply_", is_flag=True, help="Release the leaked claims (default: dry run)."
)
@click.option("--namespace", "-n", default=None, help="Only this namespace (default: all).")
@click.option(
    "--kubeconfig", type=click.Path(dir_okay=False), default=None, help="Kubeconfig file."
)
@click.option("--context", default=None, help="Kubeconfig context.")
@click.option("--json", "as_json", is_flag=True, help="Print the plan and results as JSON.")
def gc(
    apply_: bool, namespace: str | None, kubeconfig: str | None, context: str | None, as_json: bool
) -> None:
    """Release ResourceClaims leaked by pods that no longer exist (dry run by default)."""
    if namespace is not None and not namespace.strip():  # an unset shell variable: not "all"
        raise click.BadParameter(
            f"{namespace!r} is empty; fix: give a namespace (e.g. -n team-a), or leave "
            "--namespace out to read every namespace",
            param_hint="'--namespace'",
        )
    if namespace is not None:
        _name(namespace, "'--namespace'", subdomain=False)
    kube = _kube(kubeconfig, context)
    rv = _resource_version(kube)
    prefix = f"/namespaces/{namespace}" if namespace else ""
    try:
        # trimmed and stored compressed page by page, so that a fleet's claims and pods
        # fit in memory; the judging walks them again page by page
        with vk.gc_paused():
            claim_list = kube.paged(
                f"/apis/resource.k8s.io/{rv}{prefix}/resourceclaims",
                trim=cluster_listing.trim_whole,
                schema=cluster_listing.SCHEMAS["resourceclaims"],
            )
            pods = kube.paged(
                f"/api/v1{prefix}/pods",
                trim=cluster_listing.trim_pod,
                schema=cluster_listing.POD_SCHEMA,
            )
    except vk.KubeError as err:
        Console(stderr=True).print(
            f"[red]error:[/red] cannot list claims and pods: {escape(str(err))}"
        )
        exit_with(EXIT_CANNOT_RUN)
    with vk.gc_paused():
        plan = cgc.plan_gc(claim_list, pods)
    acted = {a.claim for a in plan if a.action != "skip"} if apply_ else set()
    by_key = {cpods.key(c): c for c in claim_list if cpods.key(c) in acted}
    results: list[dict[str, Any]] = []
    failed = 0
    for action in plan:
        entry = {**action.to_dict(), "applied": False, "error": None}
        if apply_ and action.action != "skip":
            try:
                claim_release.release_claim(kube, rv, by_key[action.claim], action)
                entry["applied"] = True
            except vk.KubeError as err:
                failed += 1
                entry["error"] = str(err) + (
                    " (the claim changed since it was listed: not touched)"
                    if err.status == 409
                    else ""
                )
        results.append(entry)
    if as_json:
        click.echo(
            json.dumps(
                {"apply": apply_, "api_requests": kube.requests, "claims": results}, indent=2
            )
        )
    else:
        console = Console()
        table = Table(title=f"claims gc ({'apply' if apply_ else 'dry run'})")
        for col in ("claim", "action", "devices", "reason", "result"):
            table.add_column(col, overflow="fold")
        for r in results:
            result = (
                "[red]" + r["error"] + "[/red]"
                if r["error"]
                else "done"
                if r["applied"]
                else "-"
                if r["action"] == "skip"
                else "would do (use --apply)"
            )
            table.add_row(
                r["claim"], r["action"], "\n".join(r["devices"]) or "-", r["reason"], result
            )
        console.print(table if results else "no leaked ResourceClaim")
        console.print(
            f"{len(claim_list)} claim(s), {len(pods)} pod(s) listed; {kube.requests} API requests"
        )
    exit_with(status_of(bool(failed)))


@click.command("explain")
@click.argument("claim_ref", metavar="NAMESPACE/CLAIM")
@click.option(
    "--kubeconfig", type=click.Path(dir_okay=False), default=None, help="Kubeconfig file."
)
@click.option("--context", default=None, help="Kubeconfig context.")
@click.option("--json", "as_json", is_flag=True, help="Print the explanation as JSON.")
def explain(claim_ref: str, kubeconfig: str | None, context: str | None, as_json: bool) -> None:
    """Say per node and device which selector or constraint keeps a claim from a device."""
    ns, sep, name = claim_ref.partition("/")
    if not sep or not ns or not name:
        raise click.BadParameter(
            f"{claim_ref!r} is not NAMESPACE/CLAIM", param_hint="NAMESPACE/CLAIM"
        )
    _name(ns, "NAMESPACE/CLAIM (namespace)", subdomain=False)
    _name(name, "NAMESPACE/CLAIM (claim)", subdomain=True)
    kube = _kube(kubeconfig, context)
    rv = _resource_version(kube)
    base = f"/apis/resource.k8s.io/{rv}"
    try:
        claim = kube.get(f"{base}/namespaces/{ns}/resourceclaims/{name}")
    except vk.KubeError as err:
        Console(stderr=True).print(
            f"[red]error:[/red] ResourceClaim {ns}/{name}: {escape(str(err))}"
        )
        exit_with(EXIT_CANNOT_RUN)
    try:
        classes = kube.list(f"{base}/deviceclasses")
        slices = kube.list(f"{base}/resourceslices")
        claim_list = kube.list(f"{base}/resourceclaims")
        nodes = kube.list("/api/v1/nodes")
        pods = kube.list(f"/api/v1/namespaces/{ns}/pods")
    except vk.KubeError as err:
        Console(stderr=True).print(
            f"[red]error:[/red] cannot list what the explanation needs: {escape(str(err))}"
        )
        exit_with(EXIT_CANNOT_RUN)
    release, release_source = cluster_release(kube)
    judge, judged_by = judge_for([claim, *classes], release)
    result = cexplain.explain_claim(claim, classes, slices, claim_list, nodes, pods, judge=judge)
    result["kubernetesVersion"] = release
    result["kubernetesVersionSource"] = release_source
    result["celJudgedBy"] = judged_by
    allocated = cslices.allocated_devices(claim)
    result["allocated"] = allocated
    result["api_requests"] = kube.requests
    if as_json:
        click.echo(json.dumps(result, indent=2))
    else:
        render_explain(Console(), result)
    exit_with(status_of(not (allocated or result["verdict"] == "would-fit")))


def render_explain(console: Console, result: dict[str, Any]) -> None:
    """The explanation as rich tables: one per request, a row per node."""
    state = (
        f"allocated: {', '.join(result['allocated'])}"
        if result.get("allocated")
        else "not allocated"
    )
    console.print(
        f"[bold]ResourceClaim {result['claim']}[/bold] ({state}); verdict: {result['verdict']}"
    )
    console.print(result["summary"])
    if result.get("celJudgedBy"):
        release = result.get("kubernetesVersion") or "unknown"
        console.print(
            f"selectors judged by {result['celJudgedBy']} "
            f"(cluster release {release}: {result.get('kubernetesVersionSource', '-')})"
        )
    for req in result["requests"]:
        table = Table(title=f"request {req['request']} ({req['device_class']})")
        for col in ("node", "devices", "matching", "free", "fits", "why the others do not match"):
            table.add_column(col, overflow="fold")
        for n in req["nodes"]:
            table.add_row(
                n["node"] + ("" if n["ready"] else " (NotReady)"),
                str(n["total"]),
                str(n["matching"]),
                str(n["free"]),
                "yes" if n["fits"] else "no",
                "\n".join(f"{r} ({c})" for r, c in n["reasons"]) or "-",
            )
        console.print(table)
        for cs in req.get("counter_sets") or []:
            free = ", ".join(map(str, cs["memory_slices_free"])) or "none"
            console.print(
                f"shared counters exhausted: {escape(cs['counter_set'])} on "
                f"{escape(cs['node'])} (memory slices free: {free})"
            )
            console.print(counters_table(cs))
        for err, count in req["errors"]:
            console.print(f"[red]CEL error ({count} devices):[/red] {err}")
    for c in result["constraints"]:
        console.print(c["summary"])
    for p in result["pods"]:
        if p["scheduler"]:
            console.print(f"pod {p['pod']}: scheduler says: {p['scheduler']}")


def counters_table(cs: dict[str, Any]) -> Table:
    """One CounterSet of an explanation (``claims.explain``'s ``counter_sets``): per
    exhausted counter its capacity, what allocated devices consume, what a matching
    device needs, the claims holding it and how many matching devices it stops."""
    table = Table()
    for col in ("counter", "capacity", "consumed", "needed", "held by", "devices stopped"):
        table.add_column(col, overflow="fold")
    for e in cs["exhausted"]:
        table.add_row(
            e["counter"] or "(counter set not published)",
            *(str(e[k]) for k in ("capacity", "consumed", "needed")),
            ", ".join(e["holders"]) or "-",
            str(e["devices"]),
        )
    return table
