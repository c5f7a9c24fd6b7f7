"""The execution environment's build context (``gpufleet/build/execution_environment.py``):
the archive's name from galaxy.yml, and a missing archive refused before ansible-builder
runs. The context itself is checked by tests/integration/test_execution_environment.py."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import yaml

from gpufleet.build import execution_environment as ee
from gpufleet.exit import EXIT_CANNOT_RUN

pytestmark = pytest.mark.unit


def collection_root(tmp_path: Path, version: str) -> Path:
    """A copy of the repository's definition and a galaxy.yml of ``version``."""
    root = tmp_path / "root"
    root.mkdir()
    shutil.copy(ee.ROOT / ee.DEFINITION, root)
    galaxy = yaml.safe_load((ee.ROOT / "galaxy.yml").read_text(encoding="utf-8"))
    (root / "galaxy.yml").write_text(yaml.safe_dump({**galaxy, "version": version}))
    return root


def test_the_archive_and_the_definition_follow_galaxy_yml(tmp_path: Path) -> None:
    root = collection_root(tmp_path, "2.3.4")
    assert ee.archive_name(root) == "gpufleet-cluster-2.3.4.tar.gz"
    doc = ee.definition(root)
    files = [c["name"] for c in doc["dependencies"]["galaxy"]["collections"] if "type" in c]
    assert files == ["collection/gpufleet-cluster-2.3.4.tar.gz"]
    assert doc["additional_build_files"] == [
        {"src": "gpufleet-cluster-2.3.4.tar.gz", "dest": "collection"}
    ]


def test_the_repository_definition_names_galaxy_yml_version() -> None:
    committed = yaml.safe_load((ee.ROOT / ee.DEFINITION).read_text(encoding="utf-8"))
    assert committed == ee.definition(), (
        "execution-environment.yml names another archive than galaxy.yml's version: "
        f"{ee.archive_name()}"
    )


def test_a_missing_archive_is_refused_before_ansible_builder_runs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    work = tmp_path / "work"
    with pytest.raises(SystemExit) as exited:
        ee.main(["create", "--archive-dir", str(tmp_path), "--work", str(work)])
    assert exited.value.code == EXIT_CANNOT_RUN
    err = capsys.readouterr().err
    assert f"{tmp_path / ee.archive_name()} is missing" in err
    assert "ansible-galaxy collection build --force" in err
    assert not work.exists()


def test_ansible_builder_is_not_run_without_the_archive(tmp_path: Path) -> None:
    with pytest.raises(ee.MissingArchive, match=r"gpufleet-cluster-1\.0\.0\.tar\.gz is missing"):
        ee.create(
            tmp_path,
            tmp_path / "work",
            root=collection_root(tmp_path, "1.0.0"),
            builder=str(tmp_path / "no-such-builder"),
        )
    assert not (tmp_path / "work").exists()
