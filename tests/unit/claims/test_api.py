"""Which ``resource.k8s.io`` version a claim is written in
(``plugins/module_utils/claims/api.py``).
"""

from __future__ import annotations

import pytest
from ansible_collections.gpufleet.cluster.plugins.module_utils.claims import api as capi
from ansible_collections.gpufleet.cluster.plugins.module_utils.claims import (
    metadata as claims_metadata,
)
from ansible_collections.gpufleet.cluster.plugins.module_utils.dra import api as dra_api

pytestmark = pytest.mark.unit


@pytest.mark.parametrize(
    ("release", "api_version", "runtime_config"),
    [
        ("1.37.2", "resource.k8s.io/v1", None),
        ("1.34.0", "resource.k8s.io/v1", None),
        ("1.33.13", "resource.k8s.io/v1beta2", "resource.k8s.io/v1beta2=true"),
        ("1.32.5", "resource.k8s.io/v1beta1", "resource.k8s.io/v1beta1=true"),
    ],
)
def test_api_version_follows_the_version_model(
    release: str, api_version: str, runtime_config: str | None
) -> None:
    choice = capi.api_choice_for(release)
    assert (choice.api_version, choice.runtime_config) == (api_version, runtime_config)
    served = {s.group_version: s for s in dra_api.served_api_versions(release)}
    assert api_version in served
    assert served[api_version].enabled_by_default is (runtime_config is None)


def test_api_version_refuses_releases_without_structured_parameters() -> None:
    with pytest.raises(
        claims_metadata.ClaimTemplateError, match=r"1\.31.*resource.k8s.io/v1alpha3"
    ):
        capi.api_version_for("1.31.0")
