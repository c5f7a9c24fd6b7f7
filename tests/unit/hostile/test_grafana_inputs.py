"""Hostile values of the monitoring role's Grafana variables: the two directories
(``monitoring_grafana_dashboards_dir``, ``monitoring_grafana_provisioning_dir``) must be
absolute paths on one line (or empty), the folder (``monitoring_grafana_folder``) one line
of text; preflight and the role's entry check refuse anything else (``config_values``),
naming the variable. A folder name that passes is written into the provider
(roles/monitoring/templates/gpufleet-grafana-dashboards.yaml.j2) as a JSON string, read
back by a YAML parser as the same text, whatever YAML-breaking characters or template it
holds (given with ``-e``, as gpufleet passes extra variables: data). A provisioning
directory left empty (``null``) writes no provider, as ``''`` does, instead of failing the
play."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from ansible.parsing.dataloader import DataLoader
from ansible.template import Templar
from ansible_collections.gpufleet.cluster.plugins.module_utils.preflight import (
    config_values as cv,
)

from gpufleet import runner
from tests.unit.ansible_vars import load_extra_vars, pipe_template, trust_as_template

pytestmark = pytest.mark.unit

ROLE = Path(__file__).resolve().parents[3] / "roles" / "monitoring"
TEMPLATE = (ROLE / "templates" / "gpufleet-grafana-dashboards.yaml.j2").read_text()
DIRS = ("monitoring_grafana_dashboards_dir", "monitoring_grafana_provisioning_dir")
FOLDER = "monitoring_grafana_folder"

REFUSED_DIRS: dict[str, Any] = {
    "relative": "grafana/dashboards",
    "dot-relative": "./dashboards",
    "dot-dot-relative": "../etc/grafana",
    "home": "~/dashboards",
    "leading-space": " /etc/grafana",
    "newline-yaml": "/etc/grafana\n      foldersFromFilesStructure: true",
    "trailing-newline": "/etc/grafana/\n",
    "carriage-return": "/etc/grafana\r/x",
    "nul": "/etc/grafana\x00",
    "line-separator": "/etc/grafana\u2028x",
    "next-line": "/etc/grafana\x85x",
    "tab": "/etc/\tgrafana",
    "list": ["/etc/grafana"],
    "mapping": {"path": "/etc/grafana"},
    "number": 5,
    "template-relative": "{{ lookup('pipe','id') }}",
}
ACCEPTED_DIRS: dict[str, Any] = {
    "empty": "",
    "absolute": "/etc/grafana/provisioning/dashboards",
    "dot-dot-inside": "/etc/grafana/../grafana/dashboards",
    "space-inside": "/srv/grafana dashboards",
    "root": "/",
    "trailing-slash": "/etc/grafana/",
    "unicode": "/srv/графана",
}
REFUSED_FOLDERS: dict[str, str] = {
    "newline-yaml": "GPU fleet\n    type: file\n    options: {path: /etc}",
    "trailing-newline": "GPU fleet\n",
    "carriage-return": "GPU\rfleet",
    "nul": "GPU\x00fleet",
    "tab": "GPU\tfleet",
    "escape": "\x1b[2JGPU",
    "del": "GPU\x7f",
    "line-separator": "GPU\u2028fleet",
    "paragraph-separator": "GPU\u2029fleet",
    "next-line": "GPU\x85fleet",
}
ACCEPTED_FOLDERS: dict[str, str] = {
    "mapping-colon": "a: b",
    "sequence-dash": "- x",
    "comment": "#x",
    "flow-mapping": "{x: 1}",
    "flow-sequence": "[x, y]",
    "single-quote": "it's",
    "double-quote": 'say "hi"',
    "backslash": "C:\\grafana\\",
    "anchor-alias-tag": "&a *a !tag |> %",
    "document-markers": "--- ...",
    "template": "{{ lookup('pipe','id') }}",
    "jinja-block": "{% raw %}x{% endraw %}",
    "empty": "",
    "yaml-null": "null",
    "yaml-tilde": "~",
    "yaml-bool": "yes",
    "yaml-number": "0x1F",
    "unicode": "GPU ⚡ 日本",
    "no-break-space": "GPU\u00a0fleet",
    "byte-order-mark": "\ufeffGPU",
    "huge": "f" * 100_000,
}


@pytest.mark.parametrize("name", DIRS)
@pytest.mark.parametrize("value", REFUSED_DIRS.values(), ids=REFUSED_DIRS.keys())
def test_a_hostile_grafana_directory_is_refused(name: str, value: Any) -> None:
    (problem,) = cv.check_values({name: value})
    assert problem.startswith(f"{name}=") and "fix: write" in problem, problem
    assert "the Grafana dashboard provider" in problem and len(problem) < 600


@pytest.mark.parametrize("name", DIRS)
@pytest.mark.parametrize("value", ACCEPTED_DIRS.values(), ids=ACCEPTED_DIRS.keys())
def test_an_absolute_grafana_directory_is_accepted(name: str, value: Any) -> None:
    assert cv.check_values({name: value}) == []


@pytest.mark.parametrize("value", REFUSED_FOLDERS.values(), ids=REFUSED_FOLDERS.keys())
def test_a_folder_name_of_more_than_one_line_is_refused(value: str) -> None:
    (problem,) = cv.check_values({FOLDER: value})
    assert problem.startswith(f"{FOLDER}=") and "control character" in problem, problem
    assert "fix: write monitoring_grafana_folder as the text on one line" in problem


def _provider(tmp_path: Path, folder: str) -> dict[str, Any]:
    """The provider the role renders, with the folder given as ``-e`` (data) would be."""
    variables = {FOLDER: folder, "monitoring__dashboards_dir": "/srv/dashboards"}
    loaded = load_extra_vars(runner.write_extravars(tmp_path, variables))
    text = Templar(loader=DataLoader(), variables=loaded).template(trust_as_template(TEMPLATE))
    (provider,) = yaml.safe_load(text)["providers"]
    return provider


@pytest.mark.parametrize("value", ACCEPTED_FOLDERS.values(), ids=ACCEPTED_FOLDERS.keys())
def test_a_folder_name_is_written_as_its_text(tmp_path: Path, value: str) -> None:
    assert cv.check_values({FOLDER: value}) == []
    provider = _provider(tmp_path, value)
    assert provider["folder"] == value
    assert provider["options"] == {
        "path": "/srv/dashboards",
        "foldersFromFilesStructure": False,
    }
    assert provider["type"] == "file" and provider["name"] == "gpufleet"


def test_a_null_folder_is_the_general_folder_not_the_text_none(tmp_path: Path) -> None:
    assert cv.check_values({FOLDER: None}) == []
    assert _provider(tmp_path, None)["folder"] == ""  # type: ignore[arg-type]


def test_a_template_in_the_folder_name_is_never_run(tmp_path: Path) -> None:
    marker = tmp_path / "pwned"
    assert _provider(tmp_path, pipe_template(marker))["folder"] == pipe_template(marker)
    assert not marker.exists()


def _provider_task() -> dict[str, Any]:
    tasks = yaml.safe_load((ROLE / "tasks" / "main.yml").read_text(encoding="utf-8"))
    block = next(t for t in tasks if t["name"] == "Monitoring | Grafana dashboard")["block"]
    return next(
        t for t in block if t["name"] == "Monitoring | Render the Grafana dashboard provider"
    )


@pytest.mark.parametrize(
    ("value", "written"),
    [(None, False), ("", False), ("/etc/grafana/provisioning/dashboards", True)],
    ids=["null", "empty", "set"],
)
def test_a_provisioning_directory_left_empty_writes_no_provider(
    value: str | None, written: bool
) -> None:
    when = _provider_task()["when"]
    templar = Templar(loader=DataLoader(), variables={DIRS[1]: value})
    assert str(templar.template(trust_as_template("{{ " + when + " }}"))) == str(written)
