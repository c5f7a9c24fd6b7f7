# Copyright: gpufleet contributors
# Apache License 2.0 (see LICENSE)
"""The DRA version model: what Kubernetes 1.26 to 1.38 needs for Dynamic Resource Allocation.

This module is the single source of truth for every version-dependent DRA fact the
collection and the ``gpufleet`` CLI use. It is pure Python (standard library only)
because Ansible ships ``module_utils`` to managed hosts; all data are Python literals.

Facts, per Kubernetes minor:

* every DRA feature gate (and the few non-DRA gates DRA gates depend on) as a versioned
  spec list, the way Kubernetes registers it: ``[(since_minor, stage, default, locked)]``
  plus the removal minor, so that stage/default/locked/removed follow for any minor
  (``gate_state``);
* which components read each gate (``GateDef.components``);
* the gate dependencies Kubernetes declares (and checks at start-up) from 1.35;
* the ``resource.k8s.io`` group-versions kube-apiserver serves, which are on by
  default and which need ``--runtime-config`` (``served_api_versions``);
* the kubeadm configuration API versions (``kubeadm_config_api``);
* the version-skew rules (``check_skew``, ``kubelet_upgrade_allowed``);
* patch releases known to break DRA set-ups (``KNOWN_BAD_RELEASES``).

Planning functions turn wishes into settings or refuse them with a reason and a fix:
``plan_components`` (per component: feature-gates to set, entries that must be absent,
runtime-config to add or drop), ``plan_transition`` (what changes from one minor to the
next) and ``sanitize`` (which existing entries would stop a component).

Policy for what a plan writes (``_emit``): nothing for a gate that is GA and on by default
(setting it only risks "unrecognized feature gate" once Kubernetes removes it, the way
``BlockVolume`` broke upgrades to 1.21); ``=true`` where the gate is alpha or beta (beta
gates on by default are pinned so the wish survives a default change) or off by default;
``=false`` only for an unlocked gate on by default; never a locked gate. A gate is written
on every component that reads it, and a dependency on every component its dependent is
written on, because each component checks dependencies at start-up (1.35+).

Sources. The per-release facts are generated from each release's own source and
committed as data (``k8s_release_v1_<minor>.py``, read through ``k8s_releases``; made by
``python -m gpufleet.lab.release_facts generate``, which builds ``lab/go/featuredump``
against k8s.io/kubernetes v1.31.14, v1.32.13, v1.33.13, v1.34.4, v1.35.4, v1.36.3, v1.37.2
and v1.38.0-beta.0): every registered feature gate with its versioned specs and declared
dependencies (``pkg/features``), the ``resource.k8s.io`` versions of
``DefaultAPIResourceConfigSource`` (``pkg/controlplane/instance.go``) with their kinds and
prerelease lifecycle, and kubeadm's registered, old, deprecated and experimental
configuration API versions (``cmd/kubeadm/app/util/config/common.go``). Hand-kept here is
only what the source cannot say: which components read each DRA gate (``_READERS``, from
the packages that reference it: ``pkg/registry``, ``pkg/api*``, ``plugin/`` ->
kube-apiserver; ``pkg/controller`` -> kube-controller-manager; ``pkg/scheduler`` ->
kube-scheduler; ``pkg/kubelet`` -> kubelet), known-bad releases with their source, the
runtime-config policy before resource.k8s.io/v1, the skew policy, and the facts of minors
older than 1.31 (``_RESOURCE_API_BEFORE_DATA``; 1.26 to 1.28 are not on the Go module
proxy, ``UNVERIFIED_MINORS``). A minor whose data comes from a pre-release (1.38 from
v1.38.0-beta.0) carries a warning in every plan.

The model is written in parts, each re-exported here (import the model as
``dra_versions``): ``dra_core`` (range, errors, versions), ``dra_gates`` (feature gates),
``dra_api`` (served API versions, runtime-config, kubeadm config API), ``dra_skew`` (skew,
known-bad releases, provision range, container runtime), ``dra_features`` (the DRA
features), ``dra_settings`` (feature-gates and runtime-config values, the plan records),
``dra_plan`` (the per-component plan), ``dra_sanitize`` (existing settings judged) and
``dra_transition`` (one minor to the next).

``tests/unit/test_release_facts.py`` checks the model against every committed release and
``tests/integration/test_version_model_source.py`` regenerates each cached release's data
and compares it with the committed file.
"""

