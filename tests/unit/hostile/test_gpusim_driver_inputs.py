"""Hostile input to ``gpusim driver unload|load``: CUDA versions that are none (escape
sequences, a NUL, a second line, markup, other digits, huge), a state file whose versions
hold escape sequences, and a ``/proc`` tree with entries ``int`` refuses and a ``comm``
that is not UTF-8 or holds escape sequences.

A version is refused naming the option, the value and the fix (exit 1, as every gpusim
refusal); what gpusim prints from the state file or ``/proc`` never reaches the terminal
as an escape sequence; the scan of ``/proc`` never raises."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from gpufleet.lab.gpusim import admin, driver, state

pytestmark = pytest.mark.unit


def gpusim(path: Path, *argv: str) -> int:
    return admin.main(["--state", str(path), *argv])


@pytest.fixture
def node(tmp_path: Path) -> Path:
    path = tmp_path / "state.json"
    assert gpusim(path, "init", "--count", "1", "--node-name", "w1") == 0
    return path


#: ``--cuda-version`` values that are no CUDA version.
CUDAS = {
    "escape": "\x1b]0;title\x07",
    "second-line": "13.0\nNVRM: API mismatch",
    "nul": "13.0\x00",
    "markup": "[red]13.0",
    "empty": "",
    "arabic-digits": "\u0661\u0663.\u0660",
    "huge": "1" * 100_000 + ".0",
    "three-parts": "13.0.1",
}


@pytest.mark.parametrize("case", list(CUDAS))
def test_a_cuda_version_that_is_none_is_refused(
    case: str, node: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert gpusim(node, "driver", "unload") == 0
    capsys.readouterr()
    assert gpusim(node, "driver", "load", "--cuda-version", CUDAS[case]) == 1
    err = capsys.readouterr().err
    assert "--cuda-version=" in err and "fix: give it as nvidia-smi prints it" in err
    assert "\x1b" not in err and "\x00" not in err and len(err) < 1_000
    assert state.load(node).driver_loaded is False


def test_a_cuda_version_is_taken(node: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert gpusim(node, "driver", "unload") == 0
    assert gpusim(node, "driver", "load", "--cuda-version", "12.8") == 0
    assert "(CUDA 12.8)" in capsys.readouterr().out


def test_versions_of_the_state_file_are_printed_escaped(
    node: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    doc = json.loads(node.read_text())
    doc["driver_version"], doc["cuda_version"] = "580\x1b[2J", "13.0\x1b]0;x\x07"
    node.write_text(json.dumps(doc))
    assert gpusim(node, "driver", "unload") == 0
    assert gpusim(node, "driver", "load") == 0
    assert gpusim(node, "driver", "load", "--version", "580.95.05") == 1
    out = capsys.readouterr()
    assert "\x1b" not in out.out + out.err and "\x07" not in out.out + out.err
    assert "580\\x1b[2J" in out.out


def test_a_proc_entry_int_refuses_is_no_pid(tmp_path: Path, node: Path) -> None:
    proc = tmp_path / "proc"
    for entry in ("\u00b2", "\u0661\u0662", "9" * 200):
        (proc / entry / "fd").mkdir(parents=True)
    assert driver.device_holders(state.device_file_path(node), proc) == []


def test_a_comm_not_utf8_or_with_escapes_is_shown_escaped(tmp_path: Path, node: Path) -> None:
    device = state.device_file_path(node)
    fd = tmp_path / "proc" / "7" / "fd"
    fd.mkdir(parents=True)
    os.symlink(device, fd / "3")
    (tmp_path / "proc" / "7" / "comm").write_bytes(b"\xffplug\x1b]0;t\x07in\n")
    (holder,) = driver.device_holders(device, tmp_path / "proc")
    line = holder.describe(device)
    assert "\x1b" not in line and "\x07" not in line and "plug" in line
