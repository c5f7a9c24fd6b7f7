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


@pytest.mark.parametrize(
    ("args", "option", "fragment"),
    [
        (("--gpu-model", "H300", "--layout", "{}"), "--gpu-model", "'H300'"),
        (("--gpu-model", "h200", "--layout", '{"1g.18gb: 7}'), "--layout", "not valid JSON"),
        (("--gpu-model", "h200", "--layout", '{"1g.10gb": 7}'), "--layout", "1g.18gb (ID 19)"),
        (("--gpu-model", "h200"), "--layout", "Missing option '--layout'"),
        (("--gpu-model", "h200", "--layout", "{}", "--gpus", "0"), "--gpus", "0"),
    ],
)
def test_json_bad_input_is_a_json_document(args, option, fragment) -> None:
    result = run(*args, "--json")
    assert result.exit_code == 2, result.output
    doc = json.loads(result.stdout)
    assert doc["fits"] is False and doc["exit_code"] == 2
    assert doc["error"]["kind"] == "bad-input" and doc["error"]["option"] == option
    assert fragment in doc["error"]["message"], doc
    assert fragment in result.stderr


def test_json_of_a_fit_and_a_refusal_carry_the_exit_code() -> None:
    ok = run("--gpu-model", "h200", "--layout", '{"1g.18gb": 7}', "--json")
    assert ok.exit_code == 0 and json.loads(ok.stdout)["exit_code"] == 0
    bad = run("--gpu-model", "a100-40gb", "--layout", '{"1g.5gb": 8}', "--json")
    assert bad.exit_code == 1
    doc = json.loads(bad.stdout)
    assert doc["exit_code"] == 1
    assert doc["gpus"][0]["error"]["causes"] == ["instance-limit", "engine-budget"]


def test_zero_count_of_a_profile_the_gpu_lacks_exits_2() -> None:
    result = run("--gpu-model", "h200", "--layout", '{"1g.18gb": 7, "1g.5gb": 0}')
    assert result.exit_code == 2, result.output
    assert "'1g.5gb' does not exist on NVIDIA H200" in result.stderr


def test_zero_count_in_a_config_file_exits_2(tmp_path: Path) -> None:
    path = tmp_path / "mig.yaml"
    path.write_text(
        "version: v1\nmig-configs:\n  c:\n    - devices: all\n      mig-enabled: true\n"
        '      mig-devices: {"1g.18gb": 7, "1g.10gb": 0}\n'
    )
    result = run("--gpu-model", "h200", "--layout", f"@{path}")
    assert result.exit_code == 2, result.output
    assert "'1g.10gb' does not exist on NVIDIA H200" in result.stderr


UNMATCHED = """\
version: v1
mig-configs:
  first-two:
    - devices: [0, 1]
      mig-enabled: true
      mig-devices: {"3g.71gb": 2}
    - device-filter: "0x20B010DE"
      devices: [2, 3]
      mig-enabled: true
      mig-devices: {"1g.5gb": 7}
"""


def test_gpus_no_entry_matches_are_reported(tmp_path: Path) -> None:
    path = tmp_path / "mig.yaml"
    path.write_text(UNMATCHED)
    args = ("--gpu-model", "h200", "--layout", f"@{path}", "--gpus", "5")
    doc = json.loads(run(*args, "--json").stdout)
    assert [g["index"] for g in doc["gpus"]] == [0, 1]
    assert [u["index"] for u in doc["unmatched"]] == [2, 3, 4]
    why = doc["unmatched"][0]["reason"]
    assert "no entry of first-two applies to GPU 2 (NVIDIA H200, PCI device ID 0x233510DE)" in why
    assert "[0] lists devices [0, 1]" in why and "[1] has device-filter 0x20B010DE" in why
    assert "[1] lists devices [2, 3]" in doc["unmatched"][2]["reason"]
    text = run(*args)
    assert text.exit_code == 0, text.output
    assert "GPU 4: no entry of first-two applies to GPU 4" in text.stdout


DATA = Path(__file__).resolve().parents[1] / "data" / "gpu"
H200_LGIP = str(DATA / "h200-single/smi-mig-lgip.txt")
H200_LGIPP = str(DATA / "h200-single/smi-mig-lgipp.txt")
A30_LGIP = str(DATA / "public/a30-24gb/lgip-all-used.txt")
A30_LGIPP = str(DATA / "public/a30-24gb/lgipp.txt")


