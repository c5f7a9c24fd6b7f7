# Copyright: gpufleet contributors
# Apache License 2.0 (see LICENSE)
"""The DRA version model, part: the resource.k8s.io versions the collection reads and
writes DRA objects (DeviceClass, ResourceClaim(Template), ResourceSlice) in.

No imports: the per-node modules that list ResourceSlices (``upgrade_node_state`` through
``upgrade/node_api.py``) ship this file and not the release tables the rest of the model
reads. ``tests/unit/dra/test_resource_versions.py`` holds it to the model: the beta and GA
versions of ``dra.api.ALL_RESOURCE_VERSIONS``, which comes from the generated releases.
"""

from __future__ import annotations

#: resource.k8s.io versions, most stable first: the beta and GA ones any release of the
#: model serves (the alpha shapes differ, and no release the roles provision serves DRA only
#: as alpha). A new version in a generated release is added here, in its place.
OBJECT_RESOURCE_VERSIONS = ("v1", "v1beta2", "v1beta1")
