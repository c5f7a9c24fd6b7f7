"""``gpufleet upgrade-gpu-stack``: plan and roll an upgrade of the GPU stack (the NVIDIA
driver and the NVIDIA Container Toolkit on every GPU node, the NVIDIA DRA driver chart on
the cluster). With ``--plan`` nothing is changed.

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

Without ``--plan`` the plan is printed and then run (the same playbook, not in check
mode): the chart where the plan puts it, the nodes in its batches (each drained, its GPU
clients stopped, the driver installed and loaded, the toolkit, the CDI spec, the MIG
layout, the ResourceSlices back at the new driver, uncordoned), each node's state, phase
and timings recorded in ``upgrade_gpu_stack_report_path`` and printed; then ``validate``
(``--no-validate`` skips it). A node that fails stops the run; the same command again
resumes it. ``--components driver,toolkit,chart`` (``upgrade_gpu_stack_components``)
names what changes; the rest is kept as it is.

Exit codes: 0 planned, or upgraded and validated; 1 a node failed, or validate after it;
2 the plan is refused (``refused``), the input is refused, or the hosts or the cluster
could not be read. ``--json`` prints the plan only, on stdout; the run's progress and
every error go to stderr.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NoReturn

import click
from ansible_collections.gpufleet.cluster.plugins.module_utils.common import messages as msg
from rich.console import Console

from gpufleet.commands._options import extra_vars_flag, inventory_flag
from gpufleet.exit import EXIT_CANNOT_RUN, EXIT_FAILED, EXIT_OK, exit_with
from gpufleet.render.gpu_stack_plan import render, render_run
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
    "--kubeconfig": ("kubeconfig", ("dra_driver_kubeconfig", "upgrade_kubeconfig")),
}
#: What ``--components`` may name.
COMPONENTS = ("driver", "toolkit", "chart")
#: The facts the planning play sets for a run: the report file and the targets' text.
REPORT_FACT = "gpu_stack_report_path"


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
    report_path: str = ""

    def feed(self, event: Mapping[str, Any]) -> None:
        data = event.get("event_data") or {}
        res = data.get("res") if isinstance(data.get("res"), dict) else {}
        kind = event.get("event")
        facts = res.get("ansible_facts") or {}
        if kind == "runner_on_ok" and isinstance(facts.get(PLAN_FACT), dict):
            self.plan = dict(facts[PLAN_FACT])
        if kind == "runner_on_ok" and isinstance(facts.get(REPORT_FACT), str):
            self.report_path = facts[REPORT_FACT]
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
@inventory_flag("inventory")
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
@click.option(
    "--components",
    default=None,
    metavar="LIST",
    help="What changes, comma-separated: driver, toolkit, chart (default: "
    "upgrade_gpu_stack_components, all three); the rest is kept as it is.",
)
@click.option("--no-validate", is_flag=True, help="Do not run validate after the upgrade.")
@extra_vars_flag("Extra variable for the playbook (repeat); the value is read as YAML.")
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
    components: str | None,
    no_validate: bool,
    extra_vars: dict[str, Any],
) -> None:
    """Plan and roll an upgrade of the NVIDIA driver, container toolkit and DRA driver chart."""
    given = {
        "--driver": driver,
        "--toolkit": toolkit,
        "--dra-driver-chart": dra_driver_chart,
        "--batch-size": batch_size,
        "--min-gpu-available-percent": min_gpu_available_percent,
        "--kubeconfig": kubeconfig,
    }
    extravars = plan_vars(extra_vars, given)
    if components is not None:
        extravars["upgrade_gpu_stack_components"] = parse_components(components)
    plan = get_plan(inventory, extravars, Console(stderr=True))
    if as_json:
        click.echo(json.dumps(plan, indent=2, sort_keys=True))
    else:
        render(plan, Console(width=max(140, Console().width), soft_wrap=False))
    if plan.get("refused"):
        for r in plan["refused"]:
            click.echo(f"Error: {printable(r['message'])}", err=True)
        exit_with(EXIT_CANNOT_RUN)
    if plan_only or plan.get("up_to_date"):
        exit_with(EXIT_OK)
    exit_with(run_upgrade(plan, list(inventory), extravars, validate=not no_validate))


def parse_components(text: str) -> list[str]:
    """``--components``: a comma-separated list of ``COMPONENTS``, each at most once;
    refuses (exit 2) anything else, naming the option, the value and the fix."""
    parts = [p.strip() for p in str(text).split(",")]
    bad = list(dict.fromkeys(p for p in parts if p not in COMPONENTS))
    if not text.strip() or bad or len(set(parts)) != len(parts):
        # a huge value is named by its start and the first unknown names
        written = repr(text) if len(text) <= 200 else f"{text[:200]!r}... ({len(text)} characters)"
        named = ", ".join(repr(b[:100]) for b in bad[:3]) + (
            f" and {len(bad) - 3} more" if len(bad) > 3 else ""
        )
        _refuse(
            f"--components={written} is refused"
            + (f": {named} {'is' if len(bad) == 1 else 'are'} not a component" if bad else ""),
            f"give one or more of {', '.join(COMPONENTS)}, comma-separated, each once "
            "(e.g. --components driver).",
        )
    return parts


def run_upgrade(
    plan: Mapping[str, Any], inventory: list[str], extravars: Mapping[str, Any], *, validate: bool
) -> int:
    """Run ``playbooks/upgrade_gpu_stack.yml`` (not in check mode) with ``extravars``, print
    each node's state, phase and timings from the report, then validate (``validate``).
    Returns the exit status: 0 done, 1 a node or validate failed, 2 the run could not
    start."""
    from gpufleet.commands._validate import run_validate
    from gpufleet.commands.upgrade_report import read_report
    from gpufleet.runner import RunError, run_playbook

    console = Console(stderr=True)
    run = StackRun()
    since = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    t0 = time.monotonic()
    try:
        result = run_playbook(
            "upgrade_gpu_stack", inventory, extravars=dict(extravars), console=console,
            on_event=run.feed,
        )  # fmt: skip
    except RunError as exc:
        console.print(f"[red]{printable(str(exc))}[/red]")
        return EXIT_CANNOT_RUN
    hosts = [h for w in plan["waves"] if w["kind"] == "nodes" for h in w["hosts"]]
    report = read_report(Path(run.report_path)) if run.report_path else {}
    render_run(
        report, hosts, since, time.monotonic() - t0, Console(width=max(140, Console().width))
    )
    if result.status != 0:
        error = run.error()
        if error is not None:
            console.print(f"[red]{printable(error[0])}[/red]")
        console.print(
            f"[red]the GPU-stack upgrade stopped; report: {printable(run.report_path)}; fix the "
            "cause and run the same command again to resume[/red]"
        )
        return EXIT_FAILED
    if validate and run_validate(inventory, "upgrade-gpu-stack", "after", console) != 0:
        console.print("[red]validate failed after the GPU-stack upgrade[/red]")
        return EXIT_FAILED
    return EXIT_OK
