"""``gpufleet upgrade-gpu-stack``: plan an upgrade of the GPU stack (the NVIDIA driver and
the NVIDIA Container Toolkit on every GPU node, the NVIDIA DRA driver chart on the
cluster). Plan only: ``--plan`` is required, and nothing is changed.

``gpufleet upgrade-gpu-stack -i INVENTORY --plan [--driver VERSION] [--toolkit VERSION]
[--dra-driver-chart VERSION] [--json]`` runs ``playbooks/upgrade_gpu_stack.yml`` in check
mode through the project's runner (ansible-runner): it reads the loaded driver, the GPUs and
the toolkit on each GPU node, the cluster's release, the Nodes and the chart's Helm release,
and plans with filter ``gpufleet.cluster.gpu_stack_plan`` (``GpuStackPlan.to_dict()`` of
plugins/module_utils/upgrade/gpu_stack.py, rendered by gpufleet/render/gpu_stack_plan.py):
per node current -> target driver and toolkit, what stops first, a module load or a reboot;
the order (the chart's CRDs and ``helm upgrade`` first when every node's driver meets the
target chart's minimum, else last; the nodes in batches, as ``gpufleet upgrade`` batches
its workers); and the refusals, each naming the variable, the value, the fix and the
upstream source of its rule.

The options reach the run as the roles' variables (``--driver`` ``nvidia_driver_version``
and ``nvidia_driver_branch``, ``--toolkit`` ``nvidia_container_toolkit_version``,
``--dra-driver-chart`` ``dra_driver_chart_version``, ``--batch-size``
``upgrade_batch_size``, ``--min-gpu-available-percent``
``upgrade_min_gpu_available_percent``, ``--kubeconfig`` ``dra_driver_kubeconfig``), over
``-e``; anything not given takes ``-e``, then the inventory, then the role's defaults.
Messages name the option when the value came from one (``gpu_stack_input_names``).

Exit codes: 0 planned; 2 the plan is refused (``refused``), the input is refused, or the
hosts or the cluster could not be read. ``--json`` prints the plan only, on stdout; the
run's progress and every error go to stderr.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, NoReturn

import click
from ansible_collections.gpufleet.cluster.plugins.module_utils.common import messages as msg
from rich.console import Console

from gpufleet.commands._options import extra_vars_flag
from gpufleet.exit import EXIT_CANNOT_RUN, EXIT_OK, exit_with
from gpufleet.render.gpu_stack_plan import render
from gpufleet.render.text import printable

#: The fact the planning playbook sets with the plan.
PLAN_FACT = "gpu_stack_plan"
#: Each option, the variables it sets and the input it names in messages.
OPTION_VARS = {
    "--driver": ("driver", ("nvidia_driver_version",)),
    "--toolkit": ("toolkit", ("nvidia_container_toolkit_version",)),
    "--dra-driver-chart": ("chart", ("dra_driver_chart_version",)),
    "--batch-size": ("batch_size", ("upgrade_batch_size",)),
    "--min-gpu-available-percent": (
        "min_gpu_available_percent",
        ("upgrade_min_gpu_available_percent",),
    ),
    "--kubeconfig": ("kubeconfig", ("dra_driver_kubeconfig",)),
}


def plan_vars(extra_vars: Mapping[str, Any], given: Mapping[str, str | None]) -> dict[str, Any]:
    """The planning run's extra variables: ``-e``, under each option given (``given``:
    option -> value) as its variables (``--driver`` also sets ``nvidia_driver_branch``, the
    release's branch), and ``gpu_stack_input_names`` naming the option of each input that
    came from one."""
    out: dict[str, Any] = dict(extra_vars)
    names: dict[str, str] = {}
    for option, value in given.items():
        if value is None:
            continue
        key, variables = OPTION_VARS[option]
        for variable in variables:
            out[variable] = value
        if option == "--driver":
            out["nvidia_driver_branch"] = str(value).split(".", 1)[0]
        names[key] = option
    out["gpu_stack_input_names"] = names
    return out


@dataclass
class StackRun:
    """What the check-mode run of playbooks/upgrade_gpu_stack.yml produced, from its
    ansible-runner events: the plan (fact ``gpu_stack_plan``) and ``(task, result)`` of
    each failed or unreachable host's task."""

    plan: dict[str, Any] | None = None
    failures: list[tuple[str, dict[str, Any]]] = field(default_factory=list)

    def feed(self, event: Mapping[str, Any]) -> None:
        data = event.get("event_data") or {}
        res = data.get("res") if isinstance(data.get("res"), dict) else {}
        kind = event.get("event")
        facts = res.get("ansible_facts") or {}
        if kind == "runner_on_ok" and isinstance(facts.get(PLAN_FACT), dict):
            self.plan = dict(facts[PLAN_FACT])
        elif kind in ("runner_on_failed", "runner_on_unreachable") and not data.get(
            "ignore_errors"
        ):
            where = f"{data.get('host')}: " if data.get("host") else ""
            self.failures.append((where + str(data.get("task") or ""), dict(res)))

    def error(self) -> tuple[str, str] | None:
        """``(reason, fix)`` of the first failure (the filter's refusal of a state it cannot
        read, a host or the cluster that could not be read); None without failures."""
        for task, res in self.failures:
            reason, fix = msg.split_fix(" ".join(str(res.get("msg") or "it failed").split()))
            return f"{task}: {reason}", fix or "correct what the message names and plan again."
        return None


def _refuse(reason: str, fix: str) -> NoReturn:
    click.echo(f"Error: {printable(reason)}", err=True)
    click.echo(f"Fix: {printable(fix)}", err=True)
    exit_with(EXIT_CANNOT_RUN)


def get_plan(
    inventory: Sequence[str], extravars: Mapping[str, Any], console: Console
) -> dict[str, Any]:
    """Run playbooks/upgrade_gpu_stack.yml in check mode and return the plan's dict; exit
    ``EXIT_CANNOT_RUN`` when the run could not start, a task failed or no plan came."""
    from gpufleet.runner import RunError, run_playbook

    run = StackRun()
    try:
        result = run_playbook(
            "upgrade_gpu_stack", list(inventory), extravars=extravars, check=True,
            console=console, on_event=run.feed,
        )  # fmt: skip
    except RunError as exc:
        reason, fix = msg.split_fix(str(exc))
        _refuse(reason, fix or "check -i INVENTORY.")
    error = run.error()
    if error is not None:
        _refuse(*error)
    if run.plan is None:
        _refuse(
            "the planning run of playbooks/upgrade_gpu_stack.yml gave no plan "
            f"(ansible-playbook status {result.status}).",
            "fix what the run reports and plan again.",
        )
    return run.plan


@click.command("upgrade-gpu-stack")
@click.option(
    "-i",
    "--inventory",
    "inventory",
    multiple=True,
    required=True,
    metavar="INVENTORY",
    help="Ansible inventory (repeat for several).",
)
@click.option("--plan", "plan_only", is_flag=True, help="Print the plan; change nothing.")
@click.option("--json", "as_json", is_flag=True, help="Print the plan as JSON.")
@click.option(
    "--driver",
    default=None,
    metavar="VERSION",
    help="Target NVIDIA driver release (default: nvidia_driver_version).",
)
@click.option(
    "--toolkit",
    default=None,
    metavar="VERSION",
    help="Target NVIDIA Container Toolkit release (default: nvidia_container_toolkit_version).",
)
@click.option(
    "--dra-driver-chart",
    default=None,
    metavar="VERSION",
    help="Target NVIDIA DRA driver chart release (default: dra_driver_chart_version).",
)
@click.option(
    "--batch-size",
    default=None,
    help="GPU nodes per batch: a number or a percentage (default: upgrade_batch_size).",
)
@click.option(
    "--min-gpu-available-percent",
    default=None,
    help="Floor on GPU devices left schedulable while a batch is drained "
    "(default: upgrade_min_gpu_available_percent).",
)
@click.option("--kubeconfig", default=None, help="Admin kubeconfig on this machine.")
@extra_vars_flag("Extra variable for the planning playbook (repeat); the value is read as YAML.")
def upgrade_gpu_stack(
    inventory: tuple[str, ...],
    plan_only: bool,
    as_json: bool,
    driver: str | None,
    toolkit: str | None,
    dra_driver_chart: str | None,
    batch_size: str | None,
    min_gpu_available_percent: str | None,
    kubeconfig: str | None,
    extra_vars: dict[str, Any],
) -> None:
    """Plan an upgrade of the NVIDIA driver, container toolkit and DRA driver chart."""
    if not plan_only:
        _refuse(
            "upgrade-gpu-stack plans only; the rolling change of the GPU stack is not built.",
            "add --plan (gpufleet upgrade-gpu-stack -i INVENTORY --plan), then roll each "
            "batch it lists with gpufleet up -i INVENTORY -l NODES.",
        )
    given = {
        "--driver": driver,
        "--toolkit": toolkit,
        "--dra-driver-chart": dra_driver_chart,
        "--batch-size": batch_size,
        "--min-gpu-available-percent": min_gpu_available_percent,
        "--kubeconfig": kubeconfig,
    }
    plan = get_plan(inventory, plan_vars(extra_vars, given), Console(stderr=True))
    if as_json:
        click.echo(json.dumps(plan, indent=2, sort_keys=True))
    else:
        render(plan, Console(width=max(140, Console().width), soft_wrap=False))
    if plan.get("refused"):
        for r in plan["refused"]:
            click.echo(f"Error: {printable(r['message'])}", err=True)
        exit_with(EXIT_CANNOT_RUN)
    exit_with(EXIT_OK)
