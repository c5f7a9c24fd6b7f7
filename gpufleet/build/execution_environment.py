"""The build context of the execution environment (``execution-environment.yml``,
ansible-builder schema v3), with the collection archive that galaxy.yml names.

``galaxy.yml``'s namespace, name and version are the one source of the archive's name
(``gpufleet-cluster-0.1.0.tar.gz``, what ``ansible-galaxy collection build`` writes): the
definition written into the work directory names that archive in its galaxy requirement
and its ``additional_build_files``, whatever the repository's copy says. A missing archive
is refused before ``ansible-builder create`` runs.

Commands (``python -m gpufleet.build.execution_environment``)::

    create [--archive-dir DIR] [--work DIR]   write DIR/context (ansible-builder create);
                                              the archive is read from the repository
                                              root, the context goes to
                                              build/execution-environment/ by default

Exit codes (gpufleet/exit.py): 0 the context was written, 1 ansible-builder failed,
2 the archive or ansible-builder is missing.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import yaml

from gpufleet.exit import EXIT_CANNOT_RUN, EXIT_FAILED, exit_with

ROOT = Path(__file__).resolve().parents[2]
DEFINITION = "execution-environment.yml"
#: Where the definition's additional_build_files put the archive in the context.
ARCHIVE_DEST = "collection"


#: Where ``create`` writes by default (ignored by git and by the collection build).
WORK = ROOT / "build" / "execution-environment"


class CannotCreate(Exception):
    """The context cannot be written: an input or ansible-builder is missing."""


class MissingArchive(CannotCreate):
    """The collection archive that galaxy.yml names is not there."""


def archive_name(root: Path = ROOT) -> str:
    """``<namespace>-<name>-<version>.tar.gz`` from ``root/galaxy.yml``."""
    galaxy = yaml.safe_load((root / "galaxy.yml").read_text(encoding="utf-8"))
    return f"{galaxy['namespace']}-{galaxy['name']}-{galaxy['version']}.tar.gz"


def definition(root: Path = ROOT) -> dict[str, Any]:
    """``root/execution-environment.yml`` with the collection archive named from galaxy.yml
    (the galaxy requirement of ``type: file`` and its ``additional_build_files`` entry)."""
    doc = yaml.safe_load((root / DEFINITION).read_text(encoding="utf-8"))
    archive = archive_name(root)
    for collection in doc["dependencies"]["galaxy"]["collections"]:
        if collection.get("type") == "file":
            collection["name"] = f"{ARCHIVE_DEST}/{archive}"
    for entry in doc["additional_build_files"]:
        if entry["dest"] == ARCHIVE_DEST:
            entry["src"] = archive
    return doc


def check_archive(archive_dir: Path, root: Path = ROOT) -> Path:
    """The archive galaxy.yml names, in ``archive_dir``; raises :class:`MissingArchive`
    naming the file and the command that builds it."""
    archive = archive_dir / archive_name(root)
    if not archive.is_file():
        raise MissingArchive(
            f"the collection archive {archive} is missing (galaxy.yml's version); build it "
            f"first: ansible-galaxy collection build --force --output-path {archive_dir} {root}"
        )
    return archive


def create(archive_dir: Path, work: Path, root: Path = ROOT, builder: str = "") -> Path:
    """Write ``work/context`` with ``ansible-builder create`` from the derived definition,
    the collection's ``meta/`` and the archive (copied into ``work``); returns the context.
    Raises :class:`MissingArchive` before anything is written (:class:`CannotCreate`
    without ansible-builder), and
    ``subprocess.CalledProcessError`` when ansible-builder fails."""
    archive = check_archive(archive_dir, root)
    exe = builder or _tool("ansible-builder")
    work.mkdir(parents=True, exist_ok=True)
    (work / DEFINITION).write_text(yaml.safe_dump(definition(root), sort_keys=False))
    shutil.copytree(root / "meta", work / "meta", dirs_exist_ok=True)
    if archive.resolve() != (work / archive.name).resolve():
        shutil.copy(archive, work / archive.name)
    subprocess.run(
        [exe, "create", "-f", DEFINITION, "-c", "context"],
        cwd=work,
        check=True,
        capture_output=True,
        text=True,
        timeout=300,
    )
    return work / "context"


def _tool(name: str) -> str:
    """``name`` next to this Python (the project's virtualenv), else on PATH."""
    here = Path(sys.executable).parent / name
    found = str(here) if here.is_file() else shutil.which(name)
    if not found:
        raise CannotCreate(f"{name} is not installed; fix: pip install 'ansible-builder>=3.2,<4'")
    return found


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m gpufleet.build.execution_environment")
    sub = parser.add_subparsers(dest="command", required=True)
    create_cmd = sub.add_parser("create", help="write the build context (ansible-builder create)")
    create_cmd.add_argument("--archive-dir", type=Path, default=ROOT, help="where the archive is")
    create_cmd.add_argument("--work", type=Path, default=WORK, help="where context/ is written")
    args = parser.parse_args(argv)
    try:
        context = create(args.archive_dir, args.work)
    except CannotCreate as err:
        print(f"Error: {err}", file=sys.stderr)
        exit_with(EXIT_CANNOT_RUN)
    except subprocess.CalledProcessError as err:
        print(f"Error: ansible-builder create failed:\n{err.stdout}{err.stderr}", file=sys.stderr)
        exit_with(EXIT_FAILED)
    print(context)


if __name__ == "__main__":
    main()
