# Copyright: gpufleet contributors
# Apache License 2.0 (see LICENSE)
"""Which ``resource.k8s.io`` version a ResourceClaimTemplate is written in, and the
shape of that version: ``api_choice_for``/``api_version_for`` ask the DRA version model
(``dra.served_api_versions``) which version a Kubernetes release serves; the
field sets per object, union over the versions that have them
(``staging/src/k8s.io/api/resource/<version>/types.go``, k8s.io/api v0.37.0), and the
name and quantity formats the API accepts.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ansible_collections.gpufleet.cluster.plugins.module_utils.claims.metadata import (
    ClaimTemplateError,
)
from ansible_collections.gpufleet.cluster.plugins.module_utils.dra import api as dra_api
from ansible_collections.gpufleet.cluster.plugins.module_utils.dra import core as dra_core
from ansible_collections.gpufleet.cluster.plugins.module_utils.dra import resource_versions

__all__ = [
    "ApiChoice",
    "api_choice_for",
    "api_version_for",
]


RESOURCE_GROUP = dra_core.RESOURCE_GROUP


QUALIFIED_RE = re.compile(
    r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*)/([A-Za-z][-_.A-Za-z0-9]*)\Z"
)


_QUANTITY_RE = re.compile(r"^\+?\d+(\.\d+)?(Ki|Mi|Gi|Ti|Pi|Ei|k|M|G|T|P|E)?\Z")


# --------------------------------------------------------------------------------------
# Which resource.k8s.io version
# --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ApiChoice:
    """The resource.k8s.io version to write for a release: ``api_version``
    (``"resource.k8s.io/v1"``), ``version`` (``"v1"``), ``runtime_config`` (the
    kube-apiserver ``--runtime-config`` entry that must be set for it, or None when it is on
    by default), ``kubernetes_version`` (as given)."""

    api_version: str
    version: str
    runtime_config: str | None
    kubernetes_version: str


def default_kubernetes_version() -> str:
    """The newest release the provision roles accept, per the version model (``"1.37"``)."""
    return f"1.{dra_core.PROVISION_MAX_MINOR}"


def _first_shaped() -> str:
    """``"resource.k8s.io/v1beta1 (Kubernetes 1.32)"``: the oldest shaped version that
    serves ResourceClaimTemplates and its first release, per the version model."""
    minor, version = dra_api.first_minor_serving(
        "ResourceClaimTemplate", resource_versions.OBJECT_RESOURCE_VERSIONS
    )
    return f"{RESOURCE_GROUP}/{version} (Kubernetes 1.{minor})"


def api_choice_for(kubernetes_version: str) -> ApiChoice:
    """The most stable resource.k8s.io version that ``kubernetes_version`` serves with the
    ResourceClaimTemplate kind and whose shape this module writes (v1, v1beta2, v1beta1).

    Asks ``dra.served_api_versions`` (pkg/controlplane/instance.go of each release).
    Raises ClaimTemplateError when the release serves none of them (1.31 and older serve only
    alpha versions with another shape), VersionModelError/VersionParseError for a version
    outside the model or malformed.
    """
    served = dra_api.served_api_versions(kubernetes_version)
    for state in served:
        if (
            state.version in resource_versions.OBJECT_RESOURCE_VERSIONS
            and "ResourceClaimTemplate" in state.kinds
        ):
            return ApiChoice(
                state.group_version,
                state.version,
                None if state.enabled_by_default else state.runtime_config,
                str(kubernetes_version),
            )
    raise ClaimTemplateError(
        f"kubernetes_version={kubernetes_version!r} serves only "
        f"{', '.join(s.group_version for s in served)}; ResourceClaimTemplates with structured "
        f"parameters need {_first_shaped()} or newer.",
        f"use Kubernetes 1.{dra_core.PROVISION_MIN_MINOR} or newer.",
    )


def api_version_for(kubernetes_version: str) -> str:
    """``"resource.k8s.io/v1"`` for 1.34+, ``"resource.k8s.io/v1beta2"`` for 1.33,
    ``"resource.k8s.io/v1beta1"`` for 1.32, as the version model says (see
    ``api_choice_for`` for the errors raised)."""
    return api_choice_for(kubernetes_version).api_version


def split_api_version(api_version: str, name: str = "api_version") -> str:
    group, _sep, version = str(api_version).partition("/")
    if group != RESOURCE_GROUP or version not in resource_versions.OBJECT_RESOURCE_VERSIONS:
        raise ClaimTemplateError(
            f"{name}={api_version!r} is not a resource.k8s.io version this module writes.",
            "give one of "
            + ", ".join(f"{RESOURCE_GROUP}/{v}" for v in resource_versions.OBJECT_RESOURCE_VERSIONS)
            + ".",
        )
    return version


def resolve_api_version(api_version: str | None, kubernetes_version: str | None) -> str:
    if api_version:
        split_api_version(api_version)
        return api_version
    return api_version_for(kubernetes_version or default_kubernetes_version())


# Fields per object, union over the versions that have them (k8s.io/api v0.37.0 types.go).
REQUEST_V1 = frozenset({"name", "exactly", "firstAvailable"})


EXACT_FIELDS = frozenset(
    {
        "deviceClassName",
        "selectors",
        "allocationMode",
        "count",
        "adminAccess",
        "tolerations",
        "capacity",
        "derivedAttributes",
    }
)


SUBREQUEST_FIELDS = (EXACT_FIELDS - {"adminAccess"}) | {"name"}


REQUEST_V1BETA1 = EXACT_FIELDS | {"name", "firstAvailable"}


DEVICES_FIELDS = frozenset({"requests", "constraints", "config"})


CONSTRAINT_FIELDS = frozenset({"requests", "matchAttribute", "distinctAttribute"})


CONFIG_FIELDS = frozenset({"requests", "opaque"})


ALLOCATION_MODES = ("ExactCount", "All")
