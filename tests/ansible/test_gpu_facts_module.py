"""The module gpu_facts, run for real by ``ansible localhost -m gpufleet.cluster.gpu_facts``
(the collection resolves through the editable install) against the fixture replay of the
two-H200 captures, against the GPU simulator when it is present, and on this host without
any NVIDIA driver."""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.ansible

DATA = Path(__file__).resolve().parents[1] / "unit" / "data" / "gpu"
REPLAY = DATA / "fixture_replay_nvidia_smi.py"
ANSIBLE = Path(sys.executable).parent / "ansible"
MODULE = "gpufleet.cluster.gpu_facts"
DRIVER_DIRS = ["/usr/bin", "/usr/local/bin", "/usr/local/nvidia/bin"]


def adhoc(args: str, *, env: dict[str, str] | None = None, check: bool = False) -> dict[str, Any]:
    """Run the module once on localhost; return its result for localhost."""
    environ = {k: v for k, v in os.environ.items() if k != "ANSIBLE_COLLECTIONS_PATH"}
    environ.update(
        ANSIBLE_LOAD_CALLBACK_PLUGINS="1",
        ANSIBLE_STDOUT_CALLBACK="json",
        ANSIBLE_HOST_KEY_CHECKING="0",
        ANSIBLE_LOCAL_TEMP=str(Path(os.environ.get("TMPDIR", "/tmp")) / "gpufleet-ansible-tmp"),
    )
    environ.update(env or {})
    argv = [
        str(ANSIBLE),
        "localhost",
        "-c",
        "local",
        "-i",
        "localhost,",
        "-e",
        f"ansible_python_interpreter={sys.executable}",
        "-m",
        MODULE,
        "-a",
        args,
    ]
    if check:
        argv.append("--check")
    proc = subprocess.run(argv, capture_output=True, text=True, env=environ, timeout=300)
    try:
        report = json.loads(proc.stdout)
    except json.JSONDecodeError:
        pytest.fail(
            f"ansible printed no JSON (rc {proc.returncode}):\n{proc.stdout}\n{proc.stderr}"
        )
    return report["plays"][0]["tasks"][0]["hosts"]["localhost"]


def replay_env(directory: str) -> dict[str, str]:
    return {"GPUFLEET_FIXTURE_REPLAY_DIR": str(DATA / directory)}


def test_two_nvlinked_h200_facts() -> None:
    res = adhoc(f"nvidia_smi_path={REPLAY} backend=nvidia-smi", env=replay_env("h200-x2-nvlink"))
    assert not res.get("failed"), res
    assert res["changed"] is False
    assert res["backend"] == "nvidia-smi"
    facts = res["ansible_facts"]
    assert facts["gpufleet_gpu_count"] == 2
    assert facts["gpufleet_gpu_driver_version"] == "580.159.04"
    assert facts["gpufleet_gpu_driver_version_semver"] == "580.159.4"
    assert facts["gpufleet_gpu_cuda_driver_version"] == "13.0"
    gpu0, gpu1 = facts["gpufleet_gpus"]
    assert gpu0["uuid"] == "GPU-2a7b3c4d-5e6f-4a1b-8c2d-3e4f5a6b7c80"
    assert gpu1["pci_bus_id"] == "00000000:00:07.0"
    assert gpu0["memory_mib"] == gpu1["memory_mib"] == 143771
    assert gpu0["mig_mode_current"] == "Disabled" and gpu0["mig_capable"] is True
    assert gpu0["nvlink_peers"] == [
        {
            "index": 1,
            "uuid": "GPU-9e8d7c6b-5a4f-4e3d-8c2b-1a0f9e8d7c61",
            "pci_bus_id": "00000000:00:07.0",
            "links": 18,
        }
    ]
    assert gpu1["compute_capability_semver"] == "9.0.0"
    assert not res.get("warnings")


def test_check_mode_reads_the_same_facts() -> None:
    args = f"nvidia_smi_path={REPLAY} backend=nvidia-smi"
    normal = adhoc(args, env=replay_env("h200-single"))
    checked = adhoc(args, env=replay_env("h200-single"), check=True)
    assert not checked.get("failed"), checked
    assert checked["changed"] is False
    assert checked["ansible_facts"] == normal["ansible_facts"]
    assert checked["ansible_facts"]["gpufleet_gpus"][0]["serial"] == "1650000000001"


def test_auto_backend_falls_back_to_nvidia_smi() -> None:
    res = adhoc(f"nvidia_smi_path={REPLAY}", env=replay_env("h200-single"))
    assert not res.get("failed"), res
    assert res["backend"] == "nvidia-smi"
    assert res["ansible_facts"]["gpufleet_gpu_count"] == 1


def no_driver_here() -> None:
    found = [d for d in DRIVER_DIRS if Path(d, "nvidia-smi").exists()] + (
        ["PATH"] if shutil.which("nvidia-smi") else []
    )
    if found:
        pytest.skip(f"this host has nvidia-smi ({', '.join(found)}); the test needs one without")
    if importlib.util.find_spec("pynvml") is not None:
        pytest.skip("pynvml is importable here; the test needs a host without NVML")


