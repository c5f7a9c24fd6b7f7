"""``gpufleet upgrade``: roll kubeadm, the control plane and the kubelets to a release, one
minor at a time, in lockstep.

The plan is the upgrade role's: ``gpufleet upgrade -i INVENTORY --to VERSION --plan
[--json]`` runs ``playbooks/upgrade.yml`` in check mode through the project's runner
(ansible-runner) and renders the plan that module ``gpufleet.cluster.upgrade_plan``
returns in that run (``UpgradePlan.to_dict()``, gpufleet/render/upgrade_plan.py). The
playbook judges the input first, on the control host, before any host is read (the role's
argument specification, then module ``upgrade_plan`` with ``judge_only``: releases, batch
size, GPU floor, DRA wishes, repository template, snapshot files); then reads ``kubeadm
version`` and the DRA gate facts on every host and the cluster (Nodes, kube-apiserver
Pods, ResourceSlices, the kubeadm ConfigMaps) and plans: the path, per step the packages,
the repository, the kubeadm command, the DRA gate and runtime-config changes, what the
target refuses to start with, and the order of the nodes (waves). An entry that a step's
target refuses to start with and the upgrade does not change itself blocks: a table names
host, file or ConfigMap, component, gate, reason and fix; the command exits 1 and,
without ``--plan``, runs nothing.

The options reach the run as the role's variables (``--to`` ``upgrade_kubernetes_version``,
``--via`` ``upgrade_via``, ``--batch-size`` ``upgrade_batch_size``,
``--min-gpu-available-percent`` ``upgrade_min_gpu_available_percent``, ``--kubeconfig``
``upgrade_kubeconfig``, ``--snapshot`` ``upgrade_snapshot``, ``--save-snapshot``
``upgrade_save_snapshot``), over ``-e`` variables; anything not given takes the role's
precedence (``-e`` over the inventory over roles/upgrade/defaults/main.yml). Messages name
the option when the value came from one (``upgrade_input_names``), else the variable.
``--snapshot FILE`` plans from a saved cluster snapshot (no host and no cluster is read),
``--save-snapshot FILE`` writes one, for review away from the cluster.

Without ``--plan`` it plans the same way, then runs ``playbooks/upgrade.yml`` once per step
of the path (``upgrade_kubernetes_version`` = the step's release, plus the same variables),
and ``playbooks/validate.yml`` before (not when resuming a failed run, whose cordoned node
validate would refuse) and after, unless ``--no-validate``.

Resume: the role reads the upgrade report of an earlier run (``upgrade_report_path``,
as roles/upgrade/defaults/main.yml or the inventory sets it, read back from the planning
run's ``upgrade_run_settings``) and resumes the nodes it drained
and left cordoned (``cordoned_by_upgrade``), unless the report is another cluster's (its
``cluster_uid`` differs from kube-system's UID; a note says so). Before a run the command
moves another cluster's report aside and stamps the report with this cluster's UID. A host
that went unreachable during a run (its entry still ``in-progress``) is recorded as failed
there, with the phase it had reached (read from the run's events) and Ansible's message.
After each step the report's timings are printed per node: drain, restart to Ready, DRA
plugin and ResourceSlices, the node's total and the rest (the toolkit's own work), and the
step's wall-clock time.

The lab is one more inventory: what its air-gapped upgrade needs (the package repository
and control-plane images, ``upgrade_local_repo_dir``, ``upgrade_image_archives``) comes from
inventory/lab, once ``gpufleet lab prepare-upgrade --to VERSION`` has built it.

Exit codes: 0 planned or upgraded; 1 a host or a step failed, or the plan is blocked;
2 the input is refused (a bad release, downgrade, skipped minor, target outside the model,
bad batch/floor values, a variable of the wrong type) or the cluster or inventory could
not be read. ``--json`` prints the plan only, on stdout; the run's progress and every
error go to stderr.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import click
from ansible_collections.gpufleet.cluster.plugins.module_utils.common import messages as msg
from rich.console import Console

from gpufleet.commands._options import extra_vars_flag, inventory_flag
from gpufleet.commands._validate import run_validate
from gpufleet.commands.upgrade_report import (
    PhaseTracker,
    own_report,
    read_report,
    unfinished_hosts,
)
from gpufleet.exit import EXIT_CANNOT_RUN, EXIT_FAILED, EXIT_OK, exit_with
from gpufleet.render.upgrade_plan import render, render_timings, timing_rows

#: Names the planner's task has in ansible-runner events.
PLAN_ACTIONS = frozenset({"gpufleet.cluster.upgrade_plan", "upgrade_plan"})
#: The fact roles/upgrade/tasks/plan.yml sets with the settings the run resolved.
RUN_SETTINGS = "upgrade_run_settings"
#: Name of the task of plan.yml that refuses a blocked plan (the plan is rendered instead).
BLOCKED_TASK = (
    "Upgrade | Plan | Refuse what the target release refuses and the upgrade does not change"
)
#: The option that gave each of the planner's inputs, when one did (upgrade_input_names).
OPTION_NAMES = {
    "via": "--via",
    "batch_size": "--batch-size",
    "min_gpu_available_percent": "--min-gpu-available-percent",
    "kubeconfig": "--kubeconfig",
    "snapshot": "--snapshot",
    "save_snapshot": "--save-snapshot",
}


class InputError(Exception):
    """The input, the inventory or the cluster could not be read or is refused (exit 2).

    ``reason`` names the option or variable and the value, ``fix`` says what to do."""

    def __init__(self, reason: str, fix: str = "") -> None:
        super().__init__(reason if not fix else f"{reason} Fix: {fix}")
        self.reason = reason
        self.fix = fix


# ------------------------------------------------------------------------- plan


def plan_vars(
    extra_vars: Mapping[str, Any],
    to_version: str,
    *,
    via: Sequence[str] = (),
    batch_size: str | None = None,
    min_gpu_available_percent: str | None = None,
    kubeconfig: str | None = None,
    snapshot: str | None = None,
    save_snapshot: str | None = None,
) -> dict[str, Any]:
    """The extra variables of the planning run: ``-e``, under the options as the role's
    variables, and ``upgrade_input_names`` naming the option of each input that came from
    one (``--to`` always)."""
    out: dict[str, Any] = dict(extra_vars)
    names = {"target": "--to"}
    given = {
        "via": list(via) or None,
        "batch_size": batch_size,
        "min_gpu_available_percent": min_gpu_available_percent,
        "kubeconfig": kubeconfig,
        "snapshot": str(Path(snapshot).resolve()) if snapshot else None,
        "save_snapshot": str(Path(os.path.expanduser(save_snapshot)).absolute())
        if save_snapshot
        else None,
    }
    for key, value in given.items():
        if value is not None:
            out[f"upgrade_{key}"] = value
            names[key] = OPTION_NAMES[key]
    out["upgrade_kubernetes_version"] = to_version
    out["upgrade_input_names"] = names
    return out


@dataclass
class PlanRun:
    """What the check-mode run of playbooks/upgrade.yml produced, from its ansible-runner
    events: ``result`` the planner task's result (``plan``, ``cluster_uid``, ``notes``,
    ``left_cordoned``), ``settings`` the run's resolved settings (``upgrade_run_settings``:
    ``report_path``, ``accept_warnings``), ``failures`` ``(task, res)`` of each failed
    task."""

    result: dict[str, Any] | None = None
    settings: dict[str, Any] = field(default_factory=dict)
    failures: list[tuple[str, dict[str, Any]]] = field(default_factory=list)

    def feed(self, event: Mapping[str, Any]) -> None:
        data = event.get("event_data") or {}
        res = data.get("res") if isinstance(data.get("res"), dict) else {}
        action = data.get("resolved_action") or data.get("task_action")
        if event.get("event") == "runner_on_ok":
            if action in PLAN_ACTIONS and isinstance(res.get("plan"), dict):
                self.result = dict(res)
            facts = res.get("ansible_facts") or {}
            if isinstance(facts.get(RUN_SETTINGS), dict):
                self.settings = dict(facts[RUN_SETTINGS])
        elif event.get("event") == "runner_on_failed" and not data.get("ignore_errors"):
            self.failures.append((str(data.get("task") or ""), {**res, "_host": data.get("host")}))

    @property
    def plan(self) -> dict[str, Any] | None:
        return (self.result or {}).get("plan")

    def error(self) -> InputError | None:
        """What refused the input or the cluster, as an InputError (the refusal of a
        blocked plan aside: the plan is rendered): the planner's ``reason`` and ``fix``; else
        the role's argument-specification errors (they name the variable); else the first
        failed task on the control host, or, when no plan came, on any host."""
        failures = [(t, r) for t, r in self.failures if t != BLOCKED_TASK or self.plan is None]
        for _, res in failures:
            if res.get("reason"):
                return InputError(str(res["reason"]), str(res.get("fix") or ""))
        for _, res in failures:
            if res.get("argument_errors"):
                return InputError(
                    "the upgrade role's variables: " + "; ".join(map(str, res["argument_errors"])),
                    "give each variable the type roles/upgrade/meta/argument_specs.yml names "
                    "(ansible-doc -t role gpufleet.cluster.upgrade), in -e or the inventory.",
                )
        on_control_host = [(t, r) for t, r in failures if r.get("_host") == "localhost"]
        for task, res in on_control_host or ([] if self.plan else failures):
            msg = " ".join(str(res.get("msg") or "the task failed").split())
            return InputError(
                f"{task}: {msg}",
                "correct the variable the message names (-e or the inventory) and plan again.",
            )
        return None


def get_plan(inventory: Sequence[str], extravars: Mapping[str, Any], console: Console) -> PlanRun:
    """Run playbooks/upgrade.yml in check mode (it judges the input, reads the hosts and
    the cluster, or the snapshot, plans, and stops) and return what it produced. Raises
    InputError when the run could not start, a task refused the input or the cluster could
    not be read, or the run gave no plan."""
    from gpufleet.runner import RunError, run_playbook

    run = PlanRun()
    try:
        result = run_playbook(
            "upgrade", list(inventory), extravars=extravars, check=True, console=console,
            on_event=run.feed,
        )  # fmt: skip
    except RunError as exc:
        text = str(exc)
        reason, fix = msg.split_fix(text)
        raise InputError(reason, fix or "check -i INVENTORY.") from None
    error = run.error()
    if error is not None:
        raise error
    if run.plan is None:
        raise InputError(
            f"the planning run of playbooks/upgrade.yml gave no plan (ansible-playbook status "
            f"{result.status}; see the failures above).",
            "fix what the run reports and plan again.",
        )
    return run


def render_notes(run: PlanRun) -> None:
    """The planner's notes (a report of another cluster), on stderr."""
    for note in (run.result or {}).get("notes") or []:
        click.echo(f"note: {note}", err=True)


