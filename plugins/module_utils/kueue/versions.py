# Copyright: gpufleet contributors
# Apache License 2.0 (see LICENSE)
"""The Kueue version table: what each Kueue release needs to count DRA devices in quota.

Standard library only (Ansible ships ``module_utils`` to managed hosts); the table is a
Python literal, read from each release's source and checked against it
(``tests/unit/kueue/test_versions.py`` parses the module in the Go module cache with
``gpufleet.build.kueue_facts``).

Per release (``KueueRelease``):

* ``dra.gates``: Kueue's own feature gates for DRA (``pkg/features/kube_features.go``,
  the ``featuregate.Feature`` constants and their ``VersionedSpecs``), each with the stage
  and default that release gives it. ``quota_gate`` is the one that turns on quota
  accounting of DRA devices (its ``--feature-gates`` entry on the manager);
* ``config_api``: the ``apiVersion`` of Kueue's ``Configuration``
  (``apis/config/<version>/configuration_types.go``), and ``mapping_field``: where the
  device-class mappings live in it (``resources.deviceClassMappings``, a list of
  ``{name, deviceClassNames}``: ``Resources.DeviceClassMappings`` and the
  ``DeviceClassMapping`` struct);
* ``kueue_api``: the storage version of the ``kueue.x-k8s.io`` CRDs (ClusterQueue,
  LocalQueue, ResourceFlavor, Cohort, WorkloadPriorityClass;
  ``config/components/crd/bases``), the version the role writes;
* ``resource_api``: the ``resource.k8s.io`` version Kueue reads ResourceClaimTemplates
  with (the import of ``pkg/dra/claims.go``); the cluster must serve it
  (``min_kubernetes``: the first release the DRA version model serves it in by default);
* ``claim_rules``: what Kueue's device counting refuses in a ResourceClaimTemplate
  (``countDevicesPerClass`` in ``pkg/dra/claims.go``): only ``exactly`` requests with
  allocation mode ``ExactCount``, no CEL selectors, constraints, config, adminAccess or
  ``firstAvailable``, and only templates (a pod's direct ResourceClaim is not counted).
  A MIG profile quota therefore needs a DeviceClass per profile (the selector lives in
  the class), which the ``kueue`` role creates.

Only versions the Go module proxy serves are listed (``go list -m -versions
sigs.k8s.io/kueue`` answered v0.17.0 on 2026-12-03). Gate history older than a listed
release is kept as each gate's ``since`` (from the same ``VersionedSpecs``); it does not
make that older release installable.
"""

from __future__ import annotations

from dataclasses import dataclass

from ansible_collections.gpufleet.cluster.plugins.module_utils.dra import api as dra_api

__all__ = [
    "KUEUE_RELEASES",
    "KueueGate",
    "KueueRelease",
    "KueueVersionError",
    "kueue_release",
    "supported_versions",
]


class KueueVersionError(ValueError):
    """A Kueue version the table does not know; the message names the known ones."""


@dataclass(frozen=True)
class KueueGate:
    """One Kueue feature gate: ``name``, ``stage`` (Alpha, Beta, GA), ``default`` (on or
    off in that release), ``since`` (the Kueue minor its first spec names)."""

    name: str
    stage: str
    default: bool
    since: str


@dataclass(frozen=True)
class KueueRelease:
    """What one Kueue release (``version``, no leading ``v``) needs for DRA quotas; the
    fields are described in the module docstring. ``source`` names the files read."""

    version: str
    dra_gates: tuple[KueueGate, ...]
    quota_gate: str
    config_api: str
    mapping_field: str
    mapping_keys: tuple[str, str]
    kueue_api: str
    resource_api: str
    claim_rules: tuple[str, ...]
    source: str

    @property
    def min_kubernetes(self) -> str:
        """The oldest Kubernetes minor (``"1.34"``) whose kube-apiserver serves
        ``resource_api`` by default (``dra.api.first_release_serving``)."""
        return dra_api.first_release_serving(
            "ResourceClaimTemplate", (self.resource_api.rpartition("/")[2],), by_default=True
        )

    def gate(self, name: str) -> KueueGate:
        """The gate ``name``; raises KeyError when this release has none of that name."""
        for gate in self.dra_gates:
            if gate.name == name:
                return gate
        raise KeyError(name)

    def feature_gates_arg(self, extra: dict[str, bool] | None = None) -> str:
        """The manager's ``--feature-gates`` value: the quota gate on, plus ``extra``
        (``{"DRAExtendedResources": True}``) for gates this release knows. Raises
        KueueVersionError naming an unknown gate."""
        wanted = {self.quota_gate: True, **(extra or {})}
        known = {g.name for g in self.dra_gates}
        unknown = sorted(set(wanted) - known)
        if unknown:
            raise KueueVersionError(
                f"Kueue {self.version} has no DRA feature gate {', '.join(unknown)}; "
                f"it has {', '.join(sorted(known))}"
            )
        return ",".join(f"{k}={'true' if wanted[k] else 'false'}" for k in sorted(wanted))


_CLAIM_RULES_0_17 = (
    "only ResourceClaimTemplates are counted (pod.spec.resourceClaims[].resourceClaimTemplateName)",
    "requests[].exactly with allocationMode ExactCount; All is refused",
    "no CEL selectors in a request (a profile needs its own DeviceClass)",
    "no devices.constraints and no devices.config",
    "no adminAccess and no firstAvailable",
)

KUEUE_RELEASES: dict[str, KueueRelease] = {
    "0.17.0": KueueRelease(
        version="0.17.0",
        dra_gates=(
            KueueGate("DynamicResourceAllocation", "Alpha", False, "0.14"),
            KueueGate("DRAExtendedResources", "Alpha", False, "0.17"),
        ),
        quota_gate="DynamicResourceAllocation",
        config_api="config.kueue.x-k8s.io/v1beta2",
        mapping_field="resources.deviceClassMappings",
        mapping_keys=("name", "deviceClassNames"),
        kueue_api="kueue.x-k8s.io/v1beta2",
        resource_api="resource.k8s.io/v1",
        claim_rules=_CLAIM_RULES_0_17,
        source=(
            "sigs.k8s.io/kueue@v0.17.0: pkg/features/kube_features.go, "
            "apis/config/v1beta2/configuration_types.go, config/components/crd/bases, "
            "pkg/dra/claims.go"
        ),
    ),
}


def supported_versions() -> list[str]:
    """The versions in the table, oldest first."""
    return sorted(KUEUE_RELEASES, key=lambda v: tuple(int(p) for p in v.split(".")))


def kueue_release(version: str) -> KueueRelease:
    """The table row of ``version`` (``0.17.0`` or ``v0.17.0``). Raises KueueVersionError
    naming the versions the table knows."""
    plain = str(version).strip().lstrip("v")
    try:
        return KUEUE_RELEASES[plain]
    except KeyError:
        raise KueueVersionError(
            f"kueue_version={version!r} is not in the Kueue version table "
            f"(plugins/module_utils/kueue/versions.py); known: {', '.join(supported_versions())}"
        ) from None
