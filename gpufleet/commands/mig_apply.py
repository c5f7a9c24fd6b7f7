"""``gpufleet mig apply``: carve MIG GPU instances on the GPU nodes of an inventory
(``playbooks/mig.yml``, role ``mig``), a batch at a time.

``gpufleet mig apply -i INV [--layout NAME|JSON|@FILE] [--config-name NAME] [--limit
PATTERN] [--check] [--diff]`` passes the layout as the role's variables (``mig_layout``,
``mig_config_file``, ``mig_config_name``).

``gpufleet mig apply -i INV --proposal FILE [--kubeconfig PATH] [--maintenance-window
START/END] [--allow-disturb] [--check]`` lists the cluster again and refuses (exit 1) a
proposal of ``gpufleet mig advise --json`` whose current layouts no longer match it, or
(exit 2) one that would disturb running claims unless the proposal was made with
``--allow-disturb`` and the operator passes ``--allow-disturb`` again; outside the
maintenance window it refuses (exit 1). Then ``playbooks/mig.yml`` runs with the
proposal as role ``mig``'s ``mig_proposal`` (node name -> the role's variables of its
changed GPUs, ``report.mig_advice.host_vars``): the role finds each node's host (its
``kubernetes_node_name``, else its name), carves those nodes only, and refuses (exit 2) a
node no host of group ``gpu_nodes`` stands for.

Exit codes: 0 every node succeeded (or the proposal changes nothing); 1 a node failed, the
proposal is stale or it is outside the window; 2 it could not run.
"""

from __future__ import annotations

import datetime as _dt
import json
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import click
from ansible_collections.gpufleet.cluster.plugins.module_utils.common import k8s_names as kn
from ansible_collections.gpufleet.cluster.plugins.module_utils.common import limits as ig
from ansible_collections.gpufleet.cluster.plugins.module_utils.mig import config as mcfg
from ansible_collections.gpufleet.cluster.plugins.module_utils.mig import planner as mpl
from ansible_collections.gpufleet.cluster.plugins.module_utils.mig import profiles as mpr
from ansible_collections.gpufleet.cluster.plugins.module_utils.report import fleet as fr
from ansible_collections.gpufleet.cluster.plugins.module_utils.report import mig_advice as ma

from gpufleet.commands._cluster import check_kubeconfig, read_cluster
from gpufleet.commands._options import (
    LAYOUT_EXAMPLE,
    extra_vars_flag,
    inventory_flag,
    path_exists,
    shown,
)
from gpufleet.exit import EXIT_CANNOT_RUN, EXIT_FAILED, EXIT_OK, exit_with, run_or_exit

#: Role ``mig`` variable that carries a proposal: node name -> the role's variables of its
#: changed GPUs (``report.mig_advice.host_vars``); the role maps nodes to hosts.
PROPOSAL_VAR = "mig_proposal"
#: The task of role ``mig`` (tasks/proposal.yml) that refuses a proposal naming a node no
#: host of the inventory stands for: input that cannot run (exit 2).
PROPOSAL_REFUSED_TASK = "MIG | Proposal | Refuse nodes no host of the play stands for"

APPLY_PLAYBOOK = "mig"


