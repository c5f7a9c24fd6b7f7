"""``gpufleet report --team-label``: label keys that are no Kubernetes label key are refused
before any request (exit 2, one short line naming the option and a fix); team names (the
label's values on the Namespaces a hostile API server lists, ``api_server``) reach every
output as text: escaped in the HTML and Markdown, as one sample per line in the metrics
(label values escaped as the exposition format writes them), never as markup or a
control sequence on the terminal; and exit 0 without a traceback."""

from __future__ import annotations

import copy
import html
import json
import re
import time
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from gpufleet.cli import main
from gpufleet.render.text import printable
from tests.integration.test_hostile_input_servers import write_kubeconfig
from tests.unit.hostile.api_server import answers, listing, serve
from tests.unit.report import test_teams as tt
from tests.unit.report.test_fleet import claim, device, node, rslice

pytestmark = pytest.mark.unit

LABEL = "gpufleet.io/team"
#: One sample of the text exposition format: a name, label values with ``\\``, ``\"`` and
#: ``\n`` escaped (nothing else), a value.
SAMPLE = re.compile(
    r'[a-zA-Z_:][a-zA-Z0-9_:]*(\{[a-zA-Z_][a-zA-Z0-9_]*="(?:[^"\\\n]|\\[\\"n])*"'
    r'(,[a-zA-Z_][a-zA-Z0-9_]*="(?:[^"\\\n]|\\[\\"n])*")*\})? -?[0-9.e+]+'
)
LABEL_VALUE = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\\n]|\\[\\"n])*)"')


def _invoke(url: str, tmp_path: Path, *extra: str) -> Result:
    argv = ["report", "--kubeconfig", str(write_kubeconfig(tmp_path / "kc", url)), *extra]
    return CliRunner().invoke(main, argv, env={"COLUMNS": "2000", "KUBECONFIG": ""})


def _clean(result: Result, code: int) -> str:
    assert result.exception is None or isinstance(result.exception, SystemExit), (
        f"{type(result.exception).__name__}: {result.exception}"
    )
    assert "Traceback" not in result.output, result.output
    assert result.exit_code == code, result.output
    return result.output


# ------------------------------------------------------------------ --team-label keys

REFUSED_KEYS = {
    "empty": "",
    "huge": "x" * 100_000,
    "huge-prefix": "a" * 100_000 + "/team",
    "newline-inside": "a\nb",
    "newline-after": "team\n",
    "template": "{{ lookup('pipe','id') }}",
    "unicode": "équipe",
    "surrogate": "\ud800",
    "nul": "a/b\x00",
    "rich-markup": "[red]team",
    "trailing-space": f"{LABEL} ",
    "slash-only": "/",
    "empty-name": "a/",
    "empty-prefix": "/a",
    "two-slashes": "a/b/c",
    "prefix-dash": "-a/b",
    "prefix-upper": "A.B/team",
    "prefix-underscore": "a_b/c",
    "prefix-double-dot": "a..b/c",
    "prefix-254": "a" * 254 + "/b",
    "name-64": "a/" + "b" * 64,
    "name-dash-end": "team-",
}
ACCEPTED_KEYS = {
    "one-letter": "x",
    "name-63": "a/" + "b" * 63,
    "dots-dashes": "a.b-c_d",
    "prefixed": "example.com/x.y",
}


@pytest.mark.parametrize("key", REFUSED_KEYS.values(), ids=REFUSED_KEYS.keys())
def test_a_team_label_that_is_no_label_key_is_refused_before_any_request(
    tmp_path: Path, key: str
) -> None:
    with serve(answers()) as (url, seen):
        result = _invoke(url, tmp_path, "--team-label", key)
    out = " ".join(_clean(result, 2).split())
    assert "'--team-label'" in out and "fix:" in out, out
    assert len(result.output) < 2000, "the refusal quotes the value cut short"
    assert seen == []


@pytest.mark.parametrize("key", ACCEPTED_KEYS.values(), ids=ACCEPTED_KEYS.keys())
def test_a_label_key_at_the_limits_is_accepted(tmp_path: Path, key: str) -> None:
    out = tmp_path / "r.json"
    with serve(answers()) as (url, _):
        result = _invoke(url, tmp_path, "--team-label", key, "--json", str(out))
    _clean(result, 0)
    assert json.loads(out.read_text())["teams"]["label"] == key


# ------------------------------------------------------------------ team names

#: Team name -> the name as the report holds it (a lone surrogate cannot be written).
TEAMS = {
    "html": ("<script>alert(1)</script>", "<script>alert(1)</script>"),
    "attribute": ('"><img src=x onerror=alert(1)>', '"><img src=x onerror=alert(1)>'),
    "markdown-pipe": ("a|b|c", "a|b|c"),
    "markdown-code": ("`x` **y** [l](http://e)", "`x` **y** [l](http://e)"),
    "rich-markup": ("[red]x[/red][link=http://e]y[/link]", "[red]x[/red][link=http://e]y[/link]"),
    "rich-close": ("[/]", "[/]"),
    "newline": ("x\ny", "x\ny"),
    "quote-backslash": ('q"b\\', 'q"b\\'),
    "backslash-n": ("a\\nb", "a\\nb"),
    "trailing-backslash": ("\\", "\\"),
    "crlf": ("a\r\nb", "a\r\nb"),
    "terminal-escape": ("\x1b[2J\x1b]0;pwned\x07t", "\x1b[2J\x1b]0;pwned\x07t"),
    "nul": ("a\x00b", "a\x00b"),
    "lone-surrogate": ("x\ud800y", "x\ufffdy"),
    "line-separator": ("a\u2028b", "a\u2028b"),
    "unicode": ("équipe 🚀", "équipe 🚀"),
    "template": ("{{ lookup('pipe','id') }}", "{{ lookup('pipe','id') }}"),
    "huge": ("t" * 100_000, "t" * 100_000),
}


def _cluster(team: Any) -> dict[str, Any]:
    """The fleet of tests/unit/report/test_teams.py with ``team`` the team of ml-train."""
    paths = answers(
        nodes=listing(tt.NODES),
        pods=listing(tt.PODS),
        resourceslices=listing(tt.SLICES),
        resourceclaims=listing(tt.CLAIMS),
    )
    namespaces = copy.deepcopy(tt.NAMESPACES)
    namespaces[0]["metadata"]["labels"][LABEL] = team
    paths["/api/v1/namespaces"] = listing(namespaces)
    return paths


def _outputs(tmp_path: Path) -> list[str]:
    return [
        *("--json", str(tmp_path / "r.json"), "--markdown", str(tmp_path / "r.md")),
        *("--html", str(tmp_path / "r.html"), "--metrics", str(tmp_path / "r.prom")),
    ]


def _read(path: Path) -> str:
    """The text of ``path`` as written (``read_text`` would turn ``\\r\\n`` into ``\\n``)."""
    return path.read_bytes().decode("utf-8")


def _samples(text: str) -> list[dict[str, str]]:
    """The label values of each sample, each line checked against the exposition format."""
    out = []
    for line in text.split("\n"):
        if not line or line.startswith("# "):
            continue
        assert SAMPLE.fullmatch(line), repr(line[:300])
        labels = {}
        for key, value in LABEL_VALUE.findall(line):
            labels[key] = re.sub(r"\\(.)", lambda m: "\n" if m[1] == "n" else m[1], value)
        out.append(labels)
    return out


def _md_cells(line: str) -> list[str]:
    return re.split(r"(?<!\\)\|", line.strip())[1:-1]


@pytest.mark.parametrize("case", TEAMS)
def test_a_hostile_team_name_is_text_in_every_output(tmp_path: Path, case: str) -> None:
    team, held = TEAMS[case]
    with serve(_cluster(team)) as (url, _):
        result = _invoke(url, tmp_path, *_outputs(tmp_path))
    out = _clean(result, 0)
    # JSON: the name as it is
    doc = json.loads(_read(tmp_path / "r.json"))
    assert held in [row["team"] for row in doc["teams"]["teams"]]
    # HTML: escaped, one cell, control characters written as their escapes
    page = _read(tmp_path / "r.html")
    assert f'<td class="t">{html.escape(printable(held), quote=True)}</td>' in page
    assert not re.search(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]", page)
    assert "<script>" not in page and "<img" not in page
    # Markdown: every row of the team table has its 8 cells, the name on one line
    md = _read(tmp_path / "r.md").split("\n")
    start = md.index("| team | allocated | allocated GiB | idle | idle GiB | leaked | leaked GiB |")
    rows = md[start + 2 : md.index("", start)]
    assert len(rows) == 3 and all(len(_md_cells(r)) == 7 for r in rows), rows
    assert "<script>" not in "\n".join(md)
    # metrics: one sample per line, the name read back as it is
    samples = _samples(_read(tmp_path / "r.prom"))
    assert held in {s.get("team") for s in samples}
    assert {"namespace": "ml-train", "team": held} in samples
    # terminal: no control character, markup shown as text
    assert not re.search(r"[\x00-\x08\x0b-\x1f\x7f]", out), repr(out[-500:])
    if "[" in held and held.isprintable():
        assert held in out
    if case == "terminal-escape":
        assert "\\x1b[2J\\x1b]0;pwned\\x07t" in out


def test_a_team_name_that_is_no_string_counts_as_no_team(tmp_path: Path) -> None:
    with serve(_cluster({"a": ["b"]})) as (url, _):
        result = _invoke(url, tmp_path, *_outputs(tmp_path))
    _clean(result, 0)
    doc = json.loads(_read(tmp_path / "r.json"))
    assert {row["team"] for row in doc["teams"]["teams"]} == {"vision", "(no team)"}


# ------------------------------------------------------------------ many namespaces

MANY = 10_000


def _many() -> dict[str, Any]:
    """One node of ``MANY`` GPUs, each allocated to the claim of its own namespace, each
    namespace its own team (its name quoted, backslashed, with a pipe and markup)."""
    devices = [device(f"gpu-{i}", "NVIDIA H200", "141Gi") for i in range(MANY)]
    claims = []
    for i in range(MANY):
        c = claim(f"c{i}", allocated=[("a", f"gpu-{i}")], reserved=["gone"])
        c["metadata"]["namespace"] = f"ns-{i}"
        claims.append(c)
    namespaces = [
        {"metadata": {"name": f"ns-{i}", "labels": {LABEL: f'[b]t"{i}|\\'}}} for i in range(MANY)
    ]
    paths = answers(
        nodes=listing([node("a", "NVIDIA-H200")]),
        resourceslices=listing([rslice("a", devices)]),
        resourceclaims=listing(claims),
    )
    paths["/api/v1/namespaces"] = listing(namespaces)
    return paths


def test_ten_thousand_namespaces_each_a_team_are_reported_at_once(tmp_path: Path) -> None:
    paths = _many()
    with serve(paths) as (url, _):
        start = time.monotonic()
        result = _invoke(url, tmp_path, *_outputs(tmp_path))
        took = time.monotonic() - start
    out = _clean(result, 0)
    assert took < 60, took
    doc = json.loads(_read(tmp_path / "r.json"))
    assert len(doc["teams"]["teams"]) == len(doc["teams"]["namespaces"]) == MANY
    samples = _samples(_read(tmp_path / "r.prom"))
    assert len({s["team"] for s in samples if "team" in s}) == MANY
    assert '[b]t"0|\\' in {s.get("team") for s in samples}
    # the terminal table shows the first teams, the markup of their names as text
    assert sum(1 for line in out.splitlines() if line.startswith("│ [b]t")) == 15
