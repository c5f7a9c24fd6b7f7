"""``gpufleet validate --conformance``: Kubernetes' own DRA e2e specs (``test/e2e/dra`` of
the cluster's release) against the cluster a kubeconfig names, each spec a check of area
``conformance`` in validate's report.

The pieces stay with their owners: which specs run, what the Ginkgo report means and the
namespace clean-up are ``plugins/module_utils/validate/conformance.py``'s; the suite's
binary, its command line, its image table and how it is run and stopped are
``gpufleet/build/dra_e2e.py``'s. Here: the options checked before anything runs, the
release read from the cluster, the run and the report it becomes.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import click
from ansible_collections.gpufleet.cluster.plugins.module_utils.common import limits as ig
from ansible_collections.gpufleet.cluster.plugins.module_utils.kube import client as vk
from ansible_collections.gpufleet.cluster.plugins.module_utils.validate import conformance as vc
from ansible_collections.gpufleet.cluster.plugins.module_utils.validate import report as vr
from rich.console import Console

from gpufleet.build import binaries, dra_e2e

#: Ginkgo processes at most (each runs specs against the API server at once).
MAX_PROCS = 32
#: The largest Ginkgo JSON report read (the 103 default specs on three processes: 7.3 MiB).
MAX_REPORT_BYTES = 256 * 1024 * 1024


class CannotRun(Exception):
    """The specs cannot run here (cluster unreachable, release not pinned, suite not built,
    no report written); the message says why and the fix. Exit 2."""


@dataclass(frozen=True)
class Options:
    """The checked ``--conformance-*`` options."""

    focus: str | None
    procs: int
    timeout: str
    report_dir: Path | None

    @property
    def timeout_s(self) -> int:
        return vc.duration_seconds(self.timeout)


@dataclass(frozen=True)
class Target:
    """The cluster the specs run against: its kubeconfig, a client, its release and the
    suite built for that release."""

    kubeconfig: Path
    kube: vk.Kube
    release: str
    binary: Path


def _bad(option: str, message: str) -> click.BadParameter:
    return click.BadParameter(message, param_hint=f"'{option}'")


def check_options(
    *,
    enabled: bool,
    only: bool,
    focus: str | None,
    procs: int | None,
    timeout: str | None,
    report_dir: str | None,
    playbook_options: Sequence[str],
) -> Options | None:
    """The conformance options when ``--conformance`` or ``--conformance-only`` is given
    (None otherwise). Raises click.BadParameter (exit 2) naming the option, the value and
    the fix: a ``--conformance-*`` option without ``--conformance``, an empty or invalid
    focus expression, processes outside 1..``MAX_PROCS``, a timeout that is no duration,
    a report directory that is a file, and ``playbook_options`` (the playbook's options
    given, such as ``--smoke``) with ``--conformance-only``."""
    given = {
        "--conformance-focus": focus,
        "--conformance-procs": procs,
        "--conformance-timeout": timeout,
        "--conformance-report-dir": report_dir,
    }
    if not (enabled or only):
        for option, value in given.items():
            if value is not None:
                raise _bad(option, f"{value!r} has no effect alone; fix: add --conformance")
        return None
    if only and playbook_options:
        raise _bad(
            playbook_options[0],
            "--conformance-only runs no playbook, so it has no use for this option; fix: "
            "drop it, or give --conformance to run the playbook's checks too",
        )
    if focus is not None:
        try:
            re.compile(focus)
        except re.error as err:
            raise _bad(
                "--conformance-focus",
                f"{focus!r} is no regular expression ({err}); fix: escape the characters "
                r"that have a meaning (\[ \( \.), e.g. 'supports simple ResourceClaim'",
            ) from None
        if not focus.strip():
            raise _bad("--conformance-focus", "an empty focus selects every spec; fix: drop it")
        unfit = _focus_unfit(focus)
        if unfit:
            raise _bad(
                "--conformance-focus",
                f"{focus!r} {unfit}; fix: give words of the spec's text, e.g. "
                "'supports simple ResourceClaim'",
            )
    procs = 1 if procs is None else procs
    if not 1 <= procs <= MAX_PROCS:
        raise _bad("--conformance-procs", f"{procs} is outside 1..{MAX_PROCS}; fix: give 1 to 4")
    timeout = timeout or "1h"
    try:
        vc.duration_seconds(timeout)
    except ValueError as err:
        raise _bad("--conformance-timeout", str(err)) from None
    if report_dir is not None:
        _check_report_dir(report_dir)
    return Options(focus, procs, timeout, Path(report_dir) if report_dir else None)


#: Pieces of Python's expressions that Go's (the suite's RE2) refuses: lookarounds,
#: back-references, atomic groups and possessive repeats.
_NOT_RE2 = {
    "ASSERT", "ASSERT_NOT", "GROUPREF", "GROUPREF_EXISTS", "ATOMIC_GROUP", "POSSESSIVE_REPEAT",
}  # fmt: skip
_REPEATS = {"MAX_REPEAT", "MIN_REPEAT"}
#: Repeats (``*``, ``+``, ``{n,m}``) a focus may hold.
MAX_FOCUS_REPEATS = 4


def _focus_unfit(focus: str) -> str:
    """Why the suite (Go's RE2) or the reading of its report (Python's ``re``, which
    backtracks) cannot take ``focus``, or "": a NUL (no command line carries it), a
    lookaround, back-reference or atomic group (RE2 has none), a repeat of a group that
    itself repeats or branches, or more than ``MAX_FOCUS_REPEATS`` repeats (Python's
    matching takes exponential or high polynomial time on them)."""
    if "\x00" in focus:
        return "holds a NUL character, which no command line carries"
    try:  # the parser of ``re``; its tree names each construct
        from re import _parser as sre_parse  # type: ignore[attr-defined]
    except ImportError:  # Python before 3.11
        import sre_parse

    repeats = 0

    def walk(tree: Any, repeated: bool) -> str:
        nonlocal repeats
        for op, arg in tree:
            name, found = str(op), ""
            if name in _NOT_RE2:
                return "uses a lookaround, a back-reference or an atomic group, which RE2 has not"
            if name in _REPEATS or (name == "BRANCH" and repeated):
                if repeated:
                    return "repeats a repeat or a choice, which takes exponential time to match"
                repeats += 1
            if name in _REPEATS:
                found = walk(arg[2], True)
            elif name == "SUBPATTERN":
                found = walk(arg[-1], repeated)
            elif name == "BRANCH":
                found = next((f for b in arg[1] if (f := walk(b, repeated))), "")
            if found:
                return found
        return ""

    found = walk(sre_parse.parse(focus), False)
    if not found and repeats > MAX_FOCUS_REPEATS:
        return f"holds {repeats} repeats, more than the {MAX_FOCUS_REPEATS} matched in time"
    return found


def _check_report_dir(report_dir: str) -> None:
    """``--conformance-report-dir``: a directory, or a path whose nearest existing parent is
    a directory this user may write; raises click.BadParameter naming the value."""
    if "\x00" in report_dir or not report_dir.strip():
        raise _bad(
            "--conformance-report-dir",
            f"{report_dir!r} is no path; fix: give a directory path, e.g. ./conformance",
        )
    path = Path(report_dir).expanduser().absolute()
    there = next(p for p in (path, *path.parents) if p.exists() or p == Path(p.anchor))
    if not there.is_dir():
        raise _bad(
            "--conformance-report-dir",
            f"{report_dir} is a file"
            + (f" ({there} is one)" if there != path else "")
            + "; fix: give a directory path",
        )
    if not os.access(there, os.W_OK | os.X_OK):
        raise _bad(
            "--conformance-report-dir",
            f"{report_dir}: {there} is not writable; fix: give a directory you may write",
        )


def kubeconfig_file(kubeconfig: str | None) -> Path:
    """The one kubeconfig file the suite reads: ``--kubeconfig``, else ``KUBECONFIG``
    (a single path), else ``~/.kube/config``. Raises CannotRun when there is none or
    ``KUBECONFIG`` lists several files (the suite takes one)."""
    if kubeconfig:
        return Path(kubeconfig).resolve()
    env = os.environ.get("KUBECONFIG", "")
    paths = [p for p in env.split(os.pathsep) if p]
    if len(paths) > 1:
        raise CannotRun(
            f"KUBECONFIG lists {len(paths)} files and the e2e suite reads one; fix: give "
            "--kubeconfig FILE"
        )
    path = Path(paths[0]) if paths else Path.home() / ".kube" / "config"
    if not path.is_file():
        raise CannotRun(f"no kubeconfig at {path}; fix: give --kubeconfig FILE")
    return path.resolve()


def prepare(kubeconfig: str | None) -> Target:
    """Read the cluster's release (``GET /version``) and find the suite built for it.
    Raises CannotRun: the kubeconfig or the API server cannot be used, the release is not
    pinned (the message names the pinned releases) or its suite is not built (the message
    names the command that builds it)."""
    path = kubeconfig_file(kubeconfig)
    try:
        kube = vk.Kube(str(path))
        release = vc.server_release(kube.get("/version"))
    except vk.KubeError as err:
        raise CannotRun(f"cannot read the cluster's version: {err.message}") from None
    except ValueError as err:
        raise CannotRun(str(err)) from None
    try:
        binary = dra_e2e.built_binary(release)
    except dra_e2e.DraE2EError as err:
        raise CannotRun(f"the cluster runs Kubernetes {release}: {err}") from None
    return Target(path, kube, release, binary)


def images_check(binary: Path) -> vr.Check:
    """The images the DRA specs run on the nodes (the suite's ``--list-images`` table sorted
    by :func:`gpufleet.build.dra_e2e.suite_images`, under ``KUBE_TEST_REPO_LIST`` when set:
    then every listed image) and the registries the nodes pull them from unless they hold
    them: nothing here pulls an image or reaches a registry."""
    check = vr.Check(f"{vc.AREA}.images", "Images the e2e specs run on the nodes")
    try:
        if os.environ.get("KUBE_TEST_REPO_LIST"):
            refs = dra_e2e.listed_images(binary, env=os.environ)
        else:
            refs = list(dra_e2e.suite_images(binary).run)
    except dra_e2e.DraE2EError as err:
        return vr.skipped(check.id, check.title, f"the suite did not list its images: {err}")
    refs.append("the sample device plugin's image (its manifest's name; DRAExtendedResource)")
    registries = sorted({r.split("/", 1)[0] for r in refs[:-1] if "/" in r})
    check.status, check.details = vr.PASS, refs
    check.summary = (
        f"{len(refs)} images from {', '.join(registries)}: the nodes pull them unless they "
        "hold them (docs/dra-e2e.md: a mirror, KUBE_TEST_REPO_LIST, or images imported ahead)"
    )
    check.data = {"images": refs, "registries": registries}
    check.evidence.append(vr.Evidence(f"{binary} --list-images", f"{len(refs) - 1} images"))
    return check


def _report_dir(options: Options, release: str) -> Path:
    if options.report_dir:
        return options.report_dir.resolve()
    stamp = dt.datetime.now(dt.UTC).strftime("%Y%m%dT%H%M%SZ")
    return binaries.cache_root() / "reports" / "conformance" / f"{release}-{stamp}"


def _ginkgo_report(path: Path) -> Any:
    what = f"Ginkgo report {path}"
    doc = ig.load_json(ig.read_text(path, what, MAX_REPORT_BYTES) or "[]", what, "[]")
    if not isinstance(doc, list) or not all(isinstance(s, dict) for s in doc):
        raise ig.InputError(f"{what} is not a list of suite reports")
    return doc


def run(target: Target, options: Options, console: Console) -> tuple[dict[str, Any], bool]:
    """Run the specs (the default label filter and skip, ``options``' focus, processes and
    timeout), delete the namespaces the run created whatever the end, and return the
    report (checks of area ``conformance``) and whether the run was interrupted (Ctrl-C).
    Raises CannotRun when the suite wrote no report (after the clean-up)."""
    out = _report_dir(options, target.release)
    images = images_check(target.binary)
    console.print(f"conformance: {images.summary}")
    try:
        before = vc.suite_namespaces(vc.list_suite_namespaces(target.kube))
    except vk.KubeError as err:
        raise CannotRun(f"cannot list namespaces: {err.message}") from None
    args = dra_e2e.suite_args(
        kubeconfig=target.kubeconfig,
        report_dir=out,
        label_filter=vc.DEFAULT_LABEL_FILTER,
        focus=options.focus,
        skip=vc.DEFAULT_SKIP,
        timeout=options.timeout,
        procs=options.procs,
    )
    console.print(f"conformance: Kubernetes {target.release} DRA e2e specs; reports in {out}")
    try:
        ended = dra_e2e.run_suite(
            dra_e2e.suite_argv(target.binary, args),
            report_dir=out,
            kubeconfig=target.kubeconfig,
            deadline_s=options.timeout_s + dra_e2e.PAST_TIMEOUT_S,
        )
    finally:
        cleanup = vc.delete_namespaces(target.kube, before)
        console.print(f"conformance: clean-up: {cleanup.summary}")
    log = out / "output.log"
    if not (out / "ginkgo.json").is_file():
        raise CannotRun(
            f"the suite wrote no report (it ended with exit status {ended.returncode} after "
            f"{ended.seconds:g} s); see {log}"
        )
    try:
        ginkgo = _ginkgo_report(out / "ginkgo.json")
    except (OSError, ig.InputError) as err:
        raise CannotRun(f"the suite wrote no usable report ({err}); see {log}") from None
    checks = [images, cleanup]
    checks += vc.spec_checks(ginkgo, focus=options.focus, output=str(log))
    if ended.timed_out:
        run_check = vr.Check(f"{vc.AREA}.run", "The e2e run ended within its timeout")
        run_check.problem(None, vr.FAIL, f"stopped after {ended.seconds:g} s")
        run_check.fix = "give a longer --conformance-timeout, or a narrower --conformance-focus"
        checks.append(vr.finish(run_check, ""))
    summary = vc.summarise(ginkgo)
    meta = {
        "kubernetes_version": f"v{target.release}",
        "duration_s": ended.seconds,
        "api_requests": target.kube.requests,
        "conformance": {
            "release": target.release,
            "binary": str(target.binary),
            "label_filter": vc.DEFAULT_LABEL_FILTER,
            "skip": vc.DEFAULT_SKIP,
            "focus": options.focus,
            "procs": options.procs,
            "timeout": options.timeout,
            "report_dir": str(out),
            "seconds": ended.seconds,
            "exit_code": ended.returncode,
            "specs": {
                k: getattr(summary, k) for k in ("total", "run", "passed", "failed", "skipped")
            },
        },
    }
    (out / "summary.json").write_text(json.dumps(meta["conformance"], indent=2) + "\n")
    return vr.Report(checks, meta).to_dict(), ended.interrupted
