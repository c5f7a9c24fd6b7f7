"""The reviewed list of skips CI accepts (tests/expected_skips.txt) and its matching."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import EXPECTED, expected_skips, unexpected

pytestmark = pytest.mark.unit


def test_every_expected_skip_says_why_and_names_an_existing_test_file() -> None:
    entries = expected_skips()
    assert entries, "the list is empty: then no skip is expected, delete the mechanism instead"
    root = EXPECTED.parent.parent
    for pattern, why in entries:
        assert len(why) > 20, f"{pattern}: give the reason it cannot run on the CI machine"
        assert (root / pattern.split("::")[0]).is_file(), pattern


def test_a_skip_off_the_list_is_unexpected(tmp_path: Path) -> None:
    path = tmp_path / "skips.txt"
    path.write_text("# c\n\ntests/lab/test_x.py::test_two* -- needs two GPUs on one node\n")
    patterns = expected_skips(path)
    assert patterns == [("tests/lab/test_x.py::test_two*", "needs two GPUs on one node")]
    assert unexpected(
        ["tests/lab/test_x.py::test_two_gpus", "tests/lab/test_x.py::test_one"], patterns
    ) == ["tests/lab/test_x.py::test_one"]