def apply_extravars(layout: str | None, config_name: str | None) -> dict[str, Any]:
    """Extra variables of ``playbooks/mig.yml`` for ``--layout`` and ``--config-name``.

    ``--layout`` is a JSON object (``mig_layout``), a mig-parted config file given as
    ``@path`` or an existing path (``mig_config_file``, absolute), or the NAME of a
    ``mig-configs`` entry of the config the inventory sets (``mig_config_name``).
    Raises ``click.BadParameter`` (exit 2) for invalid JSON, a layout that is not
    profile -> count, a missing ``@file``, or ``--config-name`` with a NAME or JSON.
    """
    out: dict[str, Any] = {}
    if layout is None:
        if config_name:
            out["mig_config_name"] = config_name
        return out
    text = layout.strip()
    if not text or text == "@":
        raise click.BadParameter(
            f"{layout!r} is empty; fix: give a mig-configs entry name (e.g. h100-80gb-all-1g), a "
            "layout as JSON ('{\"1g.18gb\": 7}') or @FILE, or leave --layout out to apply "
            "what the inventory sets",
            param_hint="'--layout'",
        )
    if text.startswith("{"):
        try:
            data = ig.load_json(text, f"--layout {shown(text)}", LAYOUT_EXAMPLE)
        except ig.InputError as exc:
            raise click.BadParameter(str(exc), param_hint="'--layout'") from None
        try:
            out["mig_layout"] = mpl.parse_layout(data, name="--layout")
        except ValueError as exc:
            raise click.BadParameter(str(exc), param_hint="'--layout'") from None
        if config_name:
            raise click.BadParameter(
                "--config-name goes with a mig-parted config file, not a JSON layout",
                param_hint="'--config-name'",
            )
        out["mig_config"] = {}
        out["mig_config_file"] = ""
        return out
    path = Path(text[1:] if text.startswith("@") else text)
    if text.startswith("@") or (path_exists(path) and path.is_file()):
        if not path_exists(path):
            raise click.BadParameter(f"{path} does not exist", param_hint="'--layout'")
        _check_config_file(path, config_name)
        out["mig_config_file"] = str(path.resolve())
        out["mig_layout"] = {}
        if config_name:
            out["mig_config_name"] = config_name
        return out
    if config_name:
        raise click.BadParameter(
            f"--layout {layout!r} already names the config entry; drop --config-name",
            param_hint="'--config-name'",
        )
    if not _CONFIG_NAME.fullmatch(text):
        raise click.BadParameter(
            f"{shown(layout)} is not a mig-configs entry name (letters, digits, '.', '_' and "
            "'-', at most 253), a JSON layout or an existing file; fix: give e.g. "
            "h100-80gb-all-1g, '{\"1g.18gb\": 7}' or @FILE",
            param_hint="'--layout'",
        )
    out["mig_config_name"] = text
    return out


# What a mig-configs entry name may be here: the names NVIDIA's mig-parted examples use
# (all-disabled, all-1g.10gb, all-balanced) and a DNS-label-like length bound.
_CONFIG_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,252}")


def _check_config_file(path: Path, config_name: str | None) -> None:
    """Read and check the mig-parted config file ``path`` (and that it holds
    ``config_name``) before any host is touched; click.BadParameter (exit 2) otherwise."""
    what = f"file {path}"
    try:
        config = mcfg.load_mig_config(ig.load_yaml(ig.read_text(path, what) or "", what))
    except ig.InputError as exc:
        raise click.BadParameter(str(exc), param_hint="'--layout'") from None
    except mcfg.MigConfigError as exc:
        raise click.BadParameter(f"{what}: {exc}", param_hint="'--layout'") from None
    if config_name and config_name not in config.names:
        raise click.BadParameter(
            f"{config_name!r} is not a mig-configs entry of {path}; fix: use one of "
            + ", ".join(config.names),
            param_hint="'--config-name'",
        )


