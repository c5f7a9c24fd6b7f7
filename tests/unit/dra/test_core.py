"""Kubernetes versions as the DRA model reads them (``plugins/module_utils/dra/core.py``)."""

from __future__ import annotations

import pytest
from ansible_collections.gpufleet.cluster.plugins.module_utils.dra import core as dra_core
from hypothesis import given
from hypothesis import strategies as st

pytestmark = pytest.mark.unit


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("1.35.0", dra_core.KubeVersion(1, 35, 0)),
        ("v1.35.0", dra_core.KubeVersion(1, 35, 0)),
        ("1.35", dra_core.KubeVersion(1, 35, None)),
        (" v1.33.13 ", dra_core.KubeVersion(1, 33, 13)),
        ("v1.36.0-rc.1", dra_core.KubeVersion(1, 36, 0, "rc.1")),
    ],
)
def test_parse_version_accepts_release_forms(text: str, expected: dra_core.KubeVersion) -> None:
    assert dra_core.parse_version(text) == expected


@pytest.mark.parametrize("bad", ["", "1", "one.two", "1.35.x", "2.1.0", "v1..3", "1.35.0.1"])
def test_parse_version_names_the_bad_value(bad: str) -> None:
    with pytest.raises(dra_core.VersionParseError) as err:
        dra_core.parse_version(bad, name="kubernetes_version")
    assert "kubernetes_version" in str(err.value)
    assert repr(bad) in str(err.value)
    assert err.value.fix


@given(st.integers(0, 60), st.one_of(st.none(), st.integers(0, 40)), st.booleans())
def test_parse_version_round_trips(minor: int, patch: int | None, v_prefix: bool) -> None:
    version = dra_core.KubeVersion(1, minor, patch)
    text = ("v" if v_prefix else "") + str(version)
    assert dra_core.parse_version(text) == version
