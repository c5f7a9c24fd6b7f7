"""``gpufleet validate``: one command against a staging cluster, a report CI can gate on.

``gpufleet validate -i INVENTORY [--json FILE] [--junit FILE] [--markdown FILE] [--smoke]
[--kubeconfig PATH] [-e KEY=VALUE]`` runs ``playbooks/validate.yml`` (module
``dra_validate``): versions, feature gates, the DRA API, GPU nodes, hosts and
ResourceClaims, plus a smoke test with ``--smoke``. The report is JSON first (``--json``,
``-`` for stdout), rendered as a rich table per area (failures first), JUnit XML and
Markdown.

``--conformance`` runs, after the playbook's checks, Kubernetes' own DRA e2e specs of the
cluster's release against the cluster the kubeconfig names (``--kubeconfig``, else
``KUBECONFIG`` or ``~/.kube/config``), each spec a check ``conformance.<slug>`` in the
same report; ``--conformance-only`` runs them instead of the playbook
(``gpufleet/commands/_conformance.py``, docs/dra-e2e.md).

Exit codes: 0 no check failed, 1 a check failed, 2 validation could not run (bad
inventory, the cluster could not be read, the playbook stopped before judging, the e2e
suite of the cluster's release not built or not pinned, the run interrupted).
"""

from __future__ import annotations

import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import click
from ansible_collections.gpufleet.cluster.plugins.module_utils.kube import client as vk
from ansible_collections.gpufleet.cluster.plugins.module_utils.validate import report as vr
from rich.console import Console

from gpufleet import runner
from gpufleet.commands import _conformance
from gpufleet.commands._options import existing_paths, extra_vars_flag
from gpufleet.commands._output import check_outputs, stdout_taken, write_json, write_output
from gpufleet.exit import EXIT_CANNOT_RUN, exit_with
from gpufleet.render import validation

MODULE_TASK = "Validate | Run the checks"


def write_outputs(
    report: Mapping[str, Any], json_file: str | None, junit: str | None, markdown: str | None
) -> None:
    """Write the report to each output given (``_output.write_output``: exit 2 when one
    cannot be written)."""
    if json_file:
        write_json(report, json_file)
    if junit:
        write_output(vr.render_junit(report), junit, "--junit")
    if markdown:
        write_output(vr.render_markdown(report), markdown, "--markdown")


def playbook_report(
    inventories: tuple[str, ...],
    extravars: dict[str, Any],
    limit: str | None,
    verbose: int,
    err: Console,
) -> dict[str, Any]:
    """Run ``playbooks/validate.yml`` and return its report (the module's result, else the
    report file); exit 2 when the playbook cannot run or judged nothing."""
    with tempfile.TemporaryDirectory(prefix="gpufleet-validate-") as tmp:
        extravars.setdefault("validate_report_file", str(Path(tmp) / "report.json"))
        captured: dict[str, Any] = {}

        def on_event(event: Mapping[str, Any]) -> None:
            data = event.get("event_data") or {}
            if data.get("task") != MODULE_TASK:
                return
            res = data.get("res") or {}
            if event.get("event") == "runner_on_ok" and isinstance(res.get("report"), dict):
                captured["report"] = res["report"]
            elif event.get("event") == "runner_on_failed":
                captured["error"] = str(res.get("msg") or "the validation task failed")

        try:
            result = runner.run_playbook(
                "validate",
                list(inventories) or [str(runner.default_inventory())],
                extravars=extravars,
                limit=limit,
                verbosity=verbose,
                console=err,
                on_event=on_event,
            )
        except runner.RunError as e:
            err.print(f"[red]error:[/red] {e}")
            exit_with(EXIT_CANNOT_RUN)
        report = captured.get("report")
        if report is not None and not validation.usable_report(report):
            report, captured["error"] = None, "the module returned a report of another shape"
        report_file = Path(str(extravars["validate_report_file"]))
        if report is None and report_file.is_file():
            report = validation.read_report(report_file)
            if report is None and "error" not in captured:
                captured["error"] = (
                    f"validate_report_file={report_file} is not a validation report; fix: "
                    "give a new file path (the playbook writes the report there)"
                )
    if report is None:
        why = captured.get("error") or (
            "; ".join(f"{h} | {t}: {m}" for h, t, m in result.progress.failures)
            or f"the playbook ended with status {result.status} before the checks ran"
        )
        err.print(f"[red]validation could not run:[/red] {why}")
        exit_with(EXIT_CANNOT_RUN)
    report = dict(report)
    report.setdefault("meta", {})["playbook_status"] = result.status
    return report


def conformance_report(
    target: _conformance.Target, options: _conformance.Options, err: Console
) -> tuple[dict[str, Any], bool]:
    """The e2e specs' report and whether the run was interrupted; exit 2 when the suite
    could not run (the namespaces it created are deleted first)."""
    try:
        return _conformance.run(target, options, err)
    except _conformance.CannotRun as exc:
        err.print(f"[red]conformance could not run:[/red] {exc}")
        exit_with(EXIT_CANNOT_RUN)


