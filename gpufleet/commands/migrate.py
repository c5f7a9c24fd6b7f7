"""``gpufleet migrate``: move one GPU pool between NVIDIA's device plugin and DRA.

``gpufleet migrate -i INVENTORY --pool GROUP --to dra|device-plugin [--plan] [--json]``
runs ``playbooks/migrate.yml`` through the project's runner (ansible-runner). The role
plans first (module ``gpufleet.cluster.gpu_path_plan``): the pool's nodes in batches of
``--batch-size``, what each advertises now, the GPU pods each batch evicts, the
DeviceClass that serves each extended resource those pods ask for after a move to DRA
(``extendedResourceName``), and what blocks the move. ``--plan`` prints it and changes
nothing; ``--json`` prints it as JSON on stdout.

Without ``--plan``: ``playbooks/validate.yml`` before (unless ``--no-validate``), then the
move, batch by batch (module ``gpufleet.cluster.gpu_path_move``: cordon, evict the GPU
pods, stop the old advertiser, start the new one, uncordon; a batch that fails is put
back and the run stops), each batch's phases and times printed, then validate after, which
judges the pool on its new path (``validate_gpu_path_moves``: the inventory still declares
the old one). Afterwards the pool's group belongs in the inventory's ``gpu_path_*`` group of
its new path: the roles place each advertiser by it, and the command says so.

Exit codes: 0 planned or moved; 1 the plan is blocked, a batch failed or validate
failed; 2 the input is refused (a pool that is no group of hosts, a path that is none,
the cluster or inventory could not be read).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, NoReturn

import click
from ansible_collections.gpufleet.cluster.plugins.module_utils.common import messages as msg
from rich.console import Console

from gpufleet.commands._options import extra_vars_flag, inventory_flag
from gpufleet.commands._validate import run_validate
from gpufleet.exit import EXIT_CANNOT_RUN, EXIT_FAILED, EXIT_OK, exit_with
from gpufleet.render.migrate_plan import render, render_batch

PLAN_ACTIONS = frozenset({"gpufleet.cluster.gpu_path_plan", "gpu_path_plan"})
MOVE_ACTIONS = frozenset({"gpufleet.cluster.gpu_path_move", "gpu_path_move"})
#: The role's task that refuses a blocked plan (the plan is rendered instead).
BLOCKED_TASK = "GPU path | Refuse a plan that would leave pods without GPUs"
PATHS = ("dra", "device-plugin")


@dataclass
class MigrateRun:
    """What a run of playbooks/migrate.yml produced, from its ansible-runner events: the
    plan, each batch's node records, and ``(task, result)`` of each failed task."""

    plan: dict[str, Any] | None = None
    batches: list[list[dict[str, Any]]] = field(default_factory=list)
    failures: list[tuple[str, dict[str, Any]]] = field(default_factory=list)

    def feed(self, event: Mapping[str, Any]) -> None:
        data = event.get("event_data") or {}
        res = data.get("res") if isinstance(data.get("res"), dict) else {}
        action = data.get("resolved_action") or data.get("task_action")
        kind = event.get("event")
        if kind == "runner_on_ok" and action in PLAN_ACTIONS and isinstance(res.get("plan"), dict):
            self.plan = dict(res["plan"])
        if kind in ("runner_on_ok", "runner_on_failed") and action in MOVE_ACTIONS:
            self.batches.append([n for n in res.get("nodes") or [] if isinstance(n, dict)])
        if kind == "runner_on_failed" and not data.get("ignore_errors"):
            self.failures.append((str(data.get("task") or ""), dict(res)))

    def refusal(self) -> str | None:
        """What refused the input or the cluster before a plan was made (else None): the
        role's argument-specification errors, else the first failed task's message."""
        if self.plan is not None:
            return None
        for _, res in self.failures:
            if res.get("argument_errors"):
                return "the gpu_path_migrate role's variables: " + "; ".join(
                    map(str, res["argument_errors"])
                )
        for task, res in self.failures:
            return f"{task}: {' '.join(str(res.get('msg') or 'the task failed').split())}"
        return None


def _refuse(reason: str, fix: str) -> NoReturn:
    click.echo(f"Error: {reason}", err=True)
    click.echo(f"Fix: {fix}", err=True)
    exit_with(EXIT_CANNOT_RUN)


def _run(
    inventory: Sequence[str], extravars: Mapping[str, Any], console: Console
) -> tuple[int, MigrateRun]:
    from gpufleet.runner import RunError, run_playbook

    run = MigrateRun()
    try:
        status = run_playbook(
            "migrate", list(inventory), extravars=extravars, console=console, on_event=run.feed
        ).status
    except RunError as exc:
        reason, fix = msg.split_fix(str(exc))
        _refuse(reason, fix or "check -i INVENTORY.")
    return status, run


