"""docs/troubleshooting.md names every check id that ``validate`` reports and every gate
audit finding id, so a report's id can always be looked up."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit

REPO = Path(__file__).resolve().parents[2]
SOURCES = sorted((REPO / "plugins" / "module_utils").rglob("*.py"))
ID = re.compile(r'["`]((?:versions|gates|api|nodes|hosts|claims|kueue|smoke)\.[a-z0-9-]+)["`]')


def emitted_ids() -> set[str]:
    return {m for path in SOURCES for m in ID.findall(path.read_text())}


def test_the_sources_name_ids() -> None:
    ids = emitted_ids()
    # one of each area, so a change of the pattern cannot make the next test vacuous
    assert {i.split(".")[0] for i in ids} >= {"versions", "gates", "api", "nodes", "hosts"}
    assert len(ids) > 30


def test_every_id_is_in_the_troubleshooting_page() -> None:
    doc = (REPO / "docs" / "troubleshooting.md").read_text()
    missing = sorted(i for i in emitted_ids() if f"`{i}`" not in doc)
    assert missing == []
