"""``gpufleet mig mode``: move the GPU nodes of the DRA pool between static MIG and dynamic
MIG (``playbooks/mig_mode.yml``; role ``dra_driver`` for the release, role ``mig``'s entry
points ``mode`` and ``mode_done`` per node).

``gpufleet mig mode --to dynamic|static -i INV [--limit PATTERN] [--batch N]`` passes
``mig_mode_to`` and ``mig_mode_batch``. The mode is the DRA driver release's (NVIDIA's chart
passes ``featureGates`` to its one kubelet-plugin DaemonSet): the release is switched with
its DaemonSet on ``OnDelete``, then each node is drained, cleared or carved, its plugin
restarted and uncordoned, a batch at a time; ``--limit`` moves some nodes now and the rest
in a later run (the DaemonSet stays on ``OnDelete`` until every node runs the new mode).

Exit codes: 0 every node moved; 1 a node failed (it stays cordoned and annotated
``gpufleet.io/mig-mode-move``; run again to resume it); 2 it could not run (bad input).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import click
from ansible_collections.gpufleet.cluster.plugins.module_utils.dra_driver import mig_mode as mm

from gpufleet.commands._options import extra_vars_flag, inventory_flag
from gpufleet.exit import exit_with, run_or_exit

MODE_PLAYBOOK = "mig_mode"
#: Tasks of playbooks/mig_mode.yml that refuse the input before any change (exit 2).
REFUSING_TASKS = (
    "MIG mode | The target mode",
    "MIG mode | The batch size",
    "MIG mode | Every node moving to static MIG has a layout to carve",
)


def mode_extravars(
    to: str, batch: str | None, extra_vars: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    """``mig_mode_to`` and, when given, ``mig_mode_batch`` (a count or a percentage),
    then ``extra_vars`` (``-e``, which win, as Ansible's own); click.BadParameter (exit 2)
    for a ``--batch``, ``-e mig_mode_batch`` or ``-e mig_mode_to`` that the playbook would
    refuse (``dra_driver.mig_mode.check_batch``/``check_target``)."""
    out: dict[str, Any] = {"mig_mode_to": to}
    if batch is not None:
        try:
            out["mig_mode_batch"] = mm.check_batch(batch, "--batch")
        except mm.MigModeError as exc:
            raise click.BadParameter(str(exc), param_hint="'--batch'") from None
    out.update(extra_vars or {})
    try:
        mm.check_target(out["mig_mode_to"], "-e mig_mode_to")
        if "mig_mode_batch" in (extra_vars or {}):
            out["mig_mode_batch"] = mm.check_batch(out["mig_mode_batch"], "-e mig_mode_batch")
    except mm.MigModeError as exc:
        raise click.BadParameter(str(exc), param_hint="'-e'") from None
    return out


@click.command("mode")
@inventory_flag()
@click.option(
    "--to",
    "to",
    required=True,
    type=click.Choice(["dynamic", "static"]),
    help="dynamic: the DRA driver creates each GPU instance per claim; static: each node's "
    "mig_layout (or mig_config_name) carved ahead.",
)
@click.option(
    "--limit", default=None, metavar="PATTERN", help="Only these hosts (ansible --limit)."
)
@click.option(
    "--batch",
    default=None,
    metavar="N|N%",
    help="Nodes moved at a time (mig_mode_batch; default: the inventory's, else 1).",
)
@extra_vars_flag("Extra variable for the playbook (repeat); the value is read as YAML.")
def mode_command(
    inventories: tuple[str, ...],
    to: str,
    limit: str | None,
    batch: str | None,
    extra_vars: dict[str, Any],
) -> None:
    """Move the DRA pool's GPU nodes between static and dynamic MIG (playbooks/mig_mode.yml):
    drained a batch at a time, no GPU instance left behind, uncordoned.

    Exit 0 when every node moved, 1 when one failed (run again to resume it), 2 when it
    could not run."""
    from gpufleet import runner
    from gpufleet.exit import EXIT_CANNOT_RUN

    extravars = mode_extravars(to, batch, extra_vars)
    result = run_or_exit(
        lambda: runner.run_playbook(
            MODE_PLAYBOOK, list(inventories), extravars=extravars, limit=limit
        ),
        runner.RunError,
    )
    refused = [msg for _, task, msg in result.progress.failures if task in REFUSING_TASKS]
    if refused:
        click.echo(f"Error: {refused[0]}", err=True)
        exit_with(EXIT_CANNOT_RUN)
    exit_with(result.status)
