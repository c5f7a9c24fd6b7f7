"""``gpufleet validate --conformance``: every input is refused before anything runs, naming
the option, the value and the fix; the kubeconfig the suite reads."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from gpufleet.cli import main
from gpufleet.commands import _conformance

pytestmark = pytest.mark.unit


def refused(*args: str) -> str:
    result = CliRunner().invoke(main, ["validate", *args])
    assert result.exit_code == 2, result.output
    return " ".join(result.output.split())


@pytest.mark.parametrize(
    ("args", "option", "said"),
    [
        (["--conformance-focus", "Conformance"], "--conformance-focus", "'Conformance' has no"),
        (["--conformance-procs", "3"], "--conformance-procs", "fix: add --conformance"),
        (["--conformance", "--conformance-procs", "0"], "--conformance-procs", "0 is outside"),
        (["--conformance", "--conformance-procs", "99"], "--conformance-procs", "fix: give 1"),
        (
            ["--conformance", "--conformance-timeout", "1 hour"],
            "--conformance-timeout",
            "'1 hour' is not a duration; fix: give hours",
        ),
        (["--conformance", "--conformance-timeout", "0s"], "--conformance-timeout", "1s to 24h"),
        (
            ["--conformance", "--conformance-focus", "with [v1beta"],
            "--conformance-focus",
            "'with [v1beta' is no regular expression",
        ),
        (["--conformance", "--conformance-focus", " "], "--conformance-focus", "fix: drop it"),
        (["--conformance-only", "--smoke"], "--smoke", "--conformance-only runs no playbook"),
        (["--conformance-only", "--limit", "gpu-1"], "--limit", "fix: drop it"),
    ],
)
def test_a_bad_conformance_input_is_refused_before_anything_runs(
    args: list[str], option: str, said: str
) -> None:
    out = refused(*args)
    assert f"'{option}'" in out
    assert said in out


def test_a_report_dir_that_is_a_file_is_refused(tmp_path: Path) -> None:
    afile = tmp_path / "reports"
    afile.write_text("")
    out = refused("--conformance-only", "--conformance-report-dir", str(afile))
    assert f"{afile} is a file; fix: give a directory path" in out


def test_the_defaults_are_one_process_and_an_hour() -> None:
    options = _conformance.check_options(
        enabled=True, only=False, focus=None, procs=None, timeout=None, report_dir=None,
        playbook_options=["--smoke"],
    )  # fmt: skip
    assert options == _conformance.Options(None, 1, "1h", None)
    assert options.timeout_s == 3600


def test_kubeconfig_names_one_file_for_the_suite(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    one, two = tmp_path / "a", tmp_path / "b"
    one.write_text("apiVersion: v1\n")
    monkeypatch.setenv("KUBECONFIG", f"{one}:{two}")
    with pytest.raises(_conformance.CannotRun, match="reads one; fix: give --kubeconfig FILE"):
        _conformance.kubeconfig_file(None)
    assert _conformance.kubeconfig_file(str(two)) == two
    monkeypatch.setenv("KUBECONFIG", str(one))
    assert _conformance.kubeconfig_file(None) == one
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "missing"))
    with pytest.raises(_conformance.CannotRun, match="no kubeconfig at"):
        _conformance.kubeconfig_file(None)


def test_a_summary_with_brackets_is_shown_as_written() -> None:
    from ansible_collections.gpufleet.cluster.plugins.module_utils.validate import report as vr
    from rich.console import Console

    from gpufleet.render import validation

    why = r"not selected by the focus '\[Conformance\]|[bold]x'"
    doc = vr.Report([vr.skipped("conformance.crud", "CRUD", why)]).to_dict()
    console = Console(record=True, width=200)
    validation.render_report(console, doc)
    assert why in console.export_text()