@click.command("apply")
@inventory_flag()
@click.option(
    "--layout",
    default=None,
    metavar="NAME|JSON|@FILE",
    help="A mig-configs entry of the inventory's config (NAME), a layout as JSON "
    "('{\"1g.18gb\": 7}'), or a mig-parted config file (@FILE, with --config-name). "
    "Default: what the inventory sets (mig_layout, mig_config...).",
)
@click.option("--config-name", default=None, metavar="NAME", help="Entry of the @FILE config.")
@click.option(
    "--limit", default=None, metavar="PATTERN", help="Only these hosts (ansible --limit)."
)
@click.option("--check", is_flag=True, help="Report what would change; change nothing.")
@click.option("--diff", is_flag=True, help="Show the GPU layouts before and after.")
@click.option(
    "--proposal",
    default=None,
    metavar="FILE",
    help="A proposal of 'gpufleet mig advise --json FILE': carve its GPUs only, on its nodes "
    "only, after checking that the cluster still matches it.",
)
@click.option(
    "--maintenance-window",
    default=None,
    metavar="START/END",
    help="With --proposal: refuse to run outside it (ISO 8601 with a time zone, e.g. "
    "2026-12-03T22:00Z/2026-12-04T02:00Z).",
)
@click.option(
    "--allow-disturb",
    is_flag=True,
    help="With --proposal: confirm destroying GPU instances running claims use (the "
    "proposal must have been made with --allow-disturb).",
)
@click.option("--kubeconfig", type=click.Path(dir_okay=False), default=None, help="Kubeconfig.")
@click.option("--context", default=None, help="Kubeconfig context.")
@extra_vars_flag("Extra variable for the playbook (repeat); the value is read as YAML.")
def apply_command(
    inventories: tuple[str, ...],
    layout: str | None,
    config_name: str | None,
    limit: str | None,
    check: bool,
    diff: bool,
    proposal: str | None,
    maintenance_window: str | None,
    allow_disturb: bool,
    kubeconfig: str | None,
    context: str | None,
    extra_vars: dict[str, Any],
) -> None:
    """Carve MIG GPU instances on the GPU nodes (playbooks/mig.yml), a batch at a time,
    then republish each node's ResourceSlices.

    Exit 0 when every node succeeded, 1 when one failed (or a --proposal is stale or
    outside its maintenance window), 2 when it could not run."""
    from gpufleet import runner

    if proposal is None:
        for flag, value in (("--maintenance-window", maintenance_window),
                            ("--allow-disturb", allow_disturb)):  # fmt: skip
            if value:
                raise click.BadParameter(
                    f"{flag} goes with --proposal FILE", param_hint=f"'{flag}'"
                )
        extravars = {**apply_extravars(layout, config_name), **extra_vars}
    else:
        if layout or config_name or limit:
            raise click.BadParameter(
                "--proposal names the nodes, GPUs and layouts; drop --layout, --config-name "
                "and --limit",
                param_hint="'--proposal'",
            )
        planned = proposal_run(proposal, kubeconfig, context, maintenance_window, allow_disturb)
        if planned is None:
            exit_with(EXIT_OK)
        click.echo(describe(planned))
        extravars = {**planned, **extra_vars}
    result = run_or_exit(
        lambda: runner.run_playbook(
            APPLY_PLAYBOOK,
            list(inventories),
            extravars=extravars,
            limit=limit,
            check=check,
            diff=diff,
        ),
        runner.RunError,
    )
    refused = [msg for _, task, msg in result.progress.failures if task == PROPOSAL_REFUSED_TASK]
    if proposal is not None and refused:
        click.echo(f"Error: --proposal {proposal}: {refused[0]}", err=True)
        exit_with(EXIT_CANNOT_RUN)
    exit_with(result.status)


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
    seen: set[tuple[str, int]] = set()
    for i, change in enumerate(changes):
        problem = change_problem(change)
        if problem is None and (change["node"], change["gpu"]) in seen:
            problem = f"node {change['node']} GPU {change['gpu']} is changed twice"
        if problem:
            raise click.BadParameter(
                f"{path}: changes[{i}].{problem}; {fix} (do not edit it by hand)",
                param_hint="'--proposal'",
            )
        seen.add((change["node"], change["gpu"]))
    return doc


#: GPU indices a proposal may name (``nvidia-smi`` numbers a node's GPUs from 0; no GPU
#: server holds more than 32).
MAX_GPU_INDEX = 31
#: GPU instances of one MIG profile on one GPU (7 compute slices at most).
MAX_PROFILE_COUNT = 7


def _kind_of(value: Any) -> str:
    return "null" if value is None else type(value).__name__


def _whole(value: Any, low: int, high: int) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and low <= value <= high


