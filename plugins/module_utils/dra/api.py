# Copyright: gpufleet contributors
# Apache License 2.0 (see LICENSE)
"""The DRA version model, part: resource.k8s.io versions served, runtime-config of
any group, kubeadm's configuration API.

Importers import the part that defines what they use (no module re-exports another's names)."""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass

from ansible_collections.gpufleet.cluster.plugins.module_utils.dra import release_data as _releases
from ansible_collections.gpufleet.cluster.plugins.module_utils.dra.core import (
    COMPONENTS,
    MAX_MINOR,
    MIN_MINOR,
    RESOURCE_GROUP,
    VersionLike,
    VersionModelError,
    _in_model,
    _mv,
)
from ansible_collections.gpufleet.cluster.plugins.module_utils.dra.gates import (
    release_gates_at,
)

# --------------------------------------------------------------------------------------
# resource.k8s.io API versions
# --------------------------------------------------------------------------------------

_CORE4 = ("DeviceClass", "ResourceClaim", "ResourceClaimTemplate", "ResourceSlice")
_CLASSIC_1 = ("PodScheduling", "ResourceClaim", "ResourceClaimTemplate", "ResourceClass")
_CLASSIC_2 = ("PodSchedulingContext", "ResourceClaim", "ResourceClaimTemplate", "ResourceClass")
_CLASSIC_2_STRUCTURED = (
    *_CLASSIC_2,
    "ResourceClaimParameters",
    "ResourceClassParameters",
    "ResourceSlice",
)
_DTR = "DeviceTaintRule"
_RPSR = "ResourcePoolStatusRequest"

# Minors older than every generated release: minor -> {version: (enabled by default,
# kinds)}; from the Kubernetes website and the v1.29.6/v1.30.14 sources. Newer minors come
# from the generated release data (``_served``).
_RESOURCE_API_BEFORE_DATA: dict[int, dict[str, tuple[bool, tuple[str, ...]]]] = {
    26: {"v1alpha1": (False, _CLASSIC_1)},
    27: {"v1alpha2": (False, _CLASSIC_2)},
    28: {"v1alpha2": (False, _CLASSIC_2)},
    29: {"v1alpha2": (False, _CLASSIC_2)},
    30: {"v1alpha2": (False, _CLASSIC_2_STRUCTURED)},
}


def _api_lifecycle_removed() -> dict[str, int]:
    """resource.k8s.io version -> the minor its generated API lifecycle stops serving it
    (``APILifecycleRemoved`` of its kinds), as the newest generated release says."""
    newest = _releases.release(_releases.newest_minor())
    return {v: a.removed for v, a in sorted(newest.resource.items()) if a.removed is not None}


#: resource.k8s.io version -> minor its API lifecycle stops serving it (generated data).
API_LIFECYCLE_REMOVED = _api_lifecycle_removed()

#: Versions the core DRA objects (DeviceClass, ResourceClaim(Template), ResourceSlice)
#: need enabled with --runtime-config, per minor; empty once resource.k8s.io/v1 is GA
#: and on by default (1.34). 1.33 enables both betas: v1beta1 for drivers and clients
#: built against 1.32, v1beta2 for those built against 1.33.
_CORE_RUNTIME_CONFIG: dict[int, tuple[str, ...]] = {
    26: ("v1alpha1",),
    27: ("v1alpha2",),
    28: ("v1alpha2",),
    29: ("v1alpha2",),
    30: ("v1alpha2",),
    31: ("v1alpha3",),
    32: ("v1beta1",),
    33: ("v1beta1", "v1beta2"),
}

_VERSION_ORDER = {"v1": 0, "v1beta2": 1, "v1beta1": 2, "v1alpha3": 3, "v1alpha2": 4, "v1alpha1": 5}

#: Every resource.k8s.io version any minor of the model serves.
ALL_RESOURCE_VERSIONS = tuple(
    sorted(
        {ver for api in _RESOURCE_API_BEFORE_DATA.values() for ver in api}
        | {ver for r in _releases.releases().values() for ver in r.resource},
        key=lambda x: _VERSION_ORDER[x],
    )
)


@dataclass(frozen=True)
class ApiVersionState:
    """One served group-version: ``group_version`` ("resource.k8s.io/v1"), ``version``
    ("v1"), ``enabled_by_default``, ``kinds`` (sorted), ``runtime_config`` (the
    ``--runtime-config`` entry that enables it)."""

    group_version: str
    version: str
    enabled_by_default: bool
    kinds: tuple[str, ...]

    @property
    def runtime_config(self) -> str:
        return f"{self.group_version}=true"


def served_api_versions(version: VersionLike) -> tuple[ApiVersionState, ...]:
    """The resource.k8s.io group-versions kube-apiserver of ``version`` serves, most stable
    first. Alpha and beta versions are off by default and need ``--runtime-config``.

    Source: pkg/controlplane/instance.go (stable/beta/alpha GroupVersion lists and
    DefaultAPIResourceConfigSource) and staging/src/k8s.io/api/resource/*/register.go.
    """
    v = _in_model(version)
    api = _served(v.minor)
    return tuple(
        ApiVersionState(f"{RESOURCE_GROUP}/{ver}", ver, api[ver][0], tuple(sorted(api[ver][1])))
        for ver in sorted(api, key=lambda x: _VERSION_ORDER[x])
    )


