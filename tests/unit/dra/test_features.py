"""The DRA capabilities a user asks for by name (``plugins/module_utils/dra/features.py``)."""

from __future__ import annotations

import pytest
from ansible_collections.gpufleet.cluster.plugins.module_utils.dra import core as dra_core
from ansible_collections.gpufleet.cluster.plugins.module_utils.dra import features as dra_features
from ansible_collections.gpufleet.cluster.plugins.module_utils.dra import gates as dra_gates

pytestmark = pytest.mark.unit


def test_feature_def_by_name() -> None:
    admin = dra_features.feature_def("admin-access")
    assert admin.name == "admin-access"
    assert admin.gates == ("DRAAdminAccess",)


def test_unknown_feature_is_refused_listing_the_known_ones() -> None:
    with pytest.raises(dra_core.VersionParseError) as err:
        dra_features.feature_def("admin")
    assert "'admin'" in str(err.value)
    assert "admin-access" in str(err.value) and "prioritized-list" in str(err.value)


def test_every_feature_is_listed_once_and_names_gates_of_the_model() -> None:
    assert list(dra_features.ALL_FEATURES) == sorted(set(dra_features.ALL_FEATURES))
    assert set(dra_features.ALL_FEATURES) == set(dra_features.FEATURES)
    for name in dra_features.ALL_FEATURES:
        feature = dra_features.feature_def(name)
        assert feature.name == name
        assert set(feature.gates) <= set(dra_gates.GATES), name
