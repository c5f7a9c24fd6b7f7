"""The function and macro names of the DRA CEL environment per release
(``plugins/module_utils/dra/cel_env.py``). The tables themselves are checked against the
real environments by ``tests/integration/test_cel_differential.py``."""

from __future__ import annotations

import pytest
from ansible_collections.gpufleet.cluster.plugins.module_utils.dra import cel_env

pytestmark = pytest.mark.unit


@pytest.mark.parametrize(
    ("release", "minor"),
    [("1.33.13", 33), ("v1.35.0", 35), (None, None), ("2.1.0", None), ("junk", None)],
)
def test_release_minor(release: str | None, minor: int | None) -> None:
    assert cel_env.release_minor(release) == minor


def test_the_newest_tables_hold_everything() -> None:
    functions, members, macros = cel_env.tables()
    assert functions == cel_env.GLOBAL_FUNCTIONS
    assert "quantity" in functions and "includes" in members
    assert {"all", "exists", "sortBy", "existsOne"} <= macros
    assert cel_env.tables("1.39.0") == cel_env.tables(None)


@pytest.mark.parametrize(("kind", "name"), list(cel_env.INTRODUCED))
def test_a_name_is_missing_before_the_release_that_introduced_it(kind: str, name: str) -> None:
    first = cel_env.INTRODUCED[(kind, name)]
    index = {"global": 0, "member": 1, "macro": 2}[kind]
    if first > 33:
        assert name not in cel_env.tables(f"1.{first - 1}.0")[index]
    assert name in cel_env.tables(f"1.{first}.0")[index]


def test_releases_older_than_1_33_are_not_recorded() -> None:
    with pytest.raises(ValueError, match=r"1\.32\.0 is not recorded"):
        cel_env.tables("1.32.0")