@click.command("validate")
@click.option(
    "-i",
    "--inventory",
    "inventories",
    multiple=True,
    callback=existing_paths,
    help="Inventory (repeatable; default: the embedded lab inventory).",
)
@click.option("--json", "json_file", metavar="FILE", help="Write the JSON report ('-': stdout).")
@click.option("--junit", metavar="FILE", help="Write the report as JUnit XML ('-': stdout).")
@click.option("--markdown", metavar="FILE", help="Write the report as Markdown ('-': stdout).")
@click.option(
    "--smoke",
    is_flag=True,
    help="Also run the smoke test: a pod per device kind in a throwaway namespace, deleted "
    "afterwards (kept when the smoke fails; the report names it).",
)
@click.option(
    "--kueue",
    is_flag=True,
    help="Also run the Kueue checks (area kueue), as site_kueue: true does: controller, "
    "device-class mappings, queues, quotas against devices, pending workloads.",
)
@click.option("--kubeconfig", type=click.Path(dir_okay=False), help="Kubeconfig on this host.")
@extra_vars_flag("Extra variable for the playbook (repeat); the value is read as YAML.", "extra")
@click.option("--limit", default=None, help="Limit the hosts read (as ansible-playbook).")
@click.option("-v", "--verbose", count=True, help="ansible-playbook verbosity.")
@click.option(
    "--conformance",
    is_flag=True,
    help="Also run Kubernetes' DRA e2e specs of the cluster's release against the cluster "
    "the kubeconfig names (area conformance); the suite must be built (docs/dra-e2e.md).",
)
@click.option(
    "--conformance-only",
    is_flag=True,
    help="Run the DRA e2e specs instead of the playbook's checks (no inventory is read).",
)
@click.option("--conformance-focus", metavar="REGEX", help="Run only the specs whose text matches.")
@click.option("--conformance-procs", type=int, metavar="N", help="Ginkgo processes (default 1).")
@click.option(
    "--conformance-timeout", metavar="DURATION", help="Ginkgo's suite timeout (default 1h)."
)
@click.option(
    "--conformance-report-dir",
    metavar="DIR",
    help="Where Ginkgo's reports and the suite's output go "
    "(default: <cache>/reports/conformance/<release>-<time>).",
)
def validate(
    inventories: tuple[str, ...],
    json_file: str | None,
    junit: str | None,
    markdown: str | None,
    smoke: bool,
    kueue: bool,
    kubeconfig: str | None,
    extra: dict[str, Any],
    limit: str | None,
    verbose: int,
    conformance: bool,
    conformance_only: bool,
    conformance_focus: str | None,
    conformance_procs: int | None,
    conformance_timeout: str | None,
    conformance_report_dir: str | None,
) -> None:
    """Validate a DRA GPU cluster; exit 0 pass, 1 a check failed, 2 could not run."""
    err = Console(stderr=True)
    outputs = {"--json": json_file, "--junit": junit, "--markdown": markdown}
    check_outputs(outputs)
    out = Console(stderr=stdout_taken(outputs))
    playbook_given = {"--inventory": inventories, "--smoke": smoke, "--kueue": kueue}
    playbook_given |= {"--extra-vars": extra, "--limit": limit, "--verbose": verbose}
    options = _conformance.check_options(
        enabled=conformance,
        only=conformance_only,
        focus=conformance_focus,
        procs=conformance_procs,
        timeout=conformance_timeout,
        report_dir=conformance_report_dir,
        playbook_options=[o for o, v in playbook_given.items() if v],
    )
    if kubeconfig:
        try:
            vk.check_kubeconfig(kubeconfig)
        except vk.KubeError as exc:
            raise click.BadParameter(exc.message, param_hint="'--kubeconfig'") from None
    target = None
    if options is not None:
        try:  # before the playbook: a suite that cannot run is known at once
            target = _conformance.prepare(kubeconfig)
        except _conformance.CannotRun as exc:
            err.print(f"[red]conformance cannot run:[/red] {exc}")
            exit_with(EXIT_CANNOT_RUN)
    reports = []
    if not conformance_only:
        extravars = {**extra, "validate_smoke": smoke}
        if kueue:
            extravars["site_kueue"] = True
        if kubeconfig:
            extravars["validate_kubeconfig"] = str(Path(kubeconfig).resolve())
        reports.append(playbook_report(inventories, extravars, limit, verbose, err))
    interrupted = False
    if target is not None and options is not None:
        conf, interrupted = conformance_report(target, options, err)
        reports.insert(0, conf)  # merged first: the playbook's run figures stay in meta
    report = reports[0] if len(reports) == 1 else vr.merge(*reports)
    validation.render_report(out, report)
    write_outputs(report, json_file, junit, markdown)
    if interrupted:
        err.print("[red]conformance was interrupted:[/red] the report holds the specs that ran")
        exit_with(EXIT_CANNOT_RUN)
    exit_with(vr.exit_code(report))
