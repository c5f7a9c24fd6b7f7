"""Run Kubernetes' DRA e2e specs against the lab and summarise them.

The suite is the release's own ``test/e2e/dra`` (built by :mod:`gpufleet.build.dra_e2e`);
its images are made and imported into the lab's nodes by :mod:`gpufleet.lab.e2e_images`.
A run writes, under ``--report-dir``: ``junit.xml`` and ``ginkgo.json`` (Ginkgo's own
reports), ``output.log`` (the suite's output) and ``summary.json``::

    {"kubernetes": "1.37.2", "label_filter": "...", "focus": null, "skip": "...",
     "seconds": 812.4, "exit_code": 0,
     "specs": {"total": 132, "run": 107, "passed": 100, "failed": 2, "skipped": 30},
     "failed": [{"name": "[sig-node] [DRA] ...", "message": "...", "location": "dra.go:123"}]}

``specs.skipped`` counts the specs the label filter left out and those the suite skipped
at run time. The default label filter is what a cluster with the release's default
feature gates can run (:data:`DEFAULT_LABEL_FILTER`), which is what the collection provisions.

CLI (``python -m gpufleet.lab.dra_e2e_run``)::

    [--kubernetes V] [--label-filter EXPR] [--focus REGEX] [--skip REGEX] [--report-dir DIR]
    [--timeout 1h] [--no-images] [--procs N]

Exit 0: every spec that ran passed; 1: a spec failed; 2: the suite could not run.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import click

from gpufleet.build import binaries, dra_e2e
from gpufleet.exit import EXIT_CANNOT_RUN, EXIT_FAILED, EXIT_OK, exit_with
from gpufleet.lab import cluster, e2e_images

#: The specs a cluster with the release's default feature gates can run: every DRA spec
#: but those that need a gate that is off by default (the framework labels them
#: ``Feature:OffByDefault``, with ``Alpha`` or ``BetaOffByDefault``) and flaky ones.
DEFAULT_LABEL_FILTER = "DRA && !Feature:OffByDefault && !Flaky"
#: Specs left out because the collection does not provision what they need: the deprecated
#: ``resource.k8s.io/v1beta1`` and ``v1beta2`` APIs, which 1.37 serves only when
#: ``--runtime-config`` enables them (the ``dra`` release data: ``enabledByDefault:
#: false``); the specs carry no label for it, so they are skipped by name.
DEFAULT_SKIP = r"with v1beta1 API|with v1beta2 API"
SPEC_COUNTS = ("total", "run", "passed", "failed", "skipped")


@dataclass
class Summary:
    """Counts of one run (specs are Ginkgo ``It`` nodes) and the failed specs."""

    total: int = 0
    run: int = 0
    passed: int = 0
    failed: int = 0
    skipped: int = 0
    failures: list[dict[str, str]] = field(default_factory=list)


def summarise(report: Sequence[Mapping[str, Any]]) -> Summary:
    """Counts of a Ginkgo JSON report (``-ginkgo.json-report``: a list of suite reports,
    each with ``SpecReports``); suite-level nodes (BeforeSuite, ReportAfterSuite) count
    only when they fail, as a failure named after the node."""
    out = Summary()
    for suite in report:
        for spec in suite.get("SpecReports") or []:
            state = spec.get("State", "")
            is_it = spec.get("LeafNodeType") == "It"
            if is_it:
                out.total += 1
            if state == "passed" and is_it:
                out.run += 1
                out.passed += 1
            elif state in ("skipped", "pending") and is_it:
                out.skipped += 1
            elif state not in ("passed", "skipped", "pending"):
                out.run += int(is_it)
                out.failed += 1
                failure = spec.get("Failure") or {}
                texts = [*(spec.get("ContainerHierarchyTexts") or []), spec.get("LeafNodeText", "")]
                location = failure.get("Location") or {}
                out.failures.append(
                    {
                        "name": " ".join(t for t in texts if t) or spec.get("LeafNodeType", ""),
                        "state": state,
                        "message": str(failure.get("Message", ""))[:2000],
                        "location": f"{Path(location.get('FileName', '')).name}:"
                        f"{location.get('LineNumber', '')}",
                    }
                )
    return out


def suite_args(
    *,
    kubeconfig: Path,
    report_dir: Path,
    label_filter: str,
    focus: str | None,
    skip: str | None,
    timeout: str,
    procs: int = 1,
) -> list[str]:
    """The suite's arguments: kubeconfig, the filter, both Ginkgo reports, no colour.

    With ``procs`` above 1 they are the ``ginkgo run`` arguments that follow the ginkgo
    command: Ginkgo's flags, the test binary's place (``{binary}``, filled in by the
    caller), ``--`` and the suite's own flags; ``Serial`` specs then run after the others
    on one process, as Ginkgo does."""
    ginkgo = {
        "label-filter": label_filter,
        "junit-report": str(report_dir / "junit.xml"),
        "json-report": str(report_dir / "ginkgo.json"),
        "timeout": timeout,
    }
    if focus:
        ginkgo["focus"] = focus
    if skip:
        ginkgo["skip"] = skip
    own = [f"--kubeconfig={kubeconfig}", "--provider=local"]
    if procs > 1:
        flags = [f"--{k}={v}" for k, v in ginkgo.items()]
        return ["run", f"--procs={procs}", *flags, "--no-color", "-v", "{binary}", "--", *own]
    return [*own, *(f"-ginkgo.{k}={v}" for k, v in ginkgo.items()), "-ginkgo.no-color", "-ginkgo.v"]


def run(
    version: str | None,
    *,
    label_filter: str = DEFAULT_LABEL_FILTER,
    focus: str | None = None,
    skip: str | None = DEFAULT_SKIP,
    report_dir: Path,
    timeout: str = "1h",
    images: bool = True,
    procs: int = 1,
) -> tuple[int, dict[str, Any]]:
    """Build the suite, import its images into the lab (unless ``images`` is False) and
    run it; returns the exit status and the summary written to ``summary.json``."""
    built = dra_e2e.build(version)
    if images:
        e2e_images.import_into_nodes(e2e_images.build_archives(built))
    report_dir.mkdir(parents=True, exist_ok=True)
    kubeconfig = cluster.kubeconfig_path()
    args = suite_args(
        kubeconfig=kubeconfig,
        report_dir=report_dir.resolve(),
        label_filter=label_filter,
        focus=focus,
        skip=skip,
        timeout=timeout,
        procs=procs,
    )
    if procs > 1:
        argv = [str(built.ginkgo), *(str(built.path) if a == "{binary}" else a for a in args)]
    else:
        argv = [str(built.path), *args]
    started = time.monotonic()
    with (report_dir / "output.log").open("w") as log:
        # the suite reads manifests from its own binary; run it where it writes nothing
        proc = subprocess.run(
            argv,
            stdout=log,
            stderr=subprocess.STDOUT,
            cwd=report_dir,
            env={**os.environ, "KUBECONFIG": str(kubeconfig)},
            check=False,
        )
    seconds = round(time.monotonic() - started, 1)
    report_path = report_dir / "ginkgo.json"
    if not report_path.is_file():
        summary: dict[str, Any] = {"error": f"no Ginkgo report; see {report_dir / 'output.log'}"}
        status = EXIT_CANNOT_RUN
    else:
        counts = summarise(json.loads(report_path.read_text()))
        summary = {
            "specs": {
                k: getattr(counts, k) for k in ("total", "run", "passed", "failed", "skipped")
            },
            "failed": counts.failures,
        }
        status = EXIT_FAILED if counts.failed or proc.returncode else EXIT_OK
    summary = {
        "kubernetes": built.path.parent.name.removeprefix("v"),
        "label_filter": label_filter,
        "focus": focus,
        "skip": skip,
        "procs": procs,
        "seconds": seconds,
        "exit_code": proc.returncode,
        **summary,
    }
    (report_dir / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    return status, summary


@click.command(context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--kubernetes", "version", default=None, help="release (default: the default)")
@click.option("--label-filter", default=DEFAULT_LABEL_FILTER, show_default=True)
@click.option("--focus", default=None, help="Ginkgo focus regular expression")
@click.option(
    "--skip", default=DEFAULT_SKIP, show_default=True, help="Ginkgo skip regular expression"
)
@click.option(
    "--report-dir",
    type=click.Path(path_type=Path),
    default=None,
    help="where the reports go (default: <cache>/reports/dra-e2e/<lab>)",
)
@click.option("--timeout", default="1h", show_default=True, help="Ginkgo's suite timeout")
@click.option("--no-images", is_flag=True, help="do not make and import the suite's images")
@click.option("--procs", default=1, show_default=True, help="Ginkgo processes (ginkgo run -p)")
def main(
    version: str | None,
    label_filter: str,
    focus: str | None,
    skip: str,
    report_dir: Path | None,
    timeout: str,
    no_images: bool,
    procs: int,
) -> None:
    """Run the release's DRA e2e specs against the lab ($GPUFLEET_LAB_NAME)."""
    report_dir = report_dir or binaries.cache_root() / "reports" / "dra-e2e" / cluster.lab_name()
    try:
        status, summary = run(
            version,
            label_filter=label_filter,
            focus=focus,
            skip=skip or None,
            report_dir=report_dir,
            timeout=timeout,
            images=not no_images,
            procs=procs,
        )
    except (dra_e2e.DraE2EError, e2e_images.E2EImageError, cluster.LabError) as exc:
        click.echo(f"dra_e2e_run: {exc}", err=True)
        exit_with(EXIT_CANNOT_RUN)
    click.echo(json.dumps(summary, indent=2))
    click.echo(f"reports: {report_dir}", err=True)
    exit_with(status)


if __name__ == "__main__":
    main(sys.argv[1:])  # pylint: disable=no-value-for-parameter
