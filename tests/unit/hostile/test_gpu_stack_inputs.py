"""Hostile input to ``gpufleet upgrade-gpu-stack --plan``: malformed releases (empty, digits
other than ASCII, trailing text, a NUL, a second line, shell metacharacters, Jinja), batch
sizes and GPU floors out of range, node names holding markup or escape sequences, and Jinja
in every option and ``-e`` value.

The planner (``upgrade.gpu_stack``) and its filter must refuse each with the variable or
option, the value as given and a fix that exists; the CLI exits 2 with the refusal on
stderr, prints no traceback, and no template in an option or ``-e`` value is ever run on
the way to the filter (the extra-vars file as ansible-playbook templates it)."""

from __future__ import annotations

import io
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from ansible.errors import AnsibleFilterError
from ansible_collections.gpufleet.cluster.plugins.filter.gpu_stack import gpu_stack_plan
from ansible_collections.gpufleet.cluster.plugins.module_utils.nvidia import containerd as nvc
from ansible_collections.gpufleet.cluster.plugins.module_utils.upgrade import gpu_stack as gs
from click.testing import CliRunner, Result
from rich.console import Console

from gpufleet import runner
from gpufleet.cli import main
from gpufleet.render.gpu_stack_plan import render
from tests.unit.ansible_vars import as_ansible_sees_it, pipe_template

pytestmark = pytest.mark.unit

STATE = {
    "kubernetes_version": "1.36.3",
    "chart": "nvidia-dra-driver-gpu-25.12.0",
    "nodes": [
        {"host": "w-1", "name": "gpu-1", "driver": "570.172.08", "toolkit": "1.18.0",
         "architectures": ["Hopper"], "gpu_devices": 8},
        {"host": "w-2", "name": "gpu-2", "driver": "580.159.04", "toolkit": "1.20.2",
         "architectures": ["Hopper"], "gpu_devices": 8},
    ],
}  # fmt: skip
TARGETS = {"driver": "580.159.04", "toolkit": "1.20.2", "chart": "0.4.0"}
JINJA = "{{ lookup('pipe', 'id') }}"


def planned(**over: Any) -> dict[str, Any]:
    """The plan's dict of STATE to TARGETS with ``over`` (``targets`` merged)."""
    targets = {**TARGETS, **over.pop("targets", {})}
    return gs.plan_from_inputs({"state": STATE, "targets": targets, **over})


def only_refusal(plan: dict[str, Any]) -> dict[str, Any]:
    (refusal,) = plan["refused"]
    return refusal


#: A target driver release that is none, as written -> why (the case's id).
BAD_DRIVERS = {
    "empty": "",
    "fullwidth-digits": "\uff15\uff18\uff10.159.04",
    "arabic-indic-digits": "\u0665\u0668\u0660.159.04",
    "trailing-letter": "580.159.04x",
    "hex-like": "580.0x",
    "huge": "9" * 40 + ".1.1",
    "negative": "-580.159.04",
    "leading-v": "v580.159.04",
    "leading-zero": "0580.159.04",
    "empty-part": "580..1",
    "nul": "580.159.04\x00",
    "second-line": "580.159.04\nrm -rf /",
    "semicolon": "580.159.04;id",
    "command-substitution": "$(id)",
    "jinja": JINJA,
    "a-toolkit-release": "1.20.2",
    "a-mapping-as-text": "{'a': 1}",
    "markup": "[/bold]",
}


@pytest.mark.parametrize("value", BAD_DRIVERS.values(), ids=BAD_DRIVERS.keys())
def test_a_driver_that_is_no_release_is_refused_naming_the_driver(value: str) -> None:
    # the branch follows the driver (as --driver sets it): the driver is named, not the branch
    plan = planned(targets={"driver": value}, input_names={"driver": "--driver"})
    r = only_refusal(plan)
    assert (r["variable"], r["value"]) == ("--driver", value.strip())
    assert r["reason"] == "not an NVIDIA driver release"
    assert "for example 580.159.04" in r["fix"] and r["source"] == gs.SOURCE_RELEASES


#: A branch as written -> the case's id; each with a driver that is a release.
BAD_BRANCHES = {
    "spaces": "5 80",
    "jinja": JINJA,
    "a-release": "580.159.04",
    "fullwidth": "\uff15\uff18\uff10",
    "quote": "58'0",
}


@pytest.mark.parametrize("value", BAD_BRANCHES.values(), ids=BAD_BRANCHES.keys())
def test_a_branch_that_is_none_is_refused_with_its_reason_alone(value: str) -> None:
    r = only_refusal(planned(targets={"branch": value}))
    assert (r["variable"], r["value"], r["reason"]) == (
        "nvidia_driver_branch",
        value,
        "not a driver branch",
    )
    assert r["message"] == (
        f"nvidia_driver_branch={value}: not a driver branch (source: {gs.SOURCE_RELEASES}); "
        "fix: give the three-digit branch, for example 580"
    )