# ------------------------------------------------------------------------- command


@click.command("upgrade")
@inventory_flag("inventory")
@click.option("--to", "to_version", required=True, metavar="VERSION", help="Target release.")
@click.option("--plan", "plan_only", is_flag=True, help="Print the plan; change nothing.")
@click.option("--json", "as_json", is_flag=True, help="Print the plan as JSON (with --plan only).")
@click.option(
    "--via",
    multiple=True,
    metavar="VERSION",
    help="Release to pass through for each minor between the cluster's and --to (repeat).",
)
@click.option(
    "--batch-size",
    default=None,
    help="Workers per batch: a number or a percentage (default: upgrade_batch_size).",
)
@click.option(
    "--min-gpu-available-percent",
    default=None,
    help="Floor on GPU devices left schedulable while a batch is drained "
    "(default: upgrade_min_gpu_available_percent).",
)
@click.option("--kubeconfig", default=None, help="Admin kubeconfig on this machine.")
@click.option(
    "--snapshot",
    type=click.Path(exists=True, dir_okay=False),
    default=None,
    help="Plan from a saved cluster snapshot instead of reading the cluster.",
)
@click.option(
    "--save-snapshot",
    type=click.Path(dir_okay=False),
    default=None,
    help="Write what was read from the cluster and the hosts to this file.",
)
@extra_vars_flag("Extra variable for the upgrade playbook (repeat); the value is read as YAML.")
@click.option(
    "--no-validate", is_flag=True, help="Do not run playbooks/validate.yml before and after."
)
@click.option(
    "--accept-warnings",
    is_flag=True,
    help="Upgrade although validate before, or the gate audit, warns "
    "(sets upgrade_accept_warnings=true).",
)
def upgrade(
    inventory: tuple[str, ...],
    to_version: str,
    plan_only: bool,
    as_json: bool,
    via: tuple[str, ...],
    batch_size: str | None,
    min_gpu_available_percent: str | None,
    kubeconfig: str | None,
    snapshot: str | None,
    save_snapshot: str | None,
    extra_vars: dict[str, Any],
    no_validate: bool,
    accept_warnings: bool,
) -> None:
    """Upgrade kubeadm, the control plane and the kubelets to --to, one minor at a time."""
    if as_json and not plan_only:
        # a run prints its progress on stdout: JSON there would be followed by the upgrade
        click.echo("Error: --json prints the plan only; the upgrade would run too.", err=True)
        click.echo(
            "Fix: add --plan (gpufleet upgrade -i INVENTORY --to VERSION --plan --json), "
            "then run without --json to upgrade.",
            err=True,
        )
        exit_with(EXIT_CANNOT_RUN)
    extravars = plan_vars(
        extra_vars, to_version, via=via, batch_size=batch_size,
        min_gpu_available_percent=min_gpu_available_percent, kubeconfig=kubeconfig,
        snapshot=snapshot, save_snapshot=save_snapshot,
    )  # fmt: skip
    try:
        run = get_plan(inventory, extravars, Console(stderr=True))
    except InputError as exc:
        click.echo(f"Error: {exc.reason}", err=True)
        if exc.fix:
            click.echo(f"Fix: {exc.fix}", err=True)
        exit_with(EXIT_CANNOT_RUN)
    plan = run.plan or {}
    versions = [s["version"] for s in plan["steps"]]
    render_notes(run)
    if as_json:
        click.echo(json.dumps(plan, indent=2, sort_keys=True))
    else:
        render(plan, Console(width=max(140, Console().width), soft_wrap=False))
    if plan["blocking"]:  # refused before any host is changed, with or without --plan
        if as_json:
            n = len(plan["blocking"])
            click.echo(f"blocked: {n} entr{'y' if n == 1 else 'ies'} (see 'blocking')", err=True)
        exit_with(EXIT_FAILED)
    if plan_only or plan["up_to_date"]:
        return
    console = Console()
    # the role's upgrade_report_path as the planning run resolved it (upgrade_run_settings)
    if not run.settings.get("report_path"):
        click.echo(f"Error: the planning run did not report {RUN_SETTINGS}.", err=True)
        click.echo("Fix: run playbooks/upgrade.yml of this collection (roles/upgrade).", err=True)
        exit_with(EXIT_CANNOT_RUN)
    report_file = Path(os.path.expanduser(str(run.settings["report_path"])))
    extra = run_extra_vars(extravars, report_file)
    if accept_warnings:
        extra["upgrade_accept_warnings"] = True
    moved = own_report(report_file, (run.result or {}).get("cluster_uid"))
    if moved:
        console.print(moved)
    exit_with(
        run_steps(
            plan,
            list(inventory),
            extra=extra,
            report_file=report_file,
            validate=not no_validate,
            accept_warnings=accept_warnings or bool(run.settings.get("accept_warnings")),
            resuming=unfinished_hosts(read_report(report_file), versions),
            console=console,
        )
    )


