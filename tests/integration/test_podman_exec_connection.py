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


#: Drives the connection in a process of its own (the plugin loader's collection finder
#: stays out of the test process): argv[1] the container, argv[2] a JSON list of
#: [method, args...]; prints one JSON line per call: the result or the exception.
DRIVER = """
import json, sys
from ansible.playbook.play_context import PlayContext
from ansible.plugins.loader import connection_loader, init_plugin_loader
init_plugin_loader([sys.argv[3]])
conn = connection_loader.get("gpufleet.cluster.podman_exec", PlayContext(), None)
conn.set_options(var_options={"inventory_hostname": sys.argv[1]})
for method, *args in json.loads(sys.argv[2]):
    try:
        out = getattr(conn, method)(*args)
        print(json.dumps({"ok": repr(out)[:300]}))
    except Exception as exc:
        print(json.dumps({"error": type(exc).__name__, "message": str(exc)[:500]}))
"""


def drive(container: str, calls: list[list[str]]) -> list[dict[str, str]]:
    proc = subprocess.run(
        [
            sys.executable,
            "-c",
            DRIVER,
            container,
            json.dumps(calls),
            str(runner.collection_root().parents[2]),
        ],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return [json.loads(line) for line in proc.stdout.splitlines()]


def test_file_transfers_fail_clearly_and_lose_nothing(tmp_path, hosts) -> None:
    kept = tmp_path / "kept"
    kept.write_text("fetched before\n")
    small = tmp_path / "small"
    small.write_bytes(b"x" * 1000)
    calls = [
        ["fetch_file", "/tmp/no-such-file", str(kept)],
        ["fetch_file", "/etc/hostname", str(tmp_path / "no" / "dir" / "x")],
        ["put_file", str(tmp_path / "missing"), "/tmp/x"],
        ["put_file", str(small), "/tmp/nul\x00byte"],
        ["put_file", str(small), "/tmp/not-utf8-\udcfe"],
        ["fetch_file", "/tmp/not-utf8-\udcfe", str(tmp_path / "y")],
    ] + [["put_file", str(small), "/tmp"]] * 10
    out = drive(hosts[0], calls)
    assert out[0]["error"] == "AnsibleError" and "No such file" in out[0]["message"], out[0]
    assert kept.read_text() == "fetched before\n"
    assert not [p.name for p in tmp_path.iterdir() if p.name.startswith(".podman_exec-")]
    assert "no directory" in out[1]["message"], out[1]
    assert out[2]["error"] == "AnsibleFileNotFound", out[2]
    assert out[3]["error"] == "AnsibleError" and "null byte" in out[3]["message"], out[3]
    for refused in out[4:6]:
        assert refused["error"] == "AnsibleError", refused
        assert "is not UTF-8" in refused["message"], refused
    # a destination that cannot be created: the shell's reason every time, never lost
    for each in out[6:]:
        assert "Is a directory" in each["message"], each


def test_raw_runs_through_the_shell(tmp_path, hosts) -> None:
    tasks = [{"ansible.builtin.raw": "echo $((40 + 2)) | tr 4 X; echo second"}]
    proc = play(tmp_path, hosts[:1], tasks)
    assert proc.returncode == 0, proc.stdout[-3000:]
    (raw,) = results(proc)
    assert [r["stdout_lines"] for r in raw.values()] == [["X2", "second"]]


def test_a_hex_host_name_is_a_whole_name_or_id_never_an_id_prefix(tmp_path, hosts) -> None:
    full_id = subprocess.run(
        ["podman", "container", "inspect", "--format", "{{.Id}}", hosts[1]],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    ).stdout.strip()
    tasks = [{"ansible.builtin.command": "cat /etc/hostname", "changed_when": False}]
    prefix = play(tmp_path, [full_id[:6]], tasks)
    assert prefix.returncode != 0
    assert f"no container is named '{full_id[:6]}'" in prefix.stdout, prefix.stdout[-3000:]
    whole = play(tmp_path, [full_id], tasks)
    assert whole.returncode == 0, whole.stdout[-3000:]


def test_a_stopped_container_fails_the_task_naming_podmans_reason(tmp_path, hosts) -> None:
    """A failed command, as with containers.podman (the upgrade's phase connect waits for
    such a host); a file transfer into it fails naming podman's reason."""
    name = f"gpufleet-conn-stopped-{os.urandom(3).hex()}"
    ref = podman.node_image_ref()
    try:
        subprocess.run(
            ["podman", "create", "--name", name, "--entrypoint", "sleep", ref, "infinity"],
            capture_output=True,
            check=True,
            timeout=120,
        )
        proc = play(tmp_path, [name], [{"ansible.builtin.command": "true"}])
        assert proc.returncode != 0
        (task,) = results(proc)
        assert task[name].get("failed") is True, task
        assert "can only create exec sessions on running containers" in json.dumps(task)
        small = tmp_path / "small"
        small.write_bytes(b"x")
        (put,) = drive(name, [["put_file", str(small), "/tmp/x"]])
        assert put["error"] == "AnsibleError", put
        assert f"podman exec in container {name}: Error:" in put["message"], put
    finally:
        subprocess.run(["podman", "rm", "-f", name], capture_output=True, timeout=120)


def test_a_become_password_is_refused_naming_the_fix(tmp_path, hosts) -> None:
    tasks = [{"ansible.builtin.command": "id -un", "become": True}]
    extra = ["-e", "ansible_user=nobody", "-e", "ansible_become_password=secret-value"]
    proc = play(tmp_path, hosts[:1], tasks, *extra)
    assert proc.returncode != 0
    assert "a become password is set, and podman_exec answers no prompt" in proc.stdout
    assert "secret-value" not in proc.stdout + proc.stderr
