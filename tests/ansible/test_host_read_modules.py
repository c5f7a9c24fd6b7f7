"""The modules path_stat and host_commands against the loops of ``ansible.builtin.stat``
and ``ansible.builtin.command`` they replace in the validation's host read
(roles/validate/tasks/read_node.yml): each pair runs for real by ansible-playbook on
localhost (a driver root laid out on disk: a library behind a symbolic link, a dangling
link, nvidia-smi, dev/; the role's own host commands and a few more), and the host checks
must read the same from either (``validate.hosts.normalize_host``)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import yaml
from ansible_collections.gpufleet.cluster.plugins.filter import dra_driver as dra_filter
from ansible_collections.gpufleet.cluster.plugins.module_utils.validate import hosts as vh

from tests.ansible.test_config_gate_modules import play

pytestmark = pytest.mark.ansible


ROLE_VARS = Path(__file__).resolve().parents[2] / "roles" / "validate" / "vars" / "main.yml"


def role_items() -> list[str]:
    """The paths read_node stats, from the filter the role calls."""
    return [*dra_filter.dra_driver_root_search_items(["libnvidia-ml.so.1", "nvidia-smi"]), "dev"]


def driver_root(tmp_path: Path) -> Path:
    root = tmp_path / "driver"
    lib = root / "usr/lib/x86_64-linux-gnu"
    lib.mkdir(parents=True)
    (lib / "libnvidia-ml.so.580.126.09").write_bytes(b"\x7fELF")
    os.symlink("libnvidia-ml.so.580.126.09", lib / "libnvidia-ml.so.1")
    (root / "usr/lib64").mkdir(parents=True)
    os.symlink("libnvidia-ml.so.gone", root / "usr/lib64/libnvidia-ml.so.1")
    (root / "usr/bin").mkdir(parents=True)
    (root / "usr/bin/nvidia-smi").write_text("#!/bin/sh\n")
    (root / "usr/bin/nvidia-smi").chmod(0o755)
    (root / "dev").mkdir()
    return root


@pytest.mark.parametrize("trailing_slash", [False, True], ids=["root", "root-slash"])
def test_path_stat_reads_what_the_stat_loop_read(tmp_path: Path, trailing_slash: bool) -> None:
    root = driver_root(tmp_path)
    given = f"{root}/" if trailing_slash else str(root)
    prefix = given.rstrip("/")
    items = role_items()
    loop, one = play(
        tmp_path,
        "driver-root",
        [
            {
                "name": "stat loop",
                "ansible.builtin.stat": {
                    "path": f"{prefix}/{{{{ item }}}}",
                    "follow": True,
                    "get_checksum": False,
                    "get_mime": False,
                    "get_attributes": False,
                },
                "loop": items,
            },
            {"name": "one run", "gpufleet.cluster.path_stat": {"root": given, "items": items}},
        ],
    )
    assert [r["item"] for r in one["results"]] == items
    for old, new in zip(loop["results"], one["results"], strict=True):
        assert old["item"] == new["item"]
        assert old["stat"]["exists"] == new["stat"]["exists"], old["item"]
        if old["stat"]["exists"]:
            for key in ("path", "isdir", "isreg", "islnk", "mode"):
                assert old["stat"][key] == new["stat"][key], (old["item"], key)
    found = [r["item"] for r in one["results"] if r["stat"]["exists"]]
    assert found == ["usr/lib/x86_64-linux-gnu/libnvidia-ml.so.1", "usr/bin/nvidia-smi", "dev"]

    def record(files: list[dict]) -> dict:
        raw = {"host": "h", "driver_root": {"root": given, "files": files, "devices": {}}}
        return vh.normalize_host(raw)["driver_root"]

    assert record(one["results"]) == record(loop["results"])
    assert record(one["results"])["dev_dir"] is True


def read_node_commands() -> list[dict]:
    """The host commands of read_node.yml, from the role's task file."""
    tasks = yaml.safe_load((ROLE_VARS.parents[1] / "tasks" / "read_node.yml").read_text())
    (block,) = [t for t in tasks if "block" in t]
    (task,) = [t for t in block["block"] if t["name"].startswith("Validate | Host commands")]
    return task["vars"]["validate_host_commands"]


def test_host_commands_report_what_the_command_loop_reported(tmp_path: Path) -> None:
    """The role's own commands (most not installed here: rc 2 either way), one that
    writes to both streams and fails, and one that prints trailing newlines."""
    commands = [
        *read_node_commands(),
        {"name": "both", "argv": ["sh", "-c", "echo out; echo err >&2; exit 3"]},
        {"name": "newlines", "argv": ["printf", "a\\nb\\n\\n"]},
        {"name": "locale", "argv": ["sh", "-c", "echo $LC_ALL $LANG"]},
    ]
    loop, one = play(
        tmp_path,
        "commands",
        [
            {
                "name": "command loop",
                "ansible.builtin.command": {"argv": "{{ item.argv }}"},
                "loop": commands,
                "changed_when": False,
                "failed_when": False,
            },
            {"name": "one run", "gpufleet.cluster.host_commands": {"commands": commands}},
        ],
    )
    assert one["changed"] is False
    for old, new in zip(loop["results"], one["results"], strict=True):
        assert old["item"] == new["item"]
        got = {k: new[k] for k in ("rc", "stdout", "stderr", "stdout_lines")}
        want = {k: old.get(k, [] if k == "stdout_lines" else "") for k in got}
        assert got == want, old["item"]["name"]
    by_name = {r["item"]["name"]: r for r in one["results"]}
    assert (by_name["both"]["rc"], by_name["both"]["stdout"]) == (3, "out")
    assert by_name["newlines"]["stdout_lines"] == ["a", "b"]
    old_hosts = vh.normalize_host({"host": "h", "commands": loop["results"]})
    new_hosts = vh.normalize_host({"host": "h", "commands": one["results"]})
    assert {n: new_hosts[n] for n in by_name} == {n: old_hosts[n] for n in by_name}


def test_host_commands_refuse_a_command_without_argv(tmp_path: Path) -> None:
    (res,) = play(
        tmp_path,
        "bad",
        [{"name": "bad", "gpufleet.cluster.host_commands": {"commands": [{"name": "x"}]}}],
    )
    assert res["_failed"]
    assert "commands[0]" in res["msg"] and "argv" in res["msg"]