@functools.cache
def _served(minor: int) -> dict[str, tuple[bool, tuple[str, ...]]]:
    """version -> (enabled by default, kinds) of what kube-apiserver of ``minor`` serves.

    From the generated data: a version listed in DefaultAPIResourceConfigSource whose API
    lifecycle has not reached its removal in ``minor`` (a GA or beta build stops serving a
    version in the minor its ``APILifecycleRemoved`` names: ``ShouldServeForVersion`` in
    k8s.io/apiserver/pkg/server/deleted_kinds.go).
    """
    rel = _releases.release(minor)
    if rel is None:
        return _RESOURCE_API_BEFORE_DATA[minor]
    return {
        ver: (a.enabled_by_default, a.kinds)
        for ver, a in rel.resource.items()
        if a.served and a.kinds and (a.removed is None or minor < a.removed)
    }


def first_minor_serving(
    kind: str, versions: tuple[str, ...] | None = None, *, by_default: bool = False
) -> tuple[int, str] | None:
    """``(minor, version)``: the oldest minor of the model whose kube-apiserver serves
    ``kind`` (``"ResourceClaimTemplate"``) in one of ``versions`` (``("v1",)``; any when
    None), on by default when ``by_default``, with the most stable such version; None when
    no minor of the model does. The facts are ``served_api_versions``'."""
    for minor in range(MIN_MINOR, MAX_MINOR + 1):
        api = _served(minor)
        for ver in sorted(api, key=lambda x: _VERSION_ORDER[x]):
            on, kinds = api[ver]
            if kind in kinds and (versions is None or ver in versions) and (on or not by_default):
                return minor, ver
    return None


def first_release_serving(
    kind: str, versions: tuple[str, ...] | None = None, *, by_default: bool = False
) -> str:
    """``"1.32"``: ``first_minor_serving``'s minor as text for messages (raises
    VersionModelError when no minor of the model serves ``kind`` so)."""
    found = first_minor_serving(kind, versions, by_default=by_default)
    if found is None:
        raise VersionModelError(
            f"no Kubernetes release of the model serves {kind} in {versions or 'any version'}.",
            "extend the version model.",
        )
    return _mv(found[0])


def _version_for_kind(minor: int, kind: str) -> str | None:
    api = _served(minor)
    for ver in sorted(api, key=lambda x: _VERSION_ORDER[x]):
        if kind in api[ver][1]:
            return ver
    return None


# --------------------------------------------------------------------------------------
# kubeadm configuration API
# --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class KubeadmConfigAPI:
    """kubeadm's configuration API in one minor.

    ``preferred``: the version kubeadm writes (and stores in the kubeadm-config ConfigMap);
    ``accepted``: versions usable without flags; ``deprecated``: accepted with a warning;
    ``experimental``: need ``--allow-experimental-api``; ``extra_args_shape``: ``"map"``
    (v1beta3, ``extraArgs: {feature-gates: "..."}``) or ``"list"`` (v1beta4,
    ``extraArgs: [{name: feature-gates, value: "..."}]``) for ``preferred``;
    ``migrate_with``: for a version kubeadm no longer reads, the kubeadm minor whose
    ``kubeadm config migrate`` converts it.
    """

    minor: int
    preferred: str
    accepted: tuple[str, ...]
    deprecated: tuple[str, ...] = ()
    experimental: tuple[str, ...] = ()
    migrate_with: tuple[tuple[str, str], ...] = ()
    verified: bool = True

    @property
    def extra_args_shape(self) -> str:
        return extra_args_shape(self.preferred)

    @property
    def registered(self) -> tuple[str, ...]:
        """Versions kubeadm's scheme registers (accepted plus experimental)."""
        return tuple(sorted(set(self.accepted) | set(self.experimental)))


def kubeadm_api_problem(api_version: str, version: VersionLike) -> str | None:
    """Why kubeadm of ``version`` refuses a configuration of ``api_version``
    (``"kubeadm.k8s.io/v1beta3"``), or None when it takes it without a flag.

    From the generated data of the release: a version in ``validateSupportedVersion``'s
    old list ("your configuration file uses an old API spec ... Please use kubeadm vX"),
    an experimental one (needs ``--allow-experimental-api``), or one its scheme does not
    register. Source: cmd/kubeadm/app/util/config/common.go of the release.
    """
    v = _in_model(version)
    api = _kubeadm(v.minor)
    if api_version in api.accepted:
        return None
    old = dict(api.migrate_with)
    if api_version in old:
        return (
            f"kubeadm {v} refuses {api_version} (an old API spec): convert the configuration "
            f"with 'kubeadm config migrate' of kubeadm {old[api_version]}, which still reads "
            f"it, or write {api.preferred}"
        )
    if api_version in api.experimental:
        return (
            f"{api_version} is experimental in kubeadm {v}: it needs "
            f"--allow-experimental-api; write {api.preferred}"
        )
    return (
        f"kubeadm {v} does not know {api_version} (it reads "
        f"{', '.join(api.accepted)}); write {api.preferred}"
    )


