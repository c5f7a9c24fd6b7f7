"""The collection's ``podman_exec`` connection (``plugins/connection/podman_exec.py``), the one
``inventory/lab`` reaches the lab's nodes with, run by ansible-playbook against real podman
containers of the lab's node image (no systemd: they run ``sleep``).

What it must do: one ``podman exec`` per module task (the module on standard input), files
copied in and fetched back byte for byte whatever their names, ``async`` tasks and
``ansible_pipelining: false`` still working, and clear failures for a container that does
not exist and a podman that is not installed."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from gpufleet import runner
from gpufleet.lab import podman

pytestmark = pytest.mark.integration

BIN = Path(sys.executable).parent
CONNECTION = "gpufleet.cluster.podman_exec"


@pytest.fixture(scope="module")
def hosts() -> Iterator[list[str]]:
    """Two running containers of the node image, removed after the module."""
    if shutil.which("podman") is None:
        pytest.skip("podman is not installed: run lab/prepare-podman as root")
    ref = podman.node_image_ref()
    if not podman.image_present(ref):
        pytest.skip(f"node image {ref} is not built: run lab/prepare-podman as root")
    names = [f"gpufleet-conn-{os.urandom(3).hex()}-{i}" for i in range(2)]
    try:
        for name in names:
            proc = subprocess.run(
                ["podman", "run", "-d", "--name", name, "--entrypoint", "sleep", ref, "infinity"],
                capture_output=True,
                text=True,
                check=False,
                timeout=120,
            )
            assert proc.returncode == 0, proc.stderr
        yield names
    finally:
        subprocess.run(
            ["podman", "rm", "--force", "--time", "0", *names],
            capture_output=True,
            check=False,
            timeout=120,
        )


def play(
    tmp_path: Path, hosts: list[str], tasks: list[dict], *args: str, path: str | None = None
) -> subprocess.CompletedProcess[str]:
    """ansible-playbook over ``hosts`` with the connection; stdout is the JSON callback's
    document, after the lines ``-vvv`` adds when asked."""
    inventory = {
        "all": {
            "hosts": {h: {} for h in hosts},
            "vars": {
                "ansible_connection": CONNECTION,
                "ansible_python_interpreter": "/usr/bin/python3",
            },
        }
    }
    (tmp_path / "inventory.yml").write_text(yaml.safe_dump(inventory))
    (tmp_path / "play.yml").write_text(
        yaml.safe_dump([{"hosts": "all", "gather_facts": False, "tasks": tasks}])
    )
    env = {
        "PATH": path if path is not None else os.environ["PATH"],
        "HOME": str(Path.home()),
        "ANSIBLE_COLLECTIONS_PATH": str(runner.collection_root().parents[2]),
        "ANSIBLE_STDOUT_CALLBACK": "ansible.posix.json",
        "ANSIBLE_NOCOLOR": "1",
        "ANSIBLE_LOCAL_TEMP": str(tmp_path / "local-tmp"),
    }
    return subprocess.run(
        [
            str(BIN / "ansible-playbook"),
            "-i",
            str(tmp_path / "inventory.yml"),
            *args,
            str(tmp_path / "play.yml"),
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def results(proc: subprocess.CompletedProcess[str]) -> list[dict[str, dict]]:
    """Per task, host -> its result, from the JSON callback."""
    start = proc.stdout.find("{")
    assert start >= 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    doc = json.loads(proc.stdout[start:])
    return [task["hosts"] for task in doc["plays"][0]["tasks"]]


def test_a_module_task_is_one_podman_exec_with_the_module_on_stdin(tmp_path, hosts) -> None:
    tasks = [{"ansible.builtin.command": "cat /etc/hostname", "changed_when": False}]
    proc = play(tmp_path, hosts[:1], tasks, "-vvv")
    assert proc.returncode == 0, proc.stdout[-3000:]
    # the connection's -vvv lines come on stdout before the callback's document
    lines = proc.stdout.splitlines()
    execs = [line for line in lines if line.startswith(f"<{hosts[0]}> EXEC ")]
    puts = [line for line in lines if line.startswith(f"<{hosts[0]}> PUT ")]
    assert len(execs) == 1, execs
    assert "'exec', '-i'" in execs[0], execs[0]
    assert not puts, puts


def test_files_go_in_and_come_back_byte_for_byte(tmp_path, hosts) -> None:
    # the controller expands $VARS in a copy's src: the odd names are on the container side
    payload = tmp_path / 'payload\'s "file"'
    payload.write_bytes(os.urandom(3 << 20) + b"\0\n\r\xff")
    fetched = tmp_path / "fetched"
    remote = "/tmp/copied name's $x `y`"
    tasks = [
        {"ansible.builtin.copy": {"src": str(payload), "dest": remote, "mode": "0600"}},
        {"ansible.builtin.fetch": {"src": remote, "dest": f"{fetched}/"}},
        {"ansible.builtin.stat": {"path": remote, "checksum_algorithm": "sha256"}},
    ]
    proc = play(tmp_path, hosts, tasks)
    assert proc.returncode == 0, proc.stdout[-3000:]
    for host in hosts:
        back = fetched / host / remote.lstrip("/")
        assert back.read_bytes() == payload.read_bytes(), host
    stats = results(proc)[2]
    assert {h: r["stat"]["size"] for h, r in stats.items()} == {
        h: payload.stat().st_size for h in hosts
    }


def test_async_tasks_and_pipelining_off_still_run(tmp_path, hosts) -> None:
    tasks = [
        {
            "ansible.builtin.command": "sh -c 'sleep 1; echo done'",
            "async": 30,
            "poll": 1,
            "changed_when": False,
        },
        {"ansible.builtin.command": "id -un", "changed_when": False},
    ]
    for extra in ([], ["-e", "ansible_pipelining=false"]):
        proc = play(tmp_path, hosts, tasks, *extra)
        assert proc.returncode == 0, (extra, proc.stdout[-3000:])
        done, who = results(proc)
        assert {r["stdout"] for r in done.values()} == {"done"}, extra
        assert {r["stdout"] for r in who.values()} == {"root"}, extra


def test_a_missing_container_is_unreachable_or_failed_naming_it(tmp_path, hosts) -> None:
    ghost = f"gpufleet-conn-missing-{os.urandom(3).hex()}"
    proc = play(tmp_path, [ghost], [{"ansible.builtin.command": "true"}])
    assert proc.returncode != 0
    assert ghost in proc.stdout, proc.stdout[-3000:]
    assert "no such container" in proc.stdout.lower(), proc.stdout[-3000:]


def test_no_podman_on_path_names_the_option_and_the_fix(tmp_path, hosts) -> None:
    empty = tmp_path / "empty-bin"
    empty.mkdir()
    proc = play(tmp_path, hosts[:1], [{"ansible.builtin.command": "true"}], path=str(empty))
    assert proc.returncode != 0
    assert "podman_executable: 'podman' is not a command on PATH" in proc.stdout, proc.stdout[
        -3000:
    ]
    assert "ansible_podman_executable" in proc.stdout


@pytest.mark.parametrize("name", ["--privileged", "a b", "x;id", ""])
def test_a_host_that_is_no_container_name_is_refused_before_podman_runs(
    tmp_path, hosts, name
) -> None:
    tasks = [{"ansible.builtin.command": "true"}]
    inventory_name = name or "empty"
    proc = play(tmp_path, [inventory_name], tasks, "-e", f"ansible_host={name!r}")
    assert proc.returncode != 0
    assert f"remote_addr: {name!r} is not a podman container name or ID" in proc.stdout, (
        proc.stdout[-3000:]
    )


def test_ansible_user_is_the_user_commands_run_as(tmp_path, hosts) -> None:
    tasks = [{"ansible.builtin.command": "id -un", "changed_when": False}]
    proc = play(tmp_path, hosts[:1], tasks, "-e", "ansible_user=nobody")
    assert proc.returncode == 0, proc.stdout[-3000:]
    (who,) = results(proc)
    assert {r["stdout"] for r in who.values()} == {"nobody"}
