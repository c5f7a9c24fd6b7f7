"""MIG apply logic (``plugins/module_utils/mig/apply.py``) against the GPU simulator.

The simulator's ``nvidia-smi`` runs as a real subprocess (a wrapper script given as the
nvidia-smi path) on a state file in a temporary directory; the administration entry
(``gpusim init|hold|release``) sets up GPUs and processes. Once, the module runs through
``ansible localhost -m gpufleet.cluster.nvidia_mig``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from ansible_collections.gpufleet.cluster.plugins.module_utils.mig import apply as ma
from ansible_collections.gpufleet.cluster.plugins.module_utils.mig import clients as mcl
from ansible_collections.gpufleet.cluster.plugins.module_utils.mig import gpu_state as mgs
from ansible_collections.gpufleet.cluster.plugins.module_utils.mig import request as mrq

pytestmark = pytest.mark.ansible

ANSIBLE = Path(sys.executable).parent / "ansible"
REPO = Path(__file__).resolve().parents[2]
#: The simulator runs this tree's package and collection (``.collections`` links the
#: collection's name to the repository root), whatever else the interpreter has installed.
PYTHONPATH = f"{REPO}:{REPO / '.collections'}"


class Sim:
    """One simulated host: state file, nvidia-smi wrapper, admin calls."""

    def __init__(self, tmp: Path, model: str = "NVIDIA H200", count: int = 1) -> None:
        self.state = tmp / "state.json"
        self.smi = tmp / "nvidia-smi"
        self.smi.write_text(
            f"#!/bin/sh\nGPUFLEET_GPUSIM_STATE='{self.state}' PYTHONPATH='{PYTHONPATH}' "
            f"exec '{sys.executable}' -m gpufleet.lab.gpusim \"$@\"\n"
        )
        self.smi.chmod(0o755)
        self.admin("init", "--model", model, "--count", str(count), "--node-name", "n1")

    def admin(self, *args: str) -> str:
        proc = subprocess.run(
            [
                sys.executable,
                "-m",
                "gpufleet.lab.gpusim",
                "admin",
                "--state",
                str(self.state),
                *args,
            ],
            capture_output=True,
            text=True,
            cwd=REPO,
            env={**os.environ, "PYTHONPATH": PYTHONPATH},
        )
        assert proc.returncode == 0, (args, proc.stdout, proc.stderr)
        return proc.stdout

    def gpus(self) -> list[dict[str, Any]]:
        return json.loads(self.state.read_text())["gpus"]

    def placements(self, gpu: int = 0) -> list[tuple[str, int, int]]:
        return sorted(
            (gi["profile"], gi["placement_start"], gi["placement_size"])
            for gi in self.gpus()[gpu]["gpu_instances"]
        )

    def request(self, **kw: Any) -> mrq.Request:
        return mrq.Request(nvidia_smi=str(self.smi), **kw)


def runner(argv: list[str]) -> tuple[int, str, str]:
    """Real processes; PATH without sbin so that host tools do not vary the result."""
    env = {**os.environ, "PATH": "/usr/bin:/bin"}
    proc = subprocess.run(argv, capture_output=True, text=True, env=env, check=False)
    return proc.returncode, proc.stdout, proc.stderr


def no_modules(path: str) -> str:
    assert path == "/proc/modules"
    return "nvidia 1 0 - Live 0x0\nnvidia_uvm 1 0 - Live 0x0\n"


def apply(sim: Sim, check: bool = False, read_file=no_modules, **kw: Any) -> ma.ApplyResult:
    return ma.apply(sim.request(**kw), runner, read_file=read_file, check_mode=check)


SEVEN = {"1g.18gb": 7}


def test_first_carve_creates_every_instance_at_its_placement(tmp_path: Path) -> None:
    sim = Sim(tmp_path)
    res = apply(sim, layout=SEVEN)
    assert res.changed and res.mig_devices == 7
    gpu = sim.gpus()[0]
    assert gpu["mig_mode_current"] == gpu["mig_mode_pending"] == "Enabled"
    assert sim.placements() == [("1g.18gb", s, 1) for s in range(7)]
    assert all(len(gi["compute_instances"]) == 1 for gi in gpu["gpu_instances"])
    out = res.gpus[0]
    assert sorted(c["start"] for c in out["created"]) == list(range(7))
    assert out["destroyed"] == [] and out["before"]["mig_mode_current"] == "Disabled"
    assert "-cgi 19:0,19:1,19:2,19:3,19:4,19:5,19:6 -C" in " ".join(out["commands"])
    assert "1g.18gb (ID 19) at 6:1" in res.diff["after"]
    assert "1g.18gb" not in res.diff["before"]


def test_rerun_is_idempotent(tmp_path: Path) -> None:
    sim = Sim(tmp_path)
    apply(sim, layout=SEVEN)
    before = sim.state.read_bytes()
    again = apply(sim, layout=SEVEN)
    assert again.changed is False
    assert again.gpus[0]["commands"] == []
    assert sim.state.read_bytes() == before


def test_layout_change_touches_only_differing_instances(tmp_path: Path) -> None:
    sim = Sim(tmp_path)
    apply(sim, layout=SEVEN)
    uuids = {
        gi["placement_start"]: gi["compute_instances"][0]["uuid"]
        for gi in sim.gpus()[0]["gpu_instances"]
    }
    res = apply(sim, layout={"3g.71gb": 1, "1g.18gb": 3})
    out = res.gpus[0]
    # 3g.71gb takes slices 4-7: the 1g instances at 4, 5, 6 go, and one of 0-3 (7 -> 3).
    assert sorted(d["start"] for d in out["destroyed"]) == [3, 4, 5, 6]
    assert [(c["profile"], c["start"]) for c in out["created"]] == [("3g.71gb", 4)]
    assert sim.placements() == [("1g.18gb", 0, 1), ("1g.18gb", 1, 1), ("1g.18gb", 2, 1),
                                ("3g.71gb", 4, 4)]  # fmt: skip
    kept = {
        gi["placement_start"]: gi["compute_instances"][0]["uuid"]
        for gi in sim.gpus()[0]["gpu_instances"]
        if gi["profile"] == "1g.18gb"
    }
    assert kept == {s: uuids[s] for s in (0, 1, 2)}
    assert res.mig_devices == 4
    assert not any("-mig" in c for c in out["commands"])


def test_process_holding_the_gpu_refuses_before_any_change(tmp_path: Path) -> None:
    sim = Sim(tmp_path)
    sim.admin("hold", "--gpu", "0", "--pid", "4242", "--name", "python3", "--mib", "1024")
    before = sim.state.read_bytes()
    with pytest.raises(mgs.MigApplyError) as err:
        apply(sim, layout=SEVEN)
    msg = str(err.value)
    assert "process python3 (pid 4242)" in msg and "allow_reboot" in msg
    assert sim.state.read_bytes() == before


def test_process_holding_the_gpu_with_reboot_allowed_leaves_mode_pending(tmp_path: Path) -> None:
    sim = Sim(tmp_path)
    sim.admin("hold", "--gpu", "0", "--pid", "4242", "--name", "python3", "--mib", "1024")
    res = apply(sim, layout=SEVEN, allow_reboot=True)
    assert res.changed and res.reboot_required and res.gpus[0]["reboot_required"]
    gpu = sim.gpus()[0]
    assert (gpu["mig_mode_current"], gpu["mig_mode_pending"]) == ("Disabled", "Enabled")
    assert gpu["gpu_instances"] == []
    # the holder goes away (as after a reboot): the next run carves the layout
    sim.admin("release", "--gpu", "0", "--pid", "4242")
    res = apply(sim, layout=SEVEN)
    assert res.changed and not res.reboot_required
    assert sim.placements() == [("1g.18gb", s, 1) for s in range(7)]


def test_instances_destroyed_while_a_process_runs_are_refused(tmp_path: Path) -> None:
    sim = Sim(tmp_path)
    apply(sim, layout=SEVEN)
    sim.admin("hold", "--gpu", "0", "--pid", "777", "--name", "trainer", "--mib", "10")
    with pytest.raises(mgs.MigApplyError, match=r"process trainer \(pid 777\)"):
        apply(sim, layout={"7g.141gb": 1})
    assert len(sim.placements()) == 7


def test_layout_that_does_not_fit_fails_before_any_change(tmp_path: Path) -> None:
    sim = Sim(tmp_path)
    before = sim.state.read_bytes()
    with pytest.raises(mgs.MigApplyError) as err:
        apply(sim, layout={"1g.18gb": 7, "3g.71gb": 1})
    assert "does not fit on NVIDIA H200" in str(err.value)
    assert sim.state.read_bytes() == before


def test_unknown_profile_names_the_valid_ones(tmp_path: Path) -> None:
    sim = Sim(tmp_path)
    with pytest.raises(mgs.MigApplyError, match=r"1g\.10gb.*valid profiles: 1g\.18gb"):
        apply(sim, layout={"1g.10gb": 7})


def test_non_mig_gpu_is_reported_disabled_not_failed(tmp_path: Path) -> None:
    sim = Sim(tmp_path, model="NVIDIA L4")
    res = apply(sim, layout={}, mig_enabled=False)
    assert res.changed is False
    assert res.gpus[0]["mig_capable"] is False
    assert res.gpus[0]["before"]["mig_mode_current"] == "N/A"
    with pytest.raises(mgs.MigApplyError, match=r"does not support MIG.*devices"):
        apply(sim, layout=SEVEN)


def test_mig_on_with_zero_instances_is_refused(tmp_path: Path) -> None:
    sim = Sim(tmp_path)
    before = sim.state.read_bytes()
    with pytest.raises(mgs.MigApplyError, match=r"zero GPU instances.*mig_enabled=false"):
        apply(sim, layout={})
    config = {"version": "v1", "mig-configs": {"empty": [{"devices": "all", "mig-enabled": True}]}}
    with pytest.raises(mgs.MigApplyError, match=r"zero GPU instances"):
        apply(sim, config=config, config_name="empty")
    assert sim.state.read_bytes() == before


def test_mig_disabled_destroys_instances_and_turns_mig_off(tmp_path: Path) -> None:
    sim = Sim(tmp_path)
    apply(sim, layout={"3g.71gb": 2})
    res = apply(sim, layout={}, mig_enabled=False)
    gpu = sim.gpus()[0]
    assert res.changed and gpu["mig_mode_current"] == "Disabled" and gpu["gpu_instances"] == []
    assert len(res.gpus[0]["destroyed"]) == 2
    assert apply(sim, layout={}, mig_enabled=False).changed is False


def test_check_mode_changes_nothing_and_reports_the_diff(tmp_path: Path) -> None:
    sim = Sim(tmp_path)
    before = sim.state.read_bytes()
    res = apply(sim, check=True, layout={"2g.35gb": 3})
    assert res.changed and sim.state.read_bytes() == before
    assert res.diff["before"].startswith("GPU 0 (NVIDIA H200): MIG Disabled")
    assert res.diff["after"].count("2g.35gb (ID 14)") == 3


def test_mig_parted_config_per_gpu_index(tmp_path: Path) -> None:
    sim = Sim(tmp_path, count=2)
    config = {
        "version": "v1",
        "mig-configs": {
            "mixed": [
                {"devices": [0], "mig-enabled": True, "mig-devices": {"1g.35gb": 4}},
                {"devices": [1], "mig-enabled": False},
            ],
            "other": [{"devices": "all", "mig-enabled": False}],
        },
    }
    res = apply(sim, config=config, config_name="mixed")
    assert res.mig_devices == 4
    gpus = sim.gpus()
    assert [g["mig_mode_current"] for g in gpus] == ["Enabled", "Disabled"]
    assert sim.placements(0) == [("1g.35gb", s, 2) for s in (0, 2, 4, 6)]
    with pytest.raises(mgs.MigApplyError, match="choose one of: mixed, other"):
        apply(sim, config=config, config_name="nope")


def test_nvidia_drm_loaded_is_a_client_named_with_its_variable(tmp_path: Path) -> None:
    sim = Sim(tmp_path)

    def with_drm(path: str) -> str:
        return no_modules(path) + "nvidia_drm 131072 0 - Live 0x0\n"

    with pytest.raises(mgs.MigApplyError) as err:
        ma.apply(
            mrq.Request(layout=SEVEN, nvidia_smi=str(sim.smi), var_prefix="mig_"),
            runner,
            read_file=with_drm,
        )
    assert "kernel module nvidia_drm: add 'nvidia-drm' to mig_allow_stop" in str(err.value)


@pytest.mark.parametrize(
    ("container", "pod", "kind"),
    [
        ("gpus", "nvidia-dra-driver-gpu-kubelet-plugin-x7k2p", "dra-kubelet-plugin"),
        ("gpus", "gpufleet-gpu-simulator-kubelet-plugin-abcde", "dra-kubelet-plugin"),
        ("compute-domains", "nvidia-dra-driver-gpu-kubelet-plugin-x7k2p", None),
        ("nvidia-device-plugin-ctr", "nvidia-device-plugin-daemonset-q9", "k8s-device-plugin"),
        ("kube-proxy", "kube-proxy-abcde", None),
    ],
)
def test_container_clients_are_recognised(container: str, pod: str, kind: str | None) -> None:
    assert mcl.classify_container(container, pod) == kind


def test_unknown_client_kind_is_refused() -> None:
    with pytest.raises(mgs.MigApplyError, match=r"unknown client kind 'dcgm'.*nvidia-dcgm"):
        mrq.check_request(mrq.Request(layout=SEVEN, allow_stop=("dcgm",)))


def test_module_runs_through_ansible(tmp_path: Path) -> None:
    sim = Sim(tmp_path)
    env = {k: v for k, v in os.environ.items() if k != "ANSIBLE_COLLECTIONS_PATH"}
    env.update(
        ANSIBLE_LOAD_CALLBACK_PLUGINS="1",
        ANSIBLE_STDOUT_CALLBACK="json",
        ANSIBLE_LOCAL_TEMP=str(tmp_path / "ansible-tmp"),
    )
    args = json.dumps({"layout": {"1g.18gb": 2}, "nvidia_smi_path": str(sim.smi)})

    def adhoc(*extra: str) -> dict[str, Any]:
        proc = subprocess.run(
            [str(ANSIBLE), "localhost", "-c", "local", "-i", "localhost,",
             "-e", f"ansible_python_interpreter={sys.executable}",
             "-m", "gpufleet.cluster.nvidia_mig", "-a", args, *extra],
            capture_output=True, text=True, env=env, timeout=300,
        )  # fmt: skip
        report = json.loads(proc.stdout)
        return report["plays"][0]["tasks"][0]["hosts"]["localhost"]

    checked = adhoc("--check", "--diff")
    assert checked["changed"] is True and sim.gpus()[0]["gpu_instances"] == []
    first = adhoc()
    assert first["changed"] is True, first
    assert first["mig_devices"] == 2
    assert sim.placements() == [("1g.18gb", 0, 1), ("1g.18gb", 1, 1)]
    second = adhoc()
    assert second["changed"] is False, second


def test_cli_layout_option_maps_to_role_variables(tmp_path: Path) -> None:
    import click

    from gpufleet.commands.mig_apply import apply_extravars

    assert apply_extravars('{"1g.18gb": 7}', None) == {
        "mig_layout": {"1g.18gb": 7},
        "mig_config": {},
        "mig_config_file": "",
    }
    assert apply_extravars("all-1g.18gb", None) == {"mig_config_name": "all-1g.18gb"}
    cfg = tmp_path / "mig.yaml"
    cfg.write_text("version: v1\nmig-configs: {a: [{devices: all, mig-enabled: false}]}\n")
    assert apply_extravars(f"@{cfg}", "a") == {
        "mig_config_file": str(cfg),
        "mig_layout": {},
        "mig_config_name": "a",
    }
    with pytest.raises(click.BadParameter, match="not valid JSON"):
        apply_extravars("{1g.18gb: 7}", None)
    with pytest.raises(click.BadParameter, match="does not exist"):
        apply_extravars(f"@{tmp_path / 'missing.yaml'}", "a")


def test_cli_apply_without_inventory_path_exits_2(tmp_path: Path) -> None:
    from click.testing import CliRunner

    from gpufleet.cli import main

    res = CliRunner().invoke(main, ["mig", "apply", "-i", str(tmp_path / "nope")])
    assert res.exit_code == 2, res.output
    assert "does not exist" in res.output


def test_simulator_creates_at_the_requested_placement(tmp_path: Path) -> None:
    sim = Sim(tmp_path, count=2)

    def smi(*args: str) -> tuple[int, str]:
        rc, out, err = runner([str(sim.smi), *args])
        return rc, out + err

    assert smi("-i", "0", "-mig", "1")[0] == 0
    # "-i 0" selects GPU 0 only, although GPU 1's bus ID (…:07.0) also ends in 0
    assert [g["mig_mode_current"] for g in sim.gpus()] == ["Enabled", "Disabled"]
    rc, out = smi("mig", "-i", "0", "-cgi", "19:3,1g.18gb:5", "-C")
    assert rc == 0, out
    assert sim.placements() == [("1g.18gb", 3, 1), ("1g.18gb", 5, 1)]
    rc, out = smi("mig", "-i", "0", "-cgi", "19:3")
    assert rc == 23 and "using profile 19:3: Insufficient Resources" in out
    rc, out = smi("mig", "-i", "0", "-cgi", "19:7")
    assert rc == 2 and "Invalid Argument" in out