BAD_TOOLKITS = {
    "empty": "",
    "trailing-letter": "1.20.2x",
    "semicolon": "1.20.2;id",
    "second-line": "1.20.2\n1.17.0",
    "nul": "1.20.2\x00",
    "fullwidth-digits": "\uff11.\uff12\uff10.\uff12",
    "jinja": JINJA,
    "command-substitution": "$(id)",
    "space-inside": "1.20.2 1.17.0",
}


@pytest.mark.parametrize("value", BAD_TOOLKITS.values(), ids=BAD_TOOLKITS.keys())
def test_a_toolkit_that_is_no_release_is_refused(value: str) -> None:
    r = only_refusal(planned(targets={"toolkit": value}))
    assert (r["variable"], r["value"]) == ("nvidia_container_toolkit_version", value.strip())
    assert r["fix"] == "give the release as MAJOR.MINOR.PATCH, as NVIDIA numbers it"
    with pytest.raises(nvc.ConfigError):  # the role's check (nvidia_toolkit_check) refuses it too
        nvc.parse_toolkit_version(value)


@pytest.mark.parametrize("value", ["1.20.2", "v1.20.2", "1.17.8-1", "1.18.0~rc.1"])
def test_a_toolkit_release_as_packaged_is_accepted(value: str) -> None:
    assert planned(targets={"toolkit": value})["refused"] == []


BAD_CHARTS = {
    "empty": "",
    "fullwidth-digits": "\uff10.\uff14.\uff10",
    "semicolon": "0.4.0;id",
    "second-line": "0.4.0\n0.5.0",
    "jinja": JINJA,
    "nul": "0.4.0\x00",
}


@pytest.mark.parametrize("value", BAD_CHARTS.values(), ids=BAD_CHARTS.keys())
def test_a_chart_that_is_no_release_is_refused(value: str) -> None:
    r = only_refusal(planned(targets={"chart": value}))
    assert (r["variable"], r["value"]) == ("dra_driver_chart_version", value.strip())
    assert "0.4.0" in r["fix"]


def test_spaces_around_a_release_do_not_make_a_node_change() -> None:
    plan = planned(targets={"driver": " 580.159.04\n", "toolkit": "1.20.2 ", "chart": " 0.4.0"})
    assert plan["refused"] == []
    assert plan["target"]["driver"] == "580.159.04" and plan["target"]["toolkit"] == "1.20.2"
    w2 = next(n for n in plan["nodes"] if n["host"] == "w-2")
    assert w2["changes"] is False and w2["wave"] == -1


#: (input, value) -> the case's id: each refused by the filter with the variable named.
BAD_NUMBERS = {
    "batch-zero": ("batch_size", "0"),
    "batch-zero-int": ("batch_size", 0),
    "batch-over-100%": ("batch_size", "101%"),
    "batch-negative%": ("batch_size", "-5%"),
    "batch-exponent": ("batch_size", "1e3"),
    "batch-nan%": ("batch_size", "nan%"),
    "batch-empty": ("batch_size", ""),
    "batch-bool": ("batch_size", True),
    "batch-jinja": ("batch_size", JINJA),
    "floor-over-100%": ("min_gpu_available_percent", "101%"),
    "floor-negative%": ("min_gpu_available_percent", "-5%"),
    "floor-exponent": ("min_gpu_available_percent", "1e3"),
    "floor-nan": ("min_gpu_available_percent", "nan"),
    "floor-inf": ("min_gpu_available_percent", "inf"),
    "floor-jinja": ("min_gpu_available_percent", JINJA),
}


@pytest.mark.parametrize(("key", "value"), BAD_NUMBERS.values(), ids=BAD_NUMBERS.keys())
def test_a_batch_size_or_floor_out_of_range_is_refused_naming_the_option(
    key: str, value: Any
) -> None:
    option = {
        "batch_size": "--batch-size",
        "min_gpu_available_percent": "--min-gpu-available-percent",
    }[key]
    inputs = {"state": STATE, "targets": TARGETS, key: value, "input_names": {key: option}}
    with pytest.raises(AnsibleFilterError) as caught:
        gpu_stack_plan(inputs)
    text = str(caught.value)
    assert text.startswith(f"{option}={value!r} ") and " Fix: give " in text, text


#: Node names an inventory or a cluster may hold -> the case's id.
NODE_NAMES = {
    "markup-close": "[/]",
    "markup-style": "[bold red]w[/bold red]",
    "osc52-clipboard": "w\x1b]52;c;aWQ=\x07",
    "jinja": JINJA,
    "html": "</script><script>alert(1)</script>",
    "long": "n" * 10_000,
}


@pytest.mark.parametrize("name", NODE_NAMES.values(), ids=NODE_NAMES.keys())
def test_a_node_name_is_data_in_the_plan_and_shows_as_it_is(name: str) -> None:
    state = {**STATE, "nodes": [{**STATE["nodes"][0], "host": name, "name": name}]}
    plan = gs.plan_from_inputs({"state": state, "targets": {**TARGETS, "driver": "[/x]"}})
    assert plan["nodes"][0]["host"] == name
    out = io.StringIO()
    render(plan, Console(file=out, width=20_200, color_system=None))
    text = out.getvalue()
    assert "\x1b" not in text and "[/x]" in text  # the refused value as given
    assert (name if "\x1b" not in name else "w\\x1b]52;c;aWQ=\\x07") in text


