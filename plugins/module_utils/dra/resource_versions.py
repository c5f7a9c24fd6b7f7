# Copyright: gpufleet contributors
# Apache License 2.0 (see LICENSE)
"""The DRA version model, part: the resource.k8s.io versions the collection reads and
writes DRA objects (DeviceClass, ResourceClaim(Template), ResourceSlice) in.

No imports but ``common.fields``: the per-node modules that list ResourceSlices
(``upgrade_node_state`` through ``cluster/node_state.py``) ship this file and not the
release tables the rest of the model reads. ``tests/unit/dra/test_resource_versions.py``
holds it to the model: the beta and GA versions of ``dra.api.ALL_RESOURCE_VERSIONS``, which
comes from the generated releases; :func:`device_fields` is the one reader of a device's
fields across them.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ansible_collections.gpufleet.cluster.plugins.module_utils.common.fields import is_map

#: resource.k8s.io versions, most stable first: the beta and GA ones any release of the
#: model serves (the alpha shapes differ, and no release the roles provision serves DRA only
#: as alpha). A new version in a generated release is added here, in its place.
OBJECT_RESOURCE_VERSIONS = ("v1", "v1beta2", "v1beta1")

#: The beta versions of ``OBJECT_RESOURCE_VERSIONS``, newest first (v1beta2, v1beta1).
BETA_RESOURCE_VERSIONS = tuple(v for v in OBJECT_RESOURCE_VERSIONS if "beta" in v)

#: The versions whose DeviceRequest puts a request's device fields under ``exactly``
#: (beside ``firstAvailable``): v1beta2 (1.33) and v1; v1beta1 has them on the request
#: itself (k8s.io/api ``resource/{v1,v1beta2,v1beta1}/types.go``, ``DeviceRequest``).
EXACTLY_REQUEST_VERSIONS = frozenset({"v1", "v1beta2"})


def device_fields(device: Mapping[str, Any]) -> Mapping[str, Any]:
    """A ResourceSlice device's fields (attributes, capacity, consumesCounters, ...): the
    device itself in v1 and v1beta2, its ``basic`` in v1beta1 (k8s.io/api
    ``resource/v1beta1/types.go``, ``Device.Basic``); the device itself when ``basic`` is
    not a mapping. Called for every device of a fleet: a dict is taken without the
    abstract check (``common.fields.is_map``)."""
    basic = device.get("basic")
    return basic if basic is not None and is_map(basic) else device