def extra_args_shape(api_version: str) -> str:
    """``"map"`` for kubeadm.k8s.io/v1beta3 and older, ``"list"`` for v1beta4 and newer."""
    return "map" if api_version.rsplit("/", 1)[-1] in ("v1beta1", "v1beta2", "v1beta3") else "list"


_KB = "kubeadm.k8s.io/"


def _kubeadm(minor: int) -> KubeadmConfigAPI:
    if minor <= 26:
        return KubeadmConfigAPI(
            minor,
            _KB + "v1beta3",
            (_KB + "v1beta3", _KB + "v1beta2"),
            (_KB + "v1beta2",),
            verified=False,
        )
    if minor < _releases.oldest_minor():
        return KubeadmConfigAPI(
            minor,
            _KB + "v1beta3",
            (_KB + "v1beta3",),
            experimental=(_KB + "v1beta4",) if minor >= 28 else (),
            migrate_with=((_KB + "v1beta2", "1.26"),),
            verified=minor >= 29,
        )
    rel = _releases.release(minor)
    if rel is None:
        # 1.31 and newer always have generated data; this covers an older one.
        raise VersionModelError(f"no kubeadm facts for 1.{minor}", "add its release data.")
    k = rel.kubeadm
    accepted = tuple(v for v in k.registered if v not in k.experimental)
    stable_first = sorted(accepted, key=_kubeadm_api_order)
    preferred = next((v for v in stable_first if v not in k.deprecated), stable_first[0])
    return KubeadmConfigAPI(
        minor,
        preferred,
        tuple(stable_first),
        deprecated=tuple(v for v in stable_first if v in k.deprecated),
        experimental=tuple(k.experimental),
        migrate_with=tuple((gv, use.lstrip("v")) for gv, use in k.old if gv not in accepted),
    )


def _kubeadm_api_order(group_version: str) -> tuple[int, int, int]:
    """Most stable first: v1 < v1beta4 < v1beta3 < ... (kubeadm.k8s.io/<version>)."""
    m = re.match(r"v(\d+)(alpha|beta)?(\d+)?$", group_version.rsplit("/", 1)[-1])
    if not m:
        return (9, 0, 0)
    level = {None: 0, "beta": 1, "alpha": 2}[m.group(2)]
    return (level, -int(m.group(1)), -int(m.group(3) or 0))


def kubeadm_config_api(version: VersionLike) -> KubeadmConfigAPI:
    """kubeadm configuration API versions of ``version``.

    v1beta4 (extraArgs as a list) is experimental from 1.28, preferred from 1.31;
    v1beta3 (extraArgs as a map) is deprecated from 1.31 and rejected from 1.37
    ("Please use kubeadm v1.36"); kubeadm.k8s.io/v1 is experimental in 1.37.
    Source: cmd/kubeadm/app/util/config/common.go validateSupportedVersion, v1.29.6-v1.37.2.
    """
    return _kubeadm(_in_model(version).minor)


def release_document(version: VersionLike) -> dict:
    """What ``version``'s release registers, as data: ``source`` (the release the facts
    were generated from, or None before 1.31), ``gates`` (every gate: stage, default,
    locked, components that register it), ``removed_gates`` (gates an earlier generated
    release registered -> the minor that removed them), ``api_versions`` (served
    resource.k8s.io versions: enabled_by_default, kinds), ``not_served`` (version -> why)
    and ``kubeadm`` (registered, deprecated, experimental, old -> kubeadm to migrate with).
    """
    v = _in_model(version)
    rel = _releases.release(v.minor)
    if rel is None:
        return {"source": None, "gates": {}, "removed_gates": {}, "api_versions": {}}
    gates = {}
    for name, st in release_gates_at(v).items():
        owners = rel.registered_by(name)
        gates[name] = {
            "stage": st.stage,
            "default": st.default,
            "locked": st.locked,
            "components": sorted(owners) if owners else list(COMPONENTS),
        }
    removed = {}
    for name in sorted(_releases.all_gate_names() - rel.all_names()):
        gone = _releases.removed_in(name, v.minor)
        if gone is not None:
            removed[name] = _mv(gone)
    served = _served(v.minor)
    not_served = {}
    for ver, api in sorted(rel.resource.items()):
        if ver in served:
            continue
        if api.removed is not None and v.minor >= api.removed:
            not_served[ver] = f"API lifecycle removed in {_mv(api.removed)}"
        else:
            not_served[ver] = "not in kube-apiserver's DefaultAPIResourceConfigSource"
    return {
        "source": rel.release,
        "prerelease": rel.prerelease,
        "gates": gates,
        "removed_gates": removed,
        "api_versions": {
            ver: {"enabled_by_default": served[ver][0], "kinds": list(served[ver][1])}
            for ver in sorted(served)
        },
        "not_served": not_served,
        "kubeadm": {
            "registered": list(rel.kubeadm.registered),
            "deprecated": list(rel.kubeadm.deprecated),
            "experimental": list(rel.kubeadm.experimental),
            "old": dict(rel.kubeadm.old),
        },
    }
