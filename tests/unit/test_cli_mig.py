"""``gpufleet mig plan``: exit codes, the placement table, JSON and input errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from gpufleet.cli import main

pytestmark = pytest.mark.unit


def run(*args: str):
    return CliRunner().invoke(main, ["mig", "plan", *args])


def test_mig_is_registered() -> None:
    result = CliRunner().invoke(main, ["mig", "--help"])
    assert result.exit_code == 0
    assert "plan" in result.stdout


def test_seven_1g_on_h200_table() -> None:
    result = run("--gpu-model", "NVIDIA H200", "--layout", '{"1g.18gb": 7}')
    assert result.exit_code == 0, result.stderr
    rows = [line for line in result.stdout.splitlines() if "1g.18gb" in line]
    assert len(rows) == 7
    assert [row.split("│")[4].strip() for row in rows] == [f"{s}:1" for s in range(7)]
    assert "free memory slices: 1 (index 7)" in result.stdout


def test_json_output_of_a_fit() -> None:
    result = run("--gpu-model", "h200", "--layout", '{"4g.71gb": 1, "3g.71gb": 1}', "--json")
    assert result.exit_code == 0, result.stderr
    doc = json.loads(result.stdout)
    assert doc["fits"] is True and doc["gpu_model"] == "NVIDIA H200"
    [gpu] = doc["gpus"]
    assert [(p["profile"], p["profile_id"], p["start"], p["size"]) for p in gpu["placements"]] == [
        ("4g.71gb", 5, 0, 4),
        ("3g.71gb", 9, 4, 4),
    ]


def test_layout_that_does_not_fit_exits_1_with_the_reason() -> None:
    result = run("--gpu-model", "h200", "--layout", '{"4g.71gb": 2}')
    assert result.exit_code == 1
    assert "start 0 (slices 0-3) taken by 4g.71gb at 0:4" in result.stderr
    assert "{4g.71gb: 1, 3g.71gb: 1}" in result.stderr


def test_json_of_a_failure_is_structured() -> None:
    result = run("--gpu-model", "a100-40gb", "--layout", '{"3g.20gb": 2, "1g.5gb": 1}', "--json")
    assert result.exit_code == 1
    err = json.loads(result.stdout)["gpus"][0]["error"]
    assert err["unplaceable"] == {"1g.5gb": 1}
    assert err["slices_requested"] == 9 and err["slices_available"] == 8
    assert err["suggestion"] == {"3g.20gb": 2}


@pytest.mark.parametrize(
    ("args", "fragments"),
    [
        (("--gpu-model", "H300", "--layout", "{}"), ["'--gpu-model'", "'H300'", "NVIDIA H200"]),
        (
            ("--gpu-model", "h200", "--layout", '{"1g.18gb: 7}'),
            ["'--layout'", "not valid JSON", '{"1g.18gb": 7}'],
        ),
        (
            ("--gpu-model", "h200", "--layout", '{"1g.10gb": 7}'),
            ["'--layout'", "'1g.10gb'", "1g.18gb (ID 19)"],
        ),
        (("--gpu-model", "h200", "--layout", '{"1g.18gb": -1}'), ["'--layout'", "integer >= 0"]),
        (("--gpu-model", "h200", "--layout", "[1, 2]"), ["'--layout'", "readable file"]),
        (("--gpu-model", "h200", "--layout", "@/nonexistent.yaml"), ["'--layout'", "@path"]),
        (
            ("--gpu-model", "h200", "--layout", '{"1g.18gb": 7}', "--config-name", "x"),
            ["'--config-name'", "mig-parted config file"],
        ),
    ],
)
def test_bad_input_exits_2_naming_option_value_and_fix(args, fragments) -> None:
    result = run(*args)
    assert result.exit_code == 2, result.output
    for fragment in fragments:
        assert fragment in result.stderr, (fragment, result.stderr)


CONFIG = """\
version: v1
mig-configs:
  balanced:
    - devices: [0]
      mig-enabled: true
      mig-devices: {"1g.18gb": 2, "2g.35gb": 1, "3g.71gb": 1}
    - devices: [1]
      mig-enabled: false
  too-big:
    - devices: all
      mig-enabled: true
      mig-devices: {"3g.71gb": 3}
  a100-only:
    - device-filter: "0x20B010DE"
      devices: all
      mig-enabled: true
      mig-devices: {"1g.5gb": 7}
"""


@pytest.fixture
def config_file(tmp_path: Path) -> Path:
    path = tmp_path / "mig.yaml"
    path.write_text(CONFIG)
    return path


def test_config_file_plan_per_gpu(config_file: Path) -> None:
    result = run(
        "--gpu-model", "h200", "--layout", f"@{config_file}", "--config-name", "balanced", "--json"
    )
    assert result.exit_code == 0, result.stderr
    doc = json.loads(result.stdout)
    assert doc["config_name"] == "balanced"
    gpu0, gpu1 = doc["gpus"]
    assert gpu0["mig_enabled"] is True and len(gpu0["placements"]) == 4
    assert gpu1 == {"index": 1, "mig_enabled": False, "fits": True}


def test_config_file_as_plain_path_and_gpus(config_file: Path) -> None:
    result = run(
        "--gpu-model", "h200", "--layout", str(config_file), "--config-name", "too-big",
        "--gpus", "2",
    )  # fmt: skip
    assert result.exit_code == 1
    assert result.stderr.count("does not fit on NVIDIA H200") == 2


def test_config_entry_for_other_gpus_plans_nothing(config_file: Path) -> None:
    result = run("--gpu-model", "h200", "--layout", f"@{config_file}", "--config-name", "a100-only")
    assert result.exit_code == 0
    assert "no entry of a100-only applies to NVIDIA H200" in result.stdout
    result = run(
        "--gpu-model", "a100-40gb", "--layout", f"@{config_file}", "--config-name", "a100-only"
    )
    assert result.exit_code == 0, result.stderr
    assert result.stdout.count("1g.5gb") == 7


def test_config_file_needs_config_name(config_file: Path) -> None:
    result = run("--gpu-model", "h200", "--layout", f"@{config_file}")
    assert result.exit_code == 2
    assert "'--config-name'" in result.stderr and "balanced, too-big, a100-only" in result.stderr


def test_unknown_config_name(config_file: Path) -> None:
    result = run("--gpu-model", "h200", "--layout", f"@{config_file}", "--config-name", "nope")
    assert result.exit_code == 2
    assert "'--config-name'" in result.stderr and "choose one of" in result.stderr


def test_invalid_config_names_the_key(tmp_path: Path) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text(
        "version: v1\nmig-configs:\n  c:\n    - devices: all\n      mig_enabled: true\n"
    )
    result = run("--gpu-model", "h200", "--layout", f"@{path}")
    assert result.exit_code == 2
    assert "mig-configs.c[0].mig_enabled" in result.stderr and "'mig-enabled'" in result.stderr
