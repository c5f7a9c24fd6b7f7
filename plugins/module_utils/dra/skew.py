# Copyright: gpufleet contributors
# Apache License 2.0 (see LICENSE)
"""The DRA version model, part: version skew, known-bad releases, provision range,
container runtime.

Importers import the part that defines what they use (no module re-exports another's names)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from ansible_collections.gpufleet.cluster.plugins.module_utils.dra.api import (
    first_minor_serving,
)
from ansible_collections.gpufleet.cluster.plugins.module_utils.dra.core import (
    APISERVER,
    CONTROLLER_MANAGER,
    KUBELET,
    PROVISION_MAX_MINOR,
    PROVISION_MIN_MINOR,
    RESOURCE_GROUP,
    SCHEDULER,
    VersionLike,
    VersionModelError,
    _mv,
    parse_version,
)
from ansible_collections.gpufleet.cluster.plugins.module_utils.dra.resource_versions import (
    BETA_RESOURCE_VERSIONS,
)
from ansible_collections.gpufleet.cluster.plugins.module_utils.nvidia.containerd import (
    ConfigError,
    parse_containerd_version,
)

# --------------------------------------------------------------------------------------
# Version skew and known-bad releases
# --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class SkewRule:
    """``component`` may be at most ``max_newer`` minors newer and ``max_older`` minors older
    than every kube-apiserver.

    Source: kubernetes/website content/en/releases/version-skew-policy.md.
    """

    component: str
    max_newer: int
    max_older: int


SKEW_RULES = (
    SkewRule(KUBELET, 0, 3),
    SkewRule("kube-proxy", 0, 3),
    SkewRule(CONTROLLER_MANAGER, 0, 1),
    SkewRule(SCHEDULER, 0, 1),
    SkewRule("cloud-controller-manager", 0, 1),
)
#: Highest minor difference between kube-apiservers of one HA control plane.
HA_APISERVER_MAX_SKEW = 1
#: kubeadm upgrades one minor at a time ("Skipping MINOR versions when upgrading is unsupported").
MAX_UPGRADE_MINOR_STEP = 1


@dataclass(frozen=True)
class SkewViolation:
    """``component`` at ``version`` breaks the skew policy against kube-apiserver ``apiserver``."""

    component: str
    version: str
    apiserver: str
    reason: str


def check_skew(versions: Mapping[str, Sequence[VersionLike]]) -> list[SkewViolation]:
    """Check a fleet's versions against the skew policy.

    ``versions``: component name -> versions running (e.g. ``{"kube-apiserver": ["1.35.2",
    "1.36.0"], "kubelet": ["1.35.2"]}``). Returns every violation (empty list: compliant).
    Raises VersionParseError for a malformed version, VersionModelError when no
    kube-apiserver version is given.
    """
    apis = [parse_version(x, "kube-apiserver version") for x in versions.get(APISERVER, ())]
    if not apis:
        raise VersionModelError(
            "no kube-apiserver version given to check version skew against.",
            "pass the versions of every kube-apiserver under 'kube-apiserver'.",
        )
    out: list[SkewViolation] = []
    lo, hi = min(apis), max(apis)
    if hi.minor - lo.minor > HA_APISERVER_MAX_SKEW:
        out.append(
            SkewViolation(
                APISERVER,
                str(lo),
                str(hi),
                "kube-apiservers of one control plane must be within "
                f"{HA_APISERVER_MAX_SKEW} minor of each other",
            )
        )
    rules = {r.component: r for r in SKEW_RULES}
    for component, values in versions.items():
        if component == APISERVER:
            continue
        rule = rules.get(component)
        if rule is None:
            raise VersionModelError(
                f"component {component!r} has no version-skew rule.",
                "use one of: {}.".format(", ".join([APISERVER, *sorted(rules)])),
            )
        for raw in values:
            v = parse_version(raw, f"{component} version")
            for api in (lo, hi):
                diff = v.minor - api.minor
                if diff > rule.max_newer:
                    out.append(
                        SkewViolation(
                            component,
                            str(v),
                            str(api),
                            f"{component} must not be newer than any kube-apiserver",
                        )
                    )
                    break
                if -diff > rule.max_older and api == hi:
                    out.append(
                        SkewViolation(
                            component,
                            str(v),
                            str(api),
                            f"{component} may be at most {rule.max_older} minor(s) older "
                            "than kube-apiserver",
                        )
                    )
    return out


def kubelet_upgrade_allowed(target: VersionLike, apiserver_versions: Sequence[VersionLike]) -> None:
    """Refuse a kubelet upgrade to ``target`` while any kube-apiserver is older.

    Raises VersionModelError naming the older kube-apiservers (a newer kubelet talking to
    an older apiserver, e.g. through a load-balanced endpoint, may fail to start).
    """
    t = parse_version(target, "kubelet target version")
    if not apiserver_versions:
        raise VersionModelError(
            "no kube-apiserver version given to check the kubelet upgrade against.",
            "pass the versions of every kube-apiserver.",
        )
    apis = [parse_version(a, "kube-apiserver version") for a in apiserver_versions]
    older = [str(a) for a in apis if a.minor < t.minor]
    if older:
        raise VersionModelError(
            "kubelet {} would be newer than kube-apiserver {}; a kubelet must not be newer "
            "than any kube-apiserver.".format(t, ", ".join(older)),
            f"upgrade every kube-apiserver to {t.minor_version} first, then the kubelets.",
        )
    too_new = [str(a) for a in apis if a.minor - t.minor > 3]
    if too_new:
        raise VersionModelError(
            "kubelet {} would be more than 3 minors older than kube-apiserver {}.".format(
                t, ", ".join(too_new)
            ),
            "upgrade the kubelets one minor at a time together with the control plane.",
        )


@dataclass(frozen=True)
class KnownBadRelease:
    """A patch release that breaks DRA set-ups. ``version`` is exact ("1.30.0")."""

    version: str
    component: str
    problem: str
    fixed_in: str
    source: str
    advice: str


_DRA_PLUGIN_REGISTRATION_134 = dict(
    component="kubelet",
    problem="DRA kubelet plugins fail to register with the kubelet, so the node publishes "
    "no ResourceSlices and no claim on it is prepared",
    fixed_in="1.34.2",
    source="the NVIDIA DRA driver's documented Kubernetes minimum, v1.34.2 "
    "(kubernetes-sigs/dra-driver-nvidia-gpu docs/prerequisites.md, added by PR #1088)",
    advice="run 1.34.2 or later on every kubelet of a DRA node",
)

#: Known-bad patch releases (extend as new ones become known).
KNOWN_BAD_RELEASES: tuple[KnownBadRelease, ...] = (
    KnownBadRelease(version="1.34.0", **_DRA_PLUGIN_REGISTRATION_134),
    KnownBadRelease(version="1.34.1", **_DRA_PLUGIN_REGISTRATION_134),
    KnownBadRelease(
        version="1.30.0",
        component="kubeadm",
        problem="'kubeadm upgrade apply' writes a defaulted /var/lib/kubelet/config.yaml, "
        "dropping custom KubeletConfiguration fields such as featureGates "
        "(DynamicResourceAllocation=true is lost on the kubelet)",
        fixed_in="1.30.1",
        source="kubernetes/kubeadm#3049; fixed by kubernetes/kubernetes PR #124480 "
        "(cherry-pick #124497); the 1.30 release notes advise skipping 1.30.0",
        advice="upgrade to 1.30.1 or later instead; after any 'kubeadm upgrade node', "
        "re-assert the kubelet featureGates and check the live value",
    ),
)


def known_bad_releases(version: VersionLike) -> tuple[KnownBadRelease, ...]:
    """Known-bad entries for exactly ``version`` (a minor-only version matches none)."""
    v = parse_version(version)
    if v.patch is None:
        return ()
    key = f"{v.major}.{v.minor}.{v.patch}"
    return tuple(k for k in KNOWN_BAD_RELEASES if k.version == key)


#: Lowest containerd the collection accepts for a kubelet of a minor. Stricter than upstream:
#: the kubelet of 1.38.0-beta.0 still runs on a runtime without the CRI RuntimeConfig
#: call (containerd 1.7), falling back to the cgroup driver of its own configuration and
#: counting ``kubelet_cri_losing_support{version="1.38.0"}`` (``cmd/kubelet/app/
#: server.go``), and kubeadm's preflight only warns (``cmd/kubeadm/app/preflight/
#: checks.go``: "will be removed in 1.38"). The collection refuses it because containerd 1.7
#: is out of support since September 2026 (containerd's RELEASES.md) and the fallback is
#: marked for removal: a node left on it breaks at the release that removes it.
#: ``tests/integration/test_version_model_source.py`` checks the fallback and the warning
#: in each cached release's source, so this text changes when upstream does.
MIN_CONTAINERD_FOR_KUBELET: dict[int, tuple[int, int]] = {38: (2, 0)}
#: Where the upstream artifact states what ``MIN_CONTAINERD_FOR_KUBELET`` is stricter than.
CONTAINERD_RULE_SOURCE = (
    "upstream only warns: the kubelet falls back to the cgroup driver of its own "
    'configuration and counts kubelet_cri_losing_support{version="1.38.0"} '
    "(cmd/kubelet/app/server.go), kubeadm's preflight warns (cmd/kubeadm/app/preflight/"
    "checks.go); the collection refuses it because containerd 1.7 is out of support since "
    "September 2026 (containerd RELEASES.md) and the fallback is marked for removal"
)


def container_runtime_problem(runtime_version: str, kubelet_version: VersionLike) -> str | None:
    """Why a kubelet of ``kubelet_version`` cannot run on ``runtime_version``
    (``"containerd://1.7.28"``, ``"1.7.28"`` or ``"v1.7.28"``), or None. Only containerd
    is judged; another runtime or an unreadable version gives None."""
    v = parse_version(kubelet_version, "kubelet version")
    text = str(runtime_version).strip()
    if "://" in text:
        name, _sep, text = text.partition("://")
        if name != "containerd":
            return None
    try:
        have = parse_containerd_version(text)[:2]
    except ConfigError:
        return None
    need = max(
        (req for minor, req in MIN_CONTAINERD_FOR_KUBELET.items() if v.minor >= minor),
        default=None,
    )
    if need is None or have >= need:
        return None
    return (
        f"the collection runs the kubelet of {_mv(v.minor)} on containerd {need[0]}.{need[1]} or "
        f"later, this node runs containerd {text}, which lacks the CRI RuntimeConfig call "
        f"({CONTAINERD_RULE_SOURCE})"
    )


@dataclass(frozen=True)
class ProvisionVerdict:
    """``ok``: provision accepts the version; ``reason`` says why not (or the caveat)."""

    ok: bool
    reason: str


_PROVISION_RANGE = f"{_mv(PROVISION_MIN_MINOR)} to {_mv(PROVISION_MAX_MINOR)}"


def supported_for_provision(version: VersionLike) -> ProvisionVerdict:
    """Whether the provision roles accept ``version`` (``PROVISION_MIN_MINOR`` to
    ``PROVISION_MAX_MINOR``).

    Older minors predate the beta structured-parameters API (resource.k8s.io/v1beta1,
    1.32); 1.38 is a projection. Raises VersionParseError for a malformed version.
    """
    v = parse_version(version)
    if v.minor < PROVISION_MIN_MINOR:
        beta = first_minor_serving("ResourceSlice", BETA_RESOURCE_VERSIONS)
        arrives = f"{RESOURCE_GROUP}/{beta[1]} arrives in {_mv(beta[0])}" if beta else ""
        return ProvisionVerdict(
            False,
            f"Kubernetes {v} is older than {_mv(PROVISION_MIN_MINOR)}: DRA there is alpha (no "
            f"beta structured-parameters API; {arrives}); provision supports {_PROVISION_RANGE}",
        )
    if v.minor > PROVISION_MAX_MINOR:
        return ProvisionVerdict(
            False,
            f"Kubernetes {v} is newer than {_mv(PROVISION_MAX_MINOR)}, the newest release the "
            f"version model is checked against; provision supports {_PROVISION_RANGE}",
        )
    bad = known_bad_releases(v)
    if bad:
        return ProvisionVerdict(
            False,
            f"Kubernetes {v} is a known-bad release: {bad[0].problem}; {bad[0].advice}",
        )
    return ProvisionVerdict(True, f"Kubernetes {v} is supported for provision")