# ------------------------------------------------------------------ through the CLI


@pytest.fixture
def playbook(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> SimpleNamespace:
    """In place of ansible-runner: the extra-vars file is written as the runner writes it,
    loaded and templated as ansible-playbook does, and the targets taken from it as the
    planning playbook takes them are planned by the filter; its refusal fails the task."""
    seen = SimpleNamespace(variables=None)
    defaults = {
        "nvidia_driver_version": "580.159.04", "nvidia_driver_branch": "",
        "nvidia_container_toolkit_version": "1.20.2", "dra_driver_chart_version": "0.4.0",
        "upgrade_batch_size": 1, "upgrade_min_gpu_available_percent": 0,
    }  # fmt: skip

    def run_playbook(name: str, inventory: list[str], **kw: Any) -> SimpleNamespace:
        path = runner.write_extravars(tmp_path / "private", kw["extravars"])
        v = seen.variables = {**defaults, **as_ansible_sees_it(path)}
        inputs = {
            "state": STATE,
            "targets": {
                "driver": v["nvidia_driver_version"], "branch": v["nvidia_driver_branch"],
                "toolkit": v["nvidia_container_toolkit_version"],
                "chart": v["dra_driver_chart_version"],
            },
            "batch_size": v["upgrade_batch_size"],
            "min_gpu_available_percent": v["upgrade_min_gpu_available_percent"],
            "input_names": v.get("gpu_stack_input_names") or {},
        }  # fmt: skip
        try:
            res = {"ansible_facts": {"gpu_stack_plan": gpu_stack_plan(inputs)}}
            kind = "runner_on_ok"
        except AnsibleFilterError as err:
            res, kind = {"msg": str(err)}, "runner_on_failed"
        kw["on_event"]({"event": kind, "event_data": {
            "host": "localhost", "task": "GPU stack | Plan", "res": res}})  # fmt: skip
        return SimpleNamespace(status=0 if kind == "runner_on_ok" else 2)

    monkeypatch.setattr(runner, "run_playbook", run_playbook)
    return seen


def cli(*args: str) -> Result:
    return CliRunner().invoke(
        main, ["upgrade-gpu-stack", "-i", "hosts.yml", "--plan", *args], env={"COLUMNS": "300"}
    )


def assert_exit_2(result: Result, *named: str) -> str:
    out = result.output
    assert result.exit_code == 2, out
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(
        result.exception
    )
    assert "Traceback" not in out and "\x1b" not in out, out
    assert all(n in out for n in named), out
    return out


#: Option -> a hostile value; each must reach the plan as data and be refused naming it.
OPTION_CASES = {
    "driver-jinja": ("--driver", "{JINJA}"),
    "toolkit-jinja": ("--toolkit", "{JINJA}"),
    "chart-jinja": ("--dra-driver-chart", "{JINJA}"),
    "batch-jinja": ("--batch-size", "{JINJA}"),
    "floor-jinja": ("--min-gpu-available-percent", "{JINJA}"),
    "driver-markup": ("--driver", "[/bold]"),
    "driver-escape": ("--driver", "580.159.04\x1b]0;owned\x07"),
    "driver-fullwidth": ("--driver", "\uff15\uff18\uff10.159.04"),
    "driver-empty": ("--driver", ""),
    "batch-zero": ("--batch-size", "0"),
    "batch-101%": ("--batch-size", "101%"),
    "floor-minus-5%": ("--min-gpu-available-percent", "-5%"),
    "floor-1e3": ("--min-gpu-available-percent", "1e3"),
}


@pytest.mark.parametrize(("option", "value"), OPTION_CASES.values(), ids=OPTION_CASES.keys())
def test_a_hostile_option_is_refused_as_data_never_run(
    playbook: SimpleNamespace, tmp_path: Path, option: str, value: str
) -> None:
    marker = tmp_path / "ran"
    value = value.replace("{JINJA}", pipe_template(marker))
    assert_exit_2(cli(option, value), option)
    assert not marker.exists(), "a template in an option was run"
    variable = {"--batch-size": "upgrade_batch_size"}.get(option)
    if variable:
        assert playbook.variables[variable] == value  # the value as given, not templated


def test_a_template_in_an_extra_variable_is_never_run(
    playbook: SimpleNamespace, tmp_path: Path
) -> None:
    marker = tmp_path / "ran"
    jinja = pipe_template(marker)
    result = cli(
        "-e", f"nvidia_driver_version={jinja}", "-e", f"dra_driver_chart_version={jinja}",
        "-e", f"upgrade_min_gpu_available_percent={jinja}",
    )  # fmt: skip
    assert_exit_2(result, "upgrade_min_gpu_available_percent=")
    assert not marker.exists(), "a template in -e was run"
    assert playbook.variables["nvidia_driver_version"] == jinja