def _moved_before(plan: dict[str, Any], console: Console) -> dict[str, Any] | None:
    """The validation before the move judges the pool on the path every node of it
    advertises now where that is not the path the inventory declares: a pool moved by an
    earlier run whose inventory group was not moved yet (the move back, or the rest of
    it). None when the inventory holds (or the nodes advertise no one path: then validate
    judges them against the inventory and says so)."""
    now = {str(n.get("advertises")) for n in plan.get("nodes") or [] if isinstance(n, dict)}
    path = next(iter(now)) if len(now) == 1 else None
    if path not in PATHS or path == plan.get("from"):
        return None
    pool = str(plan.get("pool"))
    console.print(
        f"every node of pool {pool} advertises {path} while the inventory declares "
        f"{plan.get('from')}: validate before the move judges the pool on {path}"
    )
    return {"validate_gpu_path_moves": {pool: path}}


@click.command("migrate")
@inventory_flag("inventory")
@click.option("--pool", required=True, metavar="GROUP", help="Inventory group of the pool.")
@click.option("--to", "to_path", required=True, type=click.Choice(PATHS), help="Path to move to.")
@click.option("--plan", "plan_only", is_flag=True, help="Print the plan; change nothing.")
@click.option("--json", "as_json", is_flag=True, help="Print the plan as JSON (with --plan only).")
@click.option(
    "--batch-size",
    type=click.IntRange(min=1),
    default=None,
    help="Nodes moved at a time (default: gpu_path_migrate_batch_size).",
)
@click.option("--kubeconfig", default=None, help="Admin kubeconfig on this machine.")
@extra_vars_flag("Extra variable for the migrate playbook (repeat); the value is read as YAML.")
@click.option(
    "--no-validate", is_flag=True, help="Do not run playbooks/validate.yml before and after."
)
def migrate(
    inventory: tuple[str, ...],
    pool: str,
    to_path: str,
    plan_only: bool,
    as_json: bool,
    batch_size: int | None,
    kubeconfig: str | None,
    extra_vars: dict[str, Any],
    no_validate: bool,
) -> None:
    """Move a GPU pool between NVIDIA's device plugin and DRA, batch by batch."""
    if as_json and not plan_only:
        _refuse("--json prints the plan only.", "add --plan.")
    console = Console(stderr=True) if as_json else Console()
    extravars: dict[str, Any] = {
        **extra_vars,
        "gpu_path_migrate_pool": pool,
        "gpu_path_migrate_to": to_path,
    }
    if batch_size is not None:
        extravars["gpu_path_migrate_batch_size"] = batch_size
    if kubeconfig:
        extravars["gpu_path_migrate_kubeconfig"] = kubeconfig
    status, planned = _run(inventory, {**extravars, "gpu_path_migrate_plan_only": True}, console)
    refusal = planned.refusal()
    if refusal:
        _refuse(refusal, "correct what the message names and plan again.")
    if planned.plan is None:
        _refuse(
            f"the planning run of playbooks/migrate.yml gave no plan (run status "
            f"{status}; see the ansible log above).",
            "fix what the run reports and plan again.",
        )
    plan = planned.plan
    if as_json:
        sys.stdout.write(json.dumps(plan, indent=2, sort_keys=True) + "\n")
    else:
        render(plan, console)
    if plan.get("blocked"):
        sys.exit(EXIT_FAILED)
    if plan_only:
        sys.exit(EXIT_OK)
    if not no_validate and (
        run_validate(
            list(inventory), "migrate", "before", console, extravars=_moved_before(plan, console)
        )
        != 0
    ):
        console.print("[red]validate failed before the move: nothing was moved[/red]")
        sys.exit(EXIT_FAILED)
    status, moved = _run(inventory, {**extravars, "gpu_path_migrate_plan_only": False}, console)
    for nodes in moved.batches:
        render_batch(nodes, console)
    if status != 0:
        for task, res in moved.failures:
            console.print(f"[red]{task}: {' '.join(str(res.get('msg') or '').split())}[/red]")
        sys.exit(EXIT_FAILED)
    group = f"gpu_path_{to_path.replace('-', '_')}"
    if plan.get("from") == to_path:
        console.print(f"pool {pool} moved to {to_path}, the path the inventory declares.")
    else:
        console.print(
            f"pool {pool} moved to {to_path}. Next: make group {pool} a child of {group} in "
            "the inventory (and remove it from the other gpu_path_* group): the roles place "
            "each advertiser by it, and a run of playbooks/site.yml before that would move "
            "it back."
        )
    moves = {"validate_gpu_path_moves": {pool: to_path}}  # the inventory is not moved yet
    if (
        not no_validate
        and run_validate(list(inventory), "migrate", "after", console, extravars=moves) != 0
    ):
        sys.exit(EXIT_FAILED)
    sys.exit(EXIT_OK)
