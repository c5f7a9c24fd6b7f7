"""Hostile input to the run path of ``gpufleet upgrade-gpu-stack``: ``--components`` of
other shapes, ``targets.keep`` of other types, and a report file (the run's
``upgrade_gpu_stack_report_path``) of another shape: nodes or entries that are not
mappings, timings that are not numbers, markup, escape sequences and huge texts.

``--components`` and ``targets.keep`` are refused naming the value (a huge one by its
start) and the fix; ``render_run`` shows what the report holds, never raises, never
interprets markup or an escape sequence, and a long text costs its length."""

from __future__ import annotations

import io
import time
from typing import Any

import click
import pytest
from ansible_collections.gpufleet.cluster.plugins.module_utils.upgrade import gpu_stack as gs
from rich.console import Console

from gpufleet.commands.upgrade_gpu_stack import parse_components
from gpufleet.render.gpu_stack_plan import render_run

pytestmark = pytest.mark.unit

SINCE = "2026-01-01T00:00:00Z"
LATER = "2026-06-01T00:00:00Z"
#: CPU seconds a render of a hostile report may take (the process's own time: a loaded
#: machine does not stretch it).
QUICK = 5.0


def _entry(**over: Any) -> dict[str, Any]:
    return {"node": "gpu-1", "state": "done", "phase": "done", "updated": LATER, **over}


#: A report of another shape -> the case's id.
REPORTS = {
    "nodes-list": {"nodes": [1, 2]},
    "nodes-text": {"nodes": "w-1"},
    "entry-text": {"nodes": {"w-1": "done"}},
    "entry-list": {"nodes": {"w-1": [1]}},
    "timings-list": {"nodes": {"w-1": _entry(timings_s=[1.0])}},
    "timing-text": {"nodes": {"w-1": _entry(timings_s={"drain_s": "abc"})}},
    "timing-mapping": {"nodes": {"w-1": _entry(timings_s={"driver_s": {}})}},
    "timing-huge-int": {"nodes": {"w-1": _entry(timings_s={"drain_s": 10**400})}},
    "updated-number": {"nodes": {"w-1": _entry(updated=5)}},
    "failed-node-list": {"nodes": {"w-1": _entry(state="failed", node=["[red]"], cause={})}},
}


def _render(report: Any, width: int = 140) -> str:
    buf = io.StringIO()
    render_run(report, ["w-1"], SINCE, 1.0, Console(file=buf, width=width, color_system=None))
    return buf.getvalue()


@pytest.mark.parametrize("case", list(REPORTS))
def test_a_report_of_another_shape_is_shown_not_raised(case: str) -> None:
    assert "run wall-clock 1.0s" in _render(REPORTS[case])


def test_markup_and_escapes_in_a_report_show_as_written() -> None:
    report = {
        "nodes": {
            "w-1": _entry(
                state="failed", node="[red]gpu-1", phase="[/]", cause="oops\x1b]0;title\x07[bold]"
            )
        }
    }
    buf = io.StringIO()
    render_run(report, ["w-1"], SINCE, 1.0, Console(file=buf, width=400, color_system=None))
    out = buf.getvalue()
    assert "\x1b" not in out and "\x07" not in out
    assert "[red]gpu-1: failed in phase [/]: oops\\x1b]0;title\\x07[bold]" in out


@pytest.mark.parametrize("key", ["node", "cause", "phase"])
def test_a_huge_text_in_a_report_is_rendered_at_once(key: str) -> None:
    report = {"nodes": {"w-1": _entry(state="failed", **{key: "a" * 100_000})}}
    start = time.process_time()
    out = _render(report)
    assert time.process_time() - start < QUICK
    assert out.count("a") >= 100_000


#: ``--components`` values refused -> what the refusal names.
COMPONENTS = {
    "empty": ("", "--components=''"),
    "blank": (" , ", "--components=' , '"),
    "unknown": ("driver,kernel", "'kernel' is not a component"),
    "twice": ("driver,driver", "--components='driver,driver'"),
    "nul": ("driver\x00", "is not a component"),
    "homoglyph": ("dr\u0456ver", "is not a component"),
    "huge": ("x," * 500_000, "(1000000 characters)"),
}


@pytest.mark.parametrize("case", list(COMPONENTS))
def test_components_of_another_shape_are_refused_naming_the_option(
    case: str, capsys: pytest.CaptureFixture[str]
) -> None:
    text, named = COMPONENTS[case]
    with pytest.raises((SystemExit, click.exceptions.Exit)) as info:
        parse_components(text)
    code = getattr(info.value, "exit_code", getattr(info.value, "code", None))
    assert code == 2
    err = capsys.readouterr().err
    assert named in err and "Fix: give one or more of driver, toolkit, chart" in err
    assert len(err) < 2_000


#: ``targets.keep`` values refused -> the case's id.
KEEPS = {
    "text": "driver",
    "mapping": {"driver": True},
    "nested": [["driver"]],
    "none-member": [None],
    "number": 5,
    "mapping-member": [{}],
    "huge": ["kernel"] * 1_000_000,
}


@pytest.mark.parametrize("case", list(KEEPS))
def test_keep_of_another_type_is_refused_naming_the_variable(case: str) -> None:
    with pytest.raises(gs.GpuStackPlanError) as info:
        gs._keep(KEEPS[case])
    assert "upgrade_gpu_stack_components" in str(info.value)
    assert len(str(info.value)) < 2_000


def test_keep_repeated_or_huge_of_known_parts_is_read_once() -> None:
    start = time.process_time()
    assert gs._keep(["driver"] * 1_000_000 + ["chart"]) == ("driver", "chart")
    assert time.process_time() - start < QUICK
