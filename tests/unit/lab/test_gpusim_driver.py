"""The simulated NVIDIA kernel module (``gpusim driver unload|load``): in use while a compute
process or a holder of the device file exists, nothing answers while it is unloaded, and a
reload takes the MIG instances with it.

Holders of the device file are found in a ``/proc`` tree built here (``<pid>/fd/<n>`` links
and ``<pid>/comm``), so no process is started; ``tests/integration/test_gpusim_driver.py``
has a real process hold the file."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from ansible_collections.gpufleet.cluster.plugins.module_utils.nvidia.driver import (
    parse_proc_version,
)

from gpufleet.lab.gpusim import admin, cli, driver, state

pytestmark = pytest.mark.unit

NO_DRIVER_TEXT = (
    "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. "
    "Make sure that the latest NVIDIA driver is installed and running.\n"
)


def gpusim(path: Path, *argv: str) -> int:
    return admin.main(["--state", str(path), *argv])


@pytest.fixture
def node(tmp_path: Path) -> Path:
    """A lab node's state file: two H200s, driver 580.159.04 loaded."""
    path = tmp_path / "state.json"
    assert gpusim(path, "init", "--count", "2", "--node-name", "w1") == 0
    return path


def fake_proc(root: Path, holders: dict[int, tuple[str, list[Path]]]) -> Path:
    """A ``/proc`` tree: per pid its ``comm`` and ``fd/<n>`` links to the given files."""
    proc = root / "proc-fake"
    for pid, (comm, files) in holders.items():
        fd = proc / str(pid) / "fd"
        fd.mkdir(parents=True)
        (proc / str(pid) / "comm").write_text(comm + "\n")
        for n, target in enumerate(files):
            os.symlink(target, fd / str(n))
    (proc / "self").mkdir(parents=True, exist_ok=True)  # not a pid: skipped
    return proc


def proc_version(path: Path) -> Path:
    return state.proc_version_path(path)


def test_init_creates_the_device_file_and_keeps_it(node: Path) -> None:
    device = node.parent / "dev" / "nvidiactl"
    assert state.device_file_path(node) == device
    assert device.is_file() and device.stat().st_size == 0
    inode = device.stat().st_ino
    assert gpusim(node, "init", "--count", "2", "--node-name", "w1") == 0
    assert device.stat().st_ino == inode


