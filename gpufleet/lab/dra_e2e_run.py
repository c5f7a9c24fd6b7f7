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
feature gates can run (``conformance.DEFAULT_LABEL_FILTER`` of
``plugins/module_utils/validate/conformance.py``, which owns the filter and the reading of
the report), which is what the collection provisions. The product command for any
cluster is ``gpufleet validate --conformance``; this tool adds what only the lab can do:
it builds the suite and imports its images into the lab's nodes.

CLI (``python -m gpufleet.lab.dra_e2e_run``)::

    [--kubernetes V] [--label-filter EXPR] [--focus REGEX] [--skip REGEX] [--report-dir DIR]
    [--timeout 1h] [--no-images] [--images-only] [--procs N]

``--images-only`` makes and imports the images and runs nothing (what
``gpufleet validate --conformance`` needs on a lab).

Exit 0: every spec that ran passed; 1: a spec failed; 2: the suite could not run.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import click
from ansible_collections.gpufleet.cluster.plugins.module_utils.validate import conformance

from gpufleet.build import binaries, dra_e2e
from gpufleet.exit import EXIT_CANNOT_RUN, EXIT_FAILED, EXIT_OK, exit_with
from gpufleet.lab import cluster, e2e_images

SPEC_COUNTS = ("total", "run", "passed", "failed", "skipped")


def run(
    version: str | None,
    *,
    label_filter: str = conformance.DEFAULT_LABEL_FILTER,
    focus: str | None = None,
    skip: str | None = conformance.DEFAULT_SKIP,
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
    args = dra_e2e.suite_args(
        kubeconfig=kubeconfig,
        report_dir=report_dir.resolve(),
        label_filter=label_filter,
        focus=focus,
        skip=skip,
        timeout=timeout,
        procs=procs,
    )
    ended = dra_e2e.run_suite(
        dra_e2e.suite_argv(built.path, args),
        report_dir=report_dir,
        kubeconfig=kubeconfig,
        deadline_s=conformance.duration_seconds(timeout) + dra_e2e.PAST_TIMEOUT_S,
    )
    report_path = report_dir / "ginkgo.json"
    if not report_path.is_file():
        summary: dict[str, Any] = {"error": f"no Ginkgo report; see {report_dir / 'output.log'}"}
        status = EXIT_CANNOT_RUN
    else:
        counts = conformance.summarise(json.loads(report_path.read_text()))
        summary = {
            "specs": {k: getattr(counts, k) for k in SPEC_COUNTS},
            "failed": counts.failures,
        }
        status = EXIT_FAILED if counts.failed or ended.returncode else EXIT_OK
    summary = {
        "kubernetes": built.path.parent.name.removeprefix("v"),
        "label_filter": label_filter,
        "focus": focus,
        "skip": skip,
        "procs": procs,
        "seconds": ended.seconds,
        "exit_code": ended.returncode,
        "timed_out": ended.timed_out,
        **summary,
    }
    (report_dir / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    return status, summary


@click.command(context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--kubernetes", "version", default=None, help="release (default: the default)")
@click.option("--label-filter", default=conformance.DEFAULT_LABEL_FILTER, show_default=True)
@click.option("--focus", default=None, help="Ginkgo focus regular expression")
@click.option(
    "--skip",
    default=conformance.DEFAULT_SKIP,
    show_default=True,
    help="Ginkgo skip regular expression",
)
@click.option(
    "--report-dir",
    type=click.Path(path_type=Path),
    default=None,
    help="where the reports go (default: <cache>/reports/dra-e2e/<lab>)",
)
@click.option("--timeout", default="1h", show_default=True, help="Ginkgo's suite timeout")
@click.option("--no-images", is_flag=True, help="do not make and import the suite's images")
@click.option("--images-only", is_flag=True, help="make and import the images, run nothing")
@click.option("--procs", default=1, show_default=True, help="Ginkgo processes (ginkgo run -p)")
def main(
    version: str | None,
    label_filter: str,
    focus: str | None,
    skip: str,
    report_dir: Path | None,
    timeout: str,
    no_images: bool,
    images_only: bool,
    procs: int,
) -> None:
    """Run the release's DRA e2e specs against the lab ($GPUFLEET_LAB_NAME)."""
    report_dir = report_dir or binaries.cache_root() / "reports" / "dra-e2e" / cluster.lab_name()
    try:
        conformance.duration_seconds(timeout)
        if images_only:
            nodes = e2e_images.import_into_nodes(e2e_images.build_archives(dra_e2e.build(version)))
            click.echo(f"images imported into {', '.join(nodes)}")
            exit_with(EXIT_OK)
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
    except (dra_e2e.DraE2EError, e2e_images.E2EImageError, cluster.LabError, ValueError) as exc:
        click.echo(f"dra_e2e_run: {exc}", err=True)
        exit_with(EXIT_CANNOT_RUN)
    click.echo(json.dumps(summary, indent=2))
    click.echo(f"reports: {report_dir}", err=True)
    exit_with(status)


if __name__ == "__main__":
    main(sys.argv[1:])  # pylint: disable=no-value-for-parameter
