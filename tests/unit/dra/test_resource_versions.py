"""The resource.k8s.io versions DRA objects are read and written in
(plugins/module_utils/dra/resource_versions.py), a hand-kept tuple, against the generated
releases: every beta or GA version a release serves DRA objects in, most stable first."""

from __future__ import annotations

import re

import pytest
from ansible_collections.gpufleet.cluster.plugins.module_utils.dra import api as dra_api
from ansible_collections.gpufleet.cluster.plugins.module_utils.dra import (
    release_data as k8s_releases,
)
from ansible_collections.gpufleet.cluster.plugins.module_utils.dra.resource_versions import (
    OBJECT_RESOURCE_VERSIONS,
    device_fields,
)

pytestmark = pytest.mark.unit

OBJECT_KINDS = {"DeviceClass", "ResourceClaim", "ResourceClaimTemplate", "ResourceSlice"}


def _stability(version: str) -> tuple[int, int]:
    """``v1`` before ``v1beta2`` before ``v1beta1`` (Kubernetes' version priority)."""
    match = re.fullmatch(r"v(\d+)(?:beta(\d+))?", version)
    assert match, version
    return (0 if match.group(2) is None else 1, -int(match.group(2) or match.group(1)))


def test_the_versions_are_the_beta_and_ga_ones_the_releases_serve_objects_in() -> None:
    served = {
        version
        for release in k8s_releases.releases().values()
        for version, api in release.resource.items()
        if api.served and "alpha" not in version and set(api.kinds) >= OBJECT_KINDS
    }
    assert set(OBJECT_RESOURCE_VERSIONS) == served
    assert list(OBJECT_RESOURCE_VERSIONS) == sorted(served, key=_stability)


def test_the_versions_are_the_models_in_its_order() -> None:
    model = tuple(v for v in dra_api.ALL_RESOURCE_VERSIONS if "alpha" not in v)
    assert model == OBJECT_RESOURCE_VERSIONS


def test_a_device_s_fields_are_read_in_each_version_s_shape() -> None:
    fields = {"attributes": {"uuid": {"string": "GPU-1"}}, "capacity": {}}
    assert device_fields({"name": "gpu-0", **fields}) == {"name": "gpu-0", **fields}  # v1
    assert device_fields({"name": "gpu-0", "basic": fields}) is fields  # v1beta1
    # a basic that is no mapping (no server sends one) leaves the device as it is
    odd = {"name": "gpu-0", "basic": ["x"], **fields}
    assert device_fields(odd) is odd