def test_unload_refused_while_a_compute_process_holds_a_gpu(
    node: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert gpusim(node, "hold", "--gpu", "1", "--pid", "4242", "--name", "python3") == 0
    capsys.readouterr()
    assert gpusim(node, "driver", "unload") == 1
    assert capsys.readouterr().err == (
        "rmmod: ERROR: Module nvidia is in use\n  GPU 1: compute process 4242 (python3)\n"
    )
    assert state.load(node).driver_loaded is True
    assert proc_version(node).is_file()


def test_unload_refused_while_a_process_holds_the_device_file(tmp_path: Path, node: Path) -> None:
    device = state.device_file_path(node)
    other = tmp_path / "other"
    other.write_text("")
    proc = fake_proc(
        tmp_path,
        {
            812: ("gpusim-kubelet-", [other, device]),
            90: ("bash", [other]),
            77: ("gone", [tmp_path / "deleted"]),  # a dangling link: the file went away
        },
    )
    st = state.load(node)
    with pytest.raises(driver.ModuleInUse) as refused:
        driver.unload(st, node, proc)
    assert str(refused.value) == (
        "rmmod: ERROR: Module nvidia is in use\n"
        f"  process 812 (gpusim-kubelet-) holds {device} open"
    )
    assert st.driver_loaded is True


def test_holders_are_compared_by_inode_not_by_path(tmp_path: Path, node: Path) -> None:
    device = state.device_file_path(node)
    # the file as a pod sees it through its bind mount: another path, the same inode
    alias = tmp_path / "pod-view-nvidiactl"
    os.link(device, alias)
    copy = tmp_path / "copy-nvidiactl"
    copy.write_text("")
    proc = fake_proc(tmp_path, {5: ("plugin", [alias]), 6: ("reader", [copy])})
    assert driver.device_holders(device, proc) == [driver.Holder(5, "plugin")]


def test_a_process_that_ends_during_the_scan_is_left_out(tmp_path: Path, node: Path) -> None:
    device = state.device_file_path(node)
    proc = fake_proc(tmp_path, {5: ("plugin", [device])})
    (proc / "6").mkdir()  # listed, but its fd directory is gone
    (proc / "5" / "comm").unlink()  # ended between the fd scan and the name
    assert driver.device_holders(device, proc) == [driver.Holder(5, "?")]
    assert driver.device_holders(tmp_path / "no-such-device", proc) == []


def test_unload_then_load_a_new_release(
    tmp_path: Path, node: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    empty = fake_proc(tmp_path, {})
    st = state.load(node)
    assert driver.unload(st, node, empty) is True
    state.save(st, node)
    assert not proc_version(node).exists()
    assert json.loads(node.read_text())["driver_loaded"] is False
    assert gpusim(node, "driver", "unload") == 0
    assert capsys.readouterr().out == "unchanged: the nvidia module is not loaded; nothing to do\n"
    assert gpusim(node, "driver", "load", "--version", "580.95.05") == 0
    assert capsys.readouterr().out == "loaded: nvidia module 580.95.05 (CUDA 13.0)\n"
    assert parse_proc_version(proc_version(node).read_text()) == ("580.95.05", "open")
    smi = cli.run(["--query-gpu=driver_version", "--format=csv,noheader"], node)
    assert (smi.rc, smi.out) == (0, "580.95.05\n580.95.05\n")
    assert "Driver Version: 580.95.05" in cli.run([], node).out


def test_nvidia_smi_fails_while_the_driver_is_unloaded(tmp_path: Path, node: Path) -> None:
    st = state.load(node)
    driver.unload(st, node, fake_proc(tmp_path, {}))
    state.save(st, node)
    before = node.read_text()
    for argv in (["-L"], ["-q"], [], ["--version"], ["mig", "-lgi"], ["-i", "0", "-mig", "1"]):
        result = cli.run(argv, node)
        assert (result.out, result.rc, result.err) == (NO_DRIVER_TEXT, 9, ""), argv
    assert node.read_text() == before  # -mig 1 changed nothing
    assert cli.run(["-h"], node).rc == 0  # help needs no driver


def test_reload_destroys_mig_instances_and_keeps_mig_mode(tmp_path: Path, node: Path) -> None:
    assert cli.run(["-i", "0", "-mig", "1"], node).rc == 0
    assert cli.run(["mig", "-i", "0", "-cgi", "19,19", "-C"], node).rc == 0
    assert gpusim(node, "driver", "unload") == 0
    assert gpusim(node, "driver", "load") == 0
    after = state.load(node)
    assert [g.gpu_instances for g in after.gpus] == [[], []]
    assert [(g.mig_mode_current, g.mig_mode_pending) for g in after.gpus] == [
        ("Enabled", "Enabled"),
        ("Disabled", "Disabled"),
    ]
    assert cli.run(["mig", "-lgi"], node).out == "No GPU instances found: Not Found\n"


def test_a_pending_mig_mode_takes_effect_on_the_reload(tmp_path: Path) -> None:
    # Ampere: a pending enable waits for a GPU reset even after the process has gone
    path = tmp_path / "state.json"
    assert gpusim(path, "init", "--model", "NVIDIA A100-SXM4-40GB", "--node-name", "w1") == 0
    assert gpusim(path, "hold", "--gpu", "0", "--pid", "7", "--name", "train") == 0
    assert cli.run(["-i", "0", "-mig", "1"], path).rc == 0
    assert gpusim(path, "release", "--gpu", "0") == 0
    gpu = state.load(path).gpus[0]
    assert (gpu.mig_mode_current, gpu.mig_mode_pending) == ("Disabled", "Enabled")
    assert gpusim(path, "driver", "unload") == 0
    gpu = state.load(path).gpus[0]
    assert (gpu.mig_mode_current, gpu.mig_mode_pending) == ("Enabled", "Enabled")


def test_a_state_file_without_the_field_is_loaded(node: Path) -> None:
    data = json.loads(node.read_text())
    del data["driver_loaded"]
    node.write_text(json.dumps(data))
    assert state.load(node).driver_loaded is True
    assert cli.run(["-L"], node).rc == 0
    data["driver_loaded"] = "no"
    with pytest.raises(state.StateError, match=r"state\.driver_loaded = 'no'"):
        state.from_dict(data)


def test_load_at_another_release_refused_while_loaded(
    node: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    capsys.readouterr()
    assert gpusim(node, "driver", "load", "--version", "580.95.05") == 1
    assert capsys.readouterr().err == (
        "gpusim: the loaded module is 580.159.04 (CUDA 13.0); unload it first: "
        "'gpusim driver unload'\n"
    )
    assert gpusim(node, "driver", "load", "--version", "580.159.04") == 0
    assert capsys.readouterr().out == (
        "unchanged: nvidia module 580.159.04 is loaded; nothing to do\n"
    )
    assert state.load(node).driver_version == "580.159.04"


def test_release_numbers_are_checked(node: Path, capsys: pytest.CaptureFixture[str]) -> None:
    capsys.readouterr()
    assert gpusim(node, "set", "--driver-version", "latest") == 1
    assert "--driver-version='latest' is not an NVIDIA driver release" in capsys.readouterr().err
    assert gpusim(node, "driver", "unload") == 0
    assert gpusim(node, "driver", "load", "--version", "580") == 1
    assert "--version='580' is not an NVIDIA driver release" in capsys.readouterr().err
    assert state.load(node).driver_loaded is False


def test_no_process_can_hold_a_gpu_while_unloaded(
    node: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert gpusim(node, "driver", "unload") == 0
    capsys.readouterr()
    assert gpusim(node, "hold", "--gpu", "0", "--pid", "9", "--name", "python3") == 1
    assert capsys.readouterr().err == (
        "gpusim: hold --gpu 0: the NVIDIA driver is not loaded; load it with 'gpusim driver load'\n"
    )