def test_host_without_driver_fails_with_the_fix() -> None:
    no_driver_here()
    res = adhoc("backend=auto")
    assert res.get("failed") is True
    assert "no NVIDIA driver found" in res["msg"]
    assert "gpufleet.cluster.nvidia_driver" in res["msg"]
    assert "missing_ok=true" in res["msg"]


def test_host_without_driver_and_missing_ok_reports_no_gpus() -> None:
    no_driver_here()
    res = adhoc("missing_ok=true")
    assert not res.get("failed"), res
    assert res["backend"] == "none"
    assert res["ansible_facts"]["gpufleet_gpus"] == []
    assert res["ansible_facts"]["gpufleet_gpu_count"] == 0
    assert res["ansible_facts"]["gpufleet_gpu_driver_version"] is None


def test_nvidia_smi_path_that_is_not_a_program_is_named() -> None:
    res = adhoc(f"nvidia_smi_path={DATA / 'h200-single' / 'smi-L.txt'}")
    assert res.get("failed") is True
    assert (
        f"nvidia_smi_path={DATA / 'h200-single' / 'smi-L.txt'} is not an executable" in (res["msg"])
    )


def test_mig_devices_of_the_gpu_simulator(tmp_path: Path) -> None:
    if importlib.util.find_spec("gpufleet.lab.gpusim") is None or (
        importlib.util.find_spec("gpufleet.lab.gpusim.cli") is None
        or importlib.util.find_spec("gpufleet.lab.gpusim.admin") is None
    ):
        pytest.skip("the GPU simulator (gpufleet.lab.gpusim) is not in this tree")
    from gpufleet.lab.gpusim import admin, cli

    state = tmp_path / "state.json"
    assert (
        admin.main(["--state", str(state), "init", "--model", "NVIDIA H200", "--count", "2"]) == 0
    )
    for argv in (["-i", "0", "-mig", "1"], ["mig", "-i", "0", "-cgi", "19,14,9", "-C"]):
        result = cli.run(argv, state)
        assert result.rc == 0, (argv, result.out, result.err)
    smi = tmp_path / "nvidia-smi"
    smi.write_text(
        f"#!{sys.executable}\nimport sys\nfrom gpufleet.lab.gpusim.cli import main\n"
        "sys.exit(main())\n"
    )
    smi.chmod(0o755)

    res = adhoc(
        f"nvidia_smi_path={smi} backend=nvidia-smi", env={"GPUFLEET_GPUSIM_STATE": str(state)}
    )
    assert not res.get("failed"), res
    facts = res["ansible_facts"]
    simulated = json.loads(state.read_text())
    assert facts["gpufleet_gpu_driver_version"] == simulated["driver_version"]
    assert [g["uuid"] for g in facts["gpufleet_gpus"]] == [g["uuid"] for g in simulated["gpus"]]
    for got, sim in zip(facts["gpufleet_gpus"], simulated["gpus"], strict=True):
        assert got["mig_mode_current"] == sim["mig_mode_current"]
        assert got["memory_mib"] == sim["memory_mib"]
        expected = sorted(
            (
                gi["id"],
                ci["id"],
                ci["profile"],
                gi["profile"],
                gi["profile_id"],
                ci["profile_id"],
                gi["placement_start"],
                gi["placement_size"],
                ci["uuid"],
                gi["memory_mib"],
            )
            for gi in sim["gpu_instances"]
            for ci in gi["compute_instances"]
        )
        assert (
            sorted(
                (
                    d["gi_id"],
                    d["ci_id"],
                    d["profile"],
                    d["gi_profile"],
                    d["gi_profile_id"],
                    d["ci_profile_id"],
                    d["placement_start"],
                    d["placement_size"],
                    d["uuid"],
                    d["memory_mib"],
                )
                for d in got["mig_devices"]
            )
            == expected
        )
    gpu0 = facts["gpufleet_gpus"][0]
    assert sorted(d["profile"] for d in gpu0["mig_devices"]) == ["1g.18gb", "2g.35gb", "3g.71gb"]


def test_mig_profiles_the_gpu_reports_are_gathered() -> None:
    res = adhoc(f"nvidia_smi_path={REPLAY} backend=nvidia-smi", env=replay_env("h200-single"))
    assert not res.get("failed"), res
    [gpu] = res["ansible_facts"]["gpufleet_gpus"]
    by_name = {p["name"]: p for p in gpu["mig_profiles"]}
    assert list(by_name) == [
        "1g.18gb", "1g.18gb+me", "1g.35gb", "2g.35gb", "3g.71gb", "4g.71gb", "7g.141gb"
    ]  # fmt: skip
    assert by_name["3g.71gb"] == {
        "name": "3g.71gb", "profile_id": 9, "slices": 4, "memory_mib": 71424,
        "multiprocessors": 60, "copy_engines": 3, "decoders": 3, "encoders": 0,
        "jpeg_engines": 3, "ofa_engines": 0, "max_instances": 2, "placements": [0, 4],
    }  # fmt: skip
    off = adhoc(
        f"nvidia_smi_path={REPLAY} backend=nvidia-smi mig_profiles=false",
        env=replay_env("h200-single"),
    )
    assert "mig_profiles" not in off["ansible_facts"]["gpufleet_gpus"][0]