from __future__ import annotations

from ansible_collections.gpufleet.cluster.plugins.module_utils.dra_api import (  # noqa: F401
    ALL_RESOURCE_VERSIONS,
    API_LIFECYCLE_REMOVED,
    ApiVersionState,
    KubeadmConfigAPI,
    extra_args_shape,
    first_minor_serving,
    first_release_serving,
    kubeadm_api_problem,
    kubeadm_config_api,
    release_document,
    served_api_versions,
)
from ansible_collections.gpufleet.cluster.plugins.module_utils.dra_core import (  # noqa: F401
    ALPHA,
    APISERVER,
    BETA,
    COMPONENTS,
    CONTROLLER_MANAGER,
    DEPENDENCIES_DECLARED_SINCE,
    DEPRECATED,
    DRA_GATE,
    GA,
    KUBELET,
    MAX_MINOR,
    MIN_MINOR,
    PROJECTED_MINORS,
    PROVISION_MAX_MINOR,
    PROVISION_MIN_MINOR,
    RESOURCE_GROUP,
    SCHEDULER,
    UNVERIFIED_MINORS,
    KubeVersion,
    VersionLike,
    VersionModelError,
    VersionParseError,
    example_release,
    parse_version,
)
from ansible_collections.gpufleet.cluster.plugins.module_utils.dra_features import (  # noqa: F401
    ALL_FEATURES,
    FEATURES,
    FeatureDef,
)
from ansible_collections.gpufleet.cluster.plugins.module_utils.dra_gates import (  # noqa: F401
    GATES,
    NOT_YET,
    PRESENT,
    REMOVED,
    GateDef,
    GateState,
    SpecEntry,
    gate_state,
    gates_at,
    is_known_gate,
    prerelease_source,
    registered_by,
    release_gates_at,
    require_known_gate,
)
from ansible_collections.gpufleet.cluster.plugins.module_utils.dra_plan import (  # noqa: F401
    plan_components,
    unregistered_gate_reason,
)
from ansible_collections.gpufleet.cluster.plugins.module_utils.dra_sanitize import (  # noqa: F401
    Finding,
    SanitizeReport,
    runtime_config_problem,
    sanitize,
)
from ansible_collections.gpufleet.cluster.plugins.module_utils.dra_settings import (  # noqa: F401
    ComponentPlan,
    ComponentSettings,
    Forbidden,
    feature_gates_string,
    parse_feature_gates,
    parse_runtime_config,
)
from ansible_collections.gpufleet.cluster.plugins.module_utils.dra_skew import (  # noqa: F401
    HA_APISERVER_MAX_SKEW,
    KNOWN_BAD_RELEASES,
    MAX_UPGRADE_MINOR_STEP,
    MIN_CONTAINERD_FOR_KUBELET,
    SKEW_RULES,
    KnownBadRelease,
    ProvisionVerdict,
    SkewRule,
    SkewViolation,
    check_skew,
    container_runtime_problem,
    known_bad_releases,
    kubelet_upgrade_allowed,
    supported_for_provision,
)
from ansible_collections.gpufleet.cluster.plugins.module_utils.dra_transition import (  # noqa: F401
    GateChange,
    GateStateChange,
    RuntimeConfigChange,
    TransitionPlan,
    gate_state_changes,
    plan_transition,
)

__all__ = [
    "ALL_FEATURES",
    "COMPONENTS",
    "FEATURES",
    "GATES",
    "KNOWN_BAD_RELEASES",
    "MAX_MINOR",
    "MIN_MINOR",
    "PROVISION_MAX_MINOR",
    "PROVISION_MIN_MINOR",
    "ApiVersionState",
    "ComponentPlan",
    "ComponentSettings",
    "GateDef",
    "GateState",
    "KubeVersion",
    "KubeadmConfigAPI",
    "SanitizeReport",
    "TransitionPlan",
    "VersionModelError",
    "VersionParseError",
    "check_skew",
    "example_release",
    "feature_gates_string",
    "first_minor_serving",
    "first_release_serving",
    "gate_state",
    "gate_state_changes",
    "known_bad_releases",
    "kubeadm_config_api",
    "kubelet_upgrade_allowed",
    "parse_feature_gates",
    "parse_runtime_config",
    "parse_version",
    "plan_components",
    "plan_transition",
    "sanitize",
    "served_api_versions",
    "supported_for_provision",
]
