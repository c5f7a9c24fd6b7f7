"""CHANGELOG.md is antsibull-changelog's: the fragments under ``changelogs/fragments/`` and
``changelogs/changelog.yaml`` pass its lint, the release step
(``antsibull-changelog release``) renders every pending fragment in its section, and
CHANGELOG.md is what ``antsibull-changelog generate`` writes from the released versions.

Runs the antsibull-changelog of this Python's environment (the ``dev`` extra), on the
repository for the lints and on a copy of the collection for ``release`` and ``generate``,
which rewrite files."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
CHANGELOGS = ROOT / "changelogs"
ANTSIBULL_CHANGELOG = str(Path(sys.executable).with_name("antsibull-changelog"))

#: What ``release`` and ``generate`` read: galaxy.yml (the version), the plugins and roles
#: (listed as new in a release) and the changelog files.
COLLECTION_PARTS = ("galaxy.yml", "changelogs", "plugins", "roles", "meta", "CHANGELOG.md")


def antsibull_changelog(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    # ansible-doc (which lists the collection's plugins) from the same environment
    path = os.pathsep.join([str(Path(sys.executable).parent), os.environ["PATH"]])
    return subprocess.run(
        [ANTSIBULL_CHANGELOG, *args],
        cwd=cwd,
        env=dict(os.environ, PATH=path),
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def collection_copy(tmp_path: Path) -> Path:
    copy = tmp_path / "collection"
    copy.mkdir()
    for name in COLLECTION_PARTS:
        source = ROOT / name
        if source.is_dir():
            shutil.copytree(source, copy / name, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy2(source, copy / name)
    return copy


def pending_changes(fragments: Path) -> dict[str, list[str]]:
    """Section -> the entries of every fragment, sorted (``release`` sorts them too)."""
    changes: dict[str, list[str]] = {}
    for path in sorted(fragments.glob("*.y*ml")):
        for section, entries in yaml.safe_load(path.read_text(encoding="utf-8")).items():
            entries = [entries] if isinstance(entries, str) else entries
            changes.setdefault(section, []).extend(entries)
    return {section: sorted(entries) for section, entries in changes.items()}


def markdown_items(text: str, version: str, titles: dict[str, str]) -> dict[str, int]:
    """Section -> the number of list items under its heading in the block of ``version``
    of a CHANGELOG.md that antsibull-changelog wrote (``## v0\\.1\\.0``, ``### Bugfixes``)."""
    by_title = {title: section for section, title in titles.items()}
    heading = "## v" + version.replace(".", "\\.")
    counts: dict[str, int] = {}
    inside, section = False, None
    for line in text.splitlines():
        if line.startswith("## "):
            inside, section = line == heading, None
        elif inside and line.startswith("### "):
            section = by_title.get(line[4:])
        elif inside and section and line.startswith("* "):
            counts[section] = counts.get(section, 0) + 1
    return counts


def test_every_fragment_passes_lint() -> None:
    assert any((CHANGELOGS / "fragments").glob("*.yml")), "no fragment under changelogs/"
    proc = antsibull_changelog("lint", cwd=ROOT)
    assert (proc.returncode, proc.stdout, proc.stderr) == (0, "", "")


def test_changelog_yaml_passes_lint() -> None:
    proc = antsibull_changelog("lint-changelog-yaml", "changelogs/changelog.yaml", cwd=ROOT)
    assert (proc.returncode, proc.stdout, proc.stderr) == (0, "", "")


def test_changelog_md_is_what_generate_writes(tmp_path: Path) -> None:
    committed = (ROOT / "CHANGELOG.md").read_text(encoding="utf-8")
    releases = yaml.safe_load((CHANGELOGS / "changelog.yaml").read_text())["releases"]
    if not releases:
        # Before the first release there is nothing to generate: the entries are fragments.
        items = [line for line in committed.splitlines() if line.startswith(("- ", "* "))]
        assert not items, "CHANGELOG.md is generated: add a fragment under changelogs/fragments/"
        return
    copy = collection_copy(tmp_path)
    proc = antsibull_changelog("generate", cwd=copy)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert (copy / "CHANGELOG.md").read_text(encoding="utf-8") == committed


def test_the_release_step_renders_every_pending_fragment(tmp_path: Path) -> None:
    copy = collection_copy(tmp_path)
    pending = pending_changes(copy / "changelogs" / "fragments")
    if not pending:
        return  # nothing to release: the last release took every fragment
    version = yaml.safe_load((ROOT / "galaxy.yml").read_text())["version"]
    proc = antsibull_changelog("release", cwd=copy)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    released = yaml.safe_load((copy / "changelogs" / "changelog.yaml").read_text())
    changes = released["releases"][version]["changes"]
    assert {s: sorted([e] if isinstance(e, str) else e) for s, e in changes.items()} == pending
    # the release summary is a paragraph, every other section a list
    titles = dict(yaml.safe_load((CHANGELOGS / "config.yaml").read_text())["sections"])
    written = (copy / "CHANGELOG.md").read_text(encoding="utf-8")
    listed = {s: len(e) for s, e in pending.items() if s in titles}
    assert markdown_items(written, version, titles) == listed
    proc = antsibull_changelog("generate", cwd=copy)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert (copy / "CHANGELOG.md").read_text(encoding="utf-8") == written