def test_plan_from_the_node_capture_equals_the_builtin_plan() -> None:
    layout = '{"3g.71gb": 1, "2g.35gb": 2}'
    node = run("--lgip", H200_LGIP, "--lgipp", H200_LGIPP, "--layout", layout, "--json")
    builtin = run("--gpu-model", "h200", "--layout", layout, "--json")
    assert node.exit_code == builtin.exit_code == 0, node.output
    node_doc, builtin_doc = json.loads(node.stdout), json.loads(builtin.stdout)
    assert node_doc["gpus"][0]["placements"] == builtin_doc["gpus"][0]["placements"]
    assert "nvidia-smi mig -lgip (GPU 0) and -lgipp" in node_doc["model_source"]


def test_a_gpu_the_tables_lack_is_planned_from_its_own_answer() -> None:
    args = ("--gpu-model", "NVIDIA Future GPU", "--lgip", A30_LGIP, "--lgipp", A30_LGIPP)
    ok = run(*args, "--layout", '{"2g.12gb": 1, "1g.6gb": 2}', "--json")
    assert ok.exit_code == 0, ok.output
    doc = json.loads(ok.stdout)
    assert doc["gpu_model"] == "NVIDIA Future GPU" and doc["total_slices"] == 4
    assert [(p["profile"], p["start"]) for p in doc["gpus"][0]["placements"]] == [
        ("2g.12gb", 0), ("1g.6gb", 2), ("1g.6gb", 3)
    ]  # fmt: skip
    bad = run(*args, "--layout", '{"2g.12gb": 2, "1g.6gb": 1}')
    assert bad.exit_code == 1
    assert "does not fit on NVIDIA Future GPU" in bad.stderr
    # without the capture the name alone is refused, naming the way out
    alone = run("--gpu-model", "NVIDIA Future GPU", "--layout", "{}")
    assert alone.exit_code == 2 and "--lgip FILE --lgipp FILE" in alone.stderr


@pytest.mark.parametrize(
    ("args", "option", "fragment"),
    [
        (("--lgip", A30_LGIP), "--lgipp", "pass the output of 'nvidia-smi mig -lgipp'"),
        (("--lgip", "/nonexistent/lgip.txt"), "--lgip", "no such file"),
        (("--lgipp", A30_LGIPP), "--lgipp", "pass the profiles too with --lgip"),
        ((), "--gpu-model", "give --gpu-model NAME"),
    ],
)
def test_capture_input_errors_exit_2(args, option, fragment) -> None:
    result = run(*args, "--layout", "{}", "--json")
    assert result.exit_code == 2, result.output
    err = json.loads(result.stdout)["error"]
    assert err["option"] == option and fragment in err["message"], err


def test_derived_facts_are_shown_with_the_plan() -> None:
    result = run("--gpu-model", "b200", "--layout", '{"3g.90gb": 2}', "--json")
    assert result.exit_code == 0, result.output
    derived = json.loads(result.stdout)["gpus"][0]["derived"]
    assert derived == {"3g.90gb": ["id", "gib", "sm", "engines", "placements"]}


def test_models_lists_every_table_with_its_source() -> None:
    result = CliRunner().invoke(main, ["mig", "models", "--json"])
    assert result.exit_code == 0, result.output
    doc = {m["name"]: m for m in json.loads(result.stdout)}
    b200 = doc["NVIDIA B200"]
    assert b200["pci_device_ids"] == ["0x290110DE"] and "NVIDIA/mig-parted#166" in b200["source"]
    assert [p["placements"] for p in b200["profiles"] if p["name"] == "3g.90gb"] == [[0, 4]]
    b300 = doc["NVIDIA B300"]
    assert b300["pci_device_ids"] == ["0x318210DE"] and "mig-parted" in b300["source"]
    assert [p["name"] for p in b300["profiles"]][:2] == ["1g.34gb", "1g.34gb+me"]
    text = CliRunner().invoke(main, ["mig", "models"])
    assert "NVIDIA H800 NVL  layout h100-94gb" in text.stdout
    assert "1g.34gb          ID  19  x7  {0,1,2,3,4,5,6}:1  derived: id, gib, sm" in text.stdout
