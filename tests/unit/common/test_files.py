"""Writing files on a node: the diff, the backup and the atomic write
(``plugins/module_utils/common/files.py``), with a stand-in for the AnsibleModule."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
from ansible_collections.gpufleet.cluster.plugins.module_utils.common import files

pytestmark = pytest.mark.unit


class Failed(Exception):
    pass


class FakeModule:
    """What the file helpers use of an AnsibleModule."""

    def __init__(self, tmpdir: Path, check_mode: bool = False) -> None:
        self.tmpdir = str(tmpdir)
        self.check_mode = check_mode
        self.local_backups: list[str] = []

    def atomic_move(self, src: str, dest: str) -> None:
        os.replace(src, dest)

    def preserved_copy(self, src: str, dest: str) -> None:
        shutil.copy2(src, dest)

    def backup_local(self, path: str) -> str:
        dest = path + ".bak"
        shutil.copy2(path, dest)
        self.local_backups.append(dest)
        return dest

    def fail_json(self, **kwargs: object) -> None:
        raise Failed(kwargs)


@pytest.fixture
def module(tmp_path: Path) -> FakeModule:
    (tmp_path / "tmp").mkdir()
    return FakeModule(tmp_path / "tmp")


def test_file_diff_of_a_new_file_starts_empty() -> None:
    assert files.file_diff("/etc/x", None, "new\n") == {
        "before": "",
        "after": "new\n",
        "before_header": "/etc/x",
        "after_header": "/etc/x",
    }
    assert files.file_diff("/etc/x", "old", "new")["before"] == "old"


def test_write_atomic_replaces_the_content(module: FakeModule, tmp_path: Path) -> None:
    target = tmp_path / "file.yaml"
    target.write_text("old")
    files.write_atomic(module, str(target), "new ü\n")
    assert target.read_text(encoding="utf-8") == "new ü\n"
    assert os.listdir(module.tmpdir) == []


def test_backup_beside_the_file_then_write(module: FakeModule, tmp_path: Path) -> None:
    target = tmp_path / "config.yaml"
    target.write_text("before")
    made = files.backup_and_write(module, str(target), "after", backup=True)
    assert made == str(target) + ".bak"
    assert Path(made).read_text() == "before"
    assert target.read_text() == "after"


def test_no_backup_of_a_missing_file_and_new_file_mode(module: FakeModule, tmp_path: Path) -> None:
    target = tmp_path / "new-dir" / "dropin.toml"
    made = files.backup_and_write(module, str(target), "x = 1\n", backup=True, new_file_mode=0o600)
    assert made is None
    assert target.read_text() == "x = 1\n"
    assert oct(target.stat().st_mode & 0o777) == oct(0o600)
    assert module.local_backups == []


def test_static_pod_manifest_backup_goes_outside_its_directory(
    module: FakeModule, tmp_path: Path
) -> None:
    manifests = tmp_path / "manifests"
    manifests.mkdir()
    target = manifests / "kube-apiserver.yaml"
    target.write_text("before")
    backups = tmp_path / "backups"
    made = files.backup_and_write(
        module, str(target), "after", backup=True, backup_dir=str(backups)
    )
    assert made is not None and Path(made).parent == backups
    assert Path(made).name.startswith("kube-apiserver.yaml.")
    assert Path(made).read_text() == "before"
    assert sorted(p.name for p in manifests.iterdir()) == ["kube-apiserver.yaml"]


def test_backup_into_the_static_pod_directory_is_refused(
    module: FakeModule, tmp_path: Path
) -> None:
    target = tmp_path / "kube-apiserver.yaml"
    target.write_text("before")
    with pytest.raises(Failed, match="static pod directory"):
        files.backup_and_write(module, str(target), "after", backup=True, backup_dir=str(tmp_path))
    assert target.read_text() == "before"


def test_check_mode_writes_nothing(tmp_path: Path) -> None:
    (tmp_path / "tmp").mkdir()
    module = FakeModule(tmp_path / "tmp", check_mode=True)
    target = tmp_path / "file"
    target.write_text("before")
    assert files.backup_and_write(module, str(target), "after", backup=True) is None
    assert target.read_text() == "before"


def test_a_report_is_written_whole_to_a_regular_file(module: FakeModule, tmp_path: Path) -> None:
    target = tmp_path / "reports" / "validate.json"
    files.write_output(module, "report_file", str(target), '{"a": 1}')
    assert target.read_text() == '{"a": 1}'
    assert [p.name for p in target.parent.iterdir()] == ["validate.json"]  # no temporary left
    files.write_output(module, "report_file", str(target), "{}")
    assert target.read_text() == "{}"


def test_a_report_into_a_directory_or_a_pipe_is_refused_by_name(
    module: FakeModule, tmp_path: Path
) -> None:
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    for path, kind in ((tmp_path, "a directory"), (fifo, "a named pipe")):
        with pytest.raises(Failed) as err:
            files.write_output(module, "report_file (validate_report_file)", str(path), "{}")
        msg = str(err.value)
        assert f"report_file (validate_report_file)={str(path)!r} is {kind}" in msg
        assert "fix: give a file path" in msg


def test_a_report_to_dev_null_writes_nothing(module: FakeModule) -> None:
    files.write_output(module, "report_file", "/dev/null", "{}")


def test_a_report_in_a_directory_that_cannot_be_made_is_refused(
    module: FakeModule, tmp_path: Path
) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("x")
    with pytest.raises(Failed, match="Not a directory; fix: give a file path in a directory"):
        files.write_output(module, "junit_file", str(blocker / "sub" / "r.xml"), "<x/>")