def run_extra_vars(plan_extravars: Mapping[str, Any], report_file: Path) -> dict[str, Any]:
    """The variables every step's run gets: those the plan was made with
    (:func:`plan_vars`: ``-e`` and the options as the role's variables), without the
    snapshot ones (a run reads the cluster) and with the report path the plan used."""
    skip = {"upgrade_snapshot", "upgrade_save_snapshot", "upgrade_plan_file"}
    extra = {k: v for k, v in plan_extravars.items() if k not in skip}
    extra["upgrade_report_path"] = str(report_file)
    return extra


def run_steps(
    plan: Mapping[str, Any],
    inventory: list[str],
    *,
    report_file: Path,
    extra: Mapping[str, Any] | None = None,
    validate: bool = True,
    accept_warnings: bool = False,
    resuming: Sequence[str] = (),
    console: Console | None = None,
) -> int:
    """Run ``playbooks/upgrade.yml`` per step of ``plan`` (the planner's dict; each run
    plans that one step again from the cluster; validate before and after when present and
    ``validate``; not before when ``resuming`` names hosts an earlier run left failed);
    stop at the first failed step. ``extra``: variables for every step; ``report_file``:
    the role's upgrade report (``upgrade_report_path``). Prints each step's timings from
    the report. Returns the exit status."""
    from gpufleet.runner import RunError, collection_root, run_playbook

    console = console or Console()
    names = [n["host"] for n in plan["nodes"]]
    try:
        has_validate = validate and (collection_root() / "playbooks" / "validate.yml").is_file()
        if has_validate and resuming:
            console.print(
                f"resuming the run that stopped on {', '.join(resuming)}: validate runs after "
                "the upgrade only"
            )
        elif (
            has_validate
            and run_validate(
                inventory, "upgrade", "before", console, refuse_warnings=not accept_warnings
            )
            != 0
        ):
            console.print("[red]validate failed before the upgrade: nothing was changed[/red]")
            return EXIT_FAILED
        for step in plan["steps"]:
            version = step["version"]
            console.rule(f"upgrade to {version}")
            tracker = PhaseTracker()
            extravars = {
                **dict(extra or {}),
                "upgrade_kubernetes_version": version,
                # one step: nothing between the cluster's minor and the step's
                "upgrade_via": [],
            }
            t0, since = time.monotonic(), time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
            result = run_playbook(
                "upgrade", inventory, extravars=extravars, console=console, on_event=tracker.feed
            )
            wall = time.monotonic() - t0
            marked = tracker.record(report_file, version)
            report = read_report(report_file)
            render_timings(timing_rows(report, names, since), wall, console)
            if result.status != 0:
                for host, entry in sorted((report.get("nodes") or {}).items()):
                    if entry.get("state") == "failed":
                        console.print(
                            f"[red]{entry.get('node') or host}: failed in phase "
                            f"{entry.get('phase')}"
                            f"{' (left cordoned)' if entry.get('cordoned') else ''}: "
                            f"{entry.get('cause')}[/red]"
                        )
                if marked:
                    console.print(f"recorded as unreachable: {', '.join(marked)}")
                console.print(
                    f"[red]step to {version} failed; report: {report_file}; fix the "
                    "cause and run the same command again to resume[/red]"
                )
                return result.status
        if has_validate and run_validate(inventory, "upgrade", "after", console) != 0:
            console.print("[red]validate failed after the upgrade: see the report above[/red]")
            return EXIT_FAILED
    except RunError as exc:
        console.print(f"[red]{exc}[/red]")
        return EXIT_CANNOT_RUN
    return EXIT_OK
