"""Stat of paths under a root in the shape ``ansible.builtin.stat`` registers
(``plugins/module_utils/host/paths.py``)."""

from __future__ import annotations

from pathlib import Path

import pytest
from ansible_collections.gpufleet.cluster.plugins.module_utils.host import paths

pytestmark = pytest.mark.unit


def test_items_in_order_with_the_root_without_its_trailing_slash(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("x")
    (tmp_path / "dir").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "file")
    out = paths.stat_items(str(tmp_path) + "/", ["file", "dir", "missing", "link"])
    assert [o["item"] for o in out] == ["file", "dir", "missing", "link"]
    file, directory, missing, link = (o["stat"] for o in out)
    assert file["path"] == f"{tmp_path}/file"
    assert (file["exists"], file["isreg"], file["isdir"]) == (True, True, False)
    assert (directory["isdir"], directory["isreg"]) == (True, False)
    assert missing == {"exists": False, "path": f"{tmp_path}/missing"}
    # follow: true, as the registered loop: a link to a file reads as the file
    assert (link["exists"], link["isreg"]) == (True, True)