def _placements_problem(where: str, placements: Any) -> str | None:
    if not isinstance(placements, list):
        return f"{where}.placements is a {_kind_of(placements)}, not a list"
    for j, p in enumerate(placements):
        at = f"{where}.placements[{j}]"
        if not isinstance(p, dict):
            return f"{at} is a {_kind_of(p)}, not an object with profile, start and size"
        profile = p.get("profile")
        if not isinstance(profile, str) or mpr.parse_profile(profile) is None:
            return f"{at}.profile={shown(str(profile))} is not a MIG profile name such as 1g.18gb"
        for key in ("start", "size"):
            if not _whole(p.get(key), 0, 8):
                return f"{at}.{key}={shown(str(p.get(key)))} is not a slice number from 0 to 8"
    return None


def change_problem(change: Mapping[str, Any]) -> str | None:
    """What makes one entry of a proposal's ``changes`` unusable (the member, its value and
    the type expected), or None: the shapes ``report.mig_advice`` writes (node name, GPU
    index, ``current`` with ``mig_enabled`` and ``placements``, ``proposed`` with
    ``layout`` profile -> count and ``placements``)."""
    node, gpu = change.get("node"), change.get("gpu")
    why = kn.dns1123_subdomain(node)
    if why:
        return f"node={shown(str(node))} {why} (a Kubernetes node name)"
    if not _whole(gpu, 0, MAX_GPU_INDEX):
        return (
            f"gpu={shown(str(gpu))} ({_kind_of(gpu)}) is not a GPU index from 0 to {MAX_GPU_INDEX}"
        )
    if not isinstance(change.get("uuid"), str | None):
        return f"uuid is a {_kind_of(change['uuid'])}, not a GPU UUID string"
    current, proposed = change.get("current"), change.get("proposed")
    if not isinstance(current, dict):
        return f"current is a {_kind_of(current)}, not an object"
    if not isinstance(current.get("mig_enabled"), bool):
        return f"current.mig_enabled={shown(str(current.get('mig_enabled')))} is not true or false"
    if not isinstance(proposed, dict):
        return f"proposed is a {_kind_of(proposed)}, not an object"
    layout = proposed.get("layout")
    if not isinstance(layout, dict):
        return f"proposed.layout is a {_kind_of(layout)}, not an object of MIG profile -> count"
    for profile, count in layout.items():
        if not isinstance(profile, str) or mpr.parse_profile(profile) is None:
            return (
                f"proposed.layout has {shown(str(profile))}; keys are MIG profile names such "
                "as 1g.18gb"
            )
        if not _whole(count, 1, MAX_PROFILE_COUNT):
            return (
                f"proposed.layout[{shown(profile)}]={shown(str(count))} is not a count from 1 to "
                f"{MAX_PROFILE_COUNT}"
            )
    return _placements_problem("current", current.get("placements")) or _placements_problem(
        "proposed", proposed.get("placements")
    )


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


def proposal_run(
    proposal: str,
    kubeconfig: str | None,
    context: str | None,
    window: str | None,
    allow_disturb: bool,
    now: _dt.datetime | None = None,
) -> dict[str, Any] | None:
    """Check ``proposal`` against the cluster and return the extra variables of
    ``playbooks/mig.yml`` (``mig_proposal``: node name -> role variables; role ``mig``
    runs on those nodes only); None when it changes nothing. Exits 1 for a stale proposal
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
    check_kubeconfig(kubeconfig)
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
    return {PROPOSAL_VAR: ma.host_vars(changes)}


def describe(extravars: Mapping[str, Any]) -> str:
    """One line per node: the GPUs and layouts the run will carve."""
    lines = []
    for node, v in extravars[PROPOSAL_VAR].items():
        if v["mig_layout"]:
            what = json.dumps(v["mig_layout"], sort_keys=True)
        else:
            entries = v["mig_config"]["mig-configs"][ma.CONFIG_NAME]
            what = "; ".join(
                f"GPU {e['devices'][0]}: {json.dumps(e['mig-devices'], sort_keys=True)}"
                for e in entries
            )
        lines.append(f"{node}: GPUs {v['mig_devices']} -> {what}")
    return "\n".join(lines)
