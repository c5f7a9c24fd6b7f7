# Copyright: gpufleet contributors
# Apache License 2.0 (see LICENSE)
"""The upgrade planner's input, judged before anything is read: the releases (target and
those to pass through), batch size, GPU floor, DRA wishes and the package repository.

Pure: no I/O. Each parser raises ``UpgradePlanError`` (a ``VersionModelError``: ``reason``
names the input and the value, ``fix`` says what to do); ``judge_input`` runs them all, as
module ``upgrade_plan`` does with ``judge_only`` before any host or the cluster is read.
``upgrade_plan`` re-exports every name here.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from typing import Any

from ansible_collections.gpufleet.cluster.plugins.module_utils.dra import core as dra_core
from ansible_collections.gpufleet.cluster.plugins.module_utils.dra import (
    kubernetes_facts as dra_facts,
)
from ansible_collections.gpufleet.cluster.plugins.module_utils.dra import plan as dra_plan

#: The newest release an upgrade may go to: the version model's
#: (``dra.core.PROVISION_MAX_MINOR``; the oldest to start from is
#: ``dra.kubernetes_facts.UPGRADE_MIN_MINOR``).
UPGRADE_MAX_MINOR = dra_core.PROVISION_MAX_MINOR
DEFAULT_PACKAGE_REVISION = "1.1"
DEFAULT_REPO_URL = "https://pkgs.k8s.io/core:/stable:/v{minor}/deb/"
#: How ``build_plan``'s messages name its inputs by default.
INPUT_NAMES = {
    "target": "--to",
    "via": "--via",
    "batch_size": "upgrade_batch_size",
    "min_gpu_available_percent": "upgrade_min_gpu_available_percent",
    "features": "upgrade_dra_features",
    "gates": "upgrade_dra_gates",
}


class UpgradePlanError(dra_core.VersionModelError):
    """The upgrade cannot be planned: ``reason`` names the variable or node and the value,
    ``fix`` says what to do."""


def parse_batch_size(value: int | str, workers: int, name: str = "upgrade_batch_size") -> int:
    """Nodes per worker batch: a positive integer, or ``"N%"`` of ``workers`` rounded down
    and at least 1 (as Ansible's ``serial``). Raises UpgradePlanError naming ``name``."""
    text = str(value).strip()
    fix = "give a number of nodes (e.g. 2) or a percentage of the workers (e.g. 20%)."
    if text.endswith("%"):
        try:
            pct = float(text[:-1])
        except ValueError:
            raise UpgradePlanError(f"{name}={value!r} is not a percentage.", fix) from None
        if not 0 < pct <= 100:
            raise UpgradePlanError(f"{name}={value!r} must be above 0% and at most 100%.", fix)
        return max(1, math.floor(workers * pct / 100))
    try:
        size = int(text)
    except ValueError:
        raise UpgradePlanError(f"{name}={value!r} is not a number of nodes.", fix) from None
    if size < 1 or isinstance(value, bool):
        raise UpgradePlanError(f"{name}={value!r} must be at least 1.", fix)
    return size


def parse_min_gpu_percent(
    value: int | float | str, name: str = "upgrade_min_gpu_available_percent"
) -> float:
    """The floor on schedulable GPU devices, 0 to 100 (a trailing % is accepted)."""
    text = str(value).strip().rstrip("%")
    try:
        pct = float(text)
    except ValueError:
        pct = -1.0
    if isinstance(value, bool) or not 0 <= pct <= 100:
        raise UpgradePlanError(
            f"{name}={value!r} is not a percentage from 0 to 100.",
            "give e.g. 50 to keep at least half of the GPU devices schedulable, 0 for no floor.",
        )
    return pct


def package_version(version: str, revision: str = DEFAULT_PACKAGE_REVISION) -> str:
    """``"1.37.2"`` -> ``"1.37.2-1.1"`` (the pkgs.k8s.io Debian/RPM version); a pre-release
    sorts below its release: ``"1.38.0-beta.0"`` -> ``"1.38.0~beta.0-1.1"``."""
    return f"{str(dra_core.parse_version(version)).replace('-', '~', 1)}-{revision}"


def repo_url(version: str, template: str = DEFAULT_REPO_URL) -> str:
    """The package repository of ``version``'s minor: ``template`` with ``{minor}`` replaced
    by ``1.37``. Raises UpgradePlanError when the template has no ``{minor}``."""
    if "{minor}" not in template:
        raise UpgradePlanError(
            f"upgrade_repo_url={template!r} has no {{minor}} placeholder; each minor has its "
            "own repository.",
            "write e.g. https://pkgs.k8s.io/core:/stable:/v{minor}/deb/ or "
            "file:/var/lib/gpufleet/pkgs/core:/stable:/v{minor}/deb/.",
        )
    return template.replace("{minor}", dra_core.parse_version(version).minor_version)


_RELEASE_RE = re.compile(r"^v?\d+\.\d+\.\d+(?:-(?:alpha|beta|rc)\.\d+)?\Z")


def _release_fix() -> str:
    ex = dra_core.example_release()
    return f"give MAJOR.MINOR.PATCH with an optional leading v, e.g. {ex} or v{ex}."


def parse_release(value: Any, name: str = "--to") -> dra_core.KubeVersion:
    """An exact release (``"1.37.2"`` or ``"v1.37.2"``, surrounding spaces ignored) or
    pre-release of Kubernetes (``"1.38.0-beta.0"``: alpha, beta or rc, packaged as
    ``1.38.0~beta.0-1.1``) as a KubeVersion with a patch. Packages are pinned exactly, so a
    minor (``"1.37"``), another pre-release form and build metadata (``"1.37.2+abc"``) are
    refused. The range of the model is not checked here.

    Raises UpgradePlanError (VersionParseError for a value that is no version at all)
    naming ``name`` and the value, with the fix."""
    if not isinstance(value, str):
        raise dra_core.VersionParseError(
            f"{name}={value!r} is not a Kubernetes release string.", _release_fix()
        )
    try:
        v = dra_core.parse_version(value, name)
    except dra_core.VersionParseError as exc:
        raise dra_core.VersionParseError(exc.reason, _release_fix()) from None
    text = value.strip()
    if v.patch is None:
        raise UpgradePlanError(
            f"{name} {value!r} names a minor, not a release.",
            f"give the exact release, e.g. {v.minor_version}.0; packages are pinned exactly.",
        )
    if not _RELEASE_RE.match(text):
        kind = "a pre-release" if v.pre and "+" not in text else "a release with build metadata"
        plain = f"{v.major}.{v.minor}.{v.patch}"
        raise UpgradePlanError(
            f"{name} {value!r} is {kind}; packages (kubeadm, kubelet, kubectl "
            "MAJOR.MINOR.PATCH-REVISION) exist only for releases and their alpha, beta and "
            "rc pre-releases.",
            f"give a release MAJOR.MINOR.PATCH, e.g. {plain}, or a pre-release such as "
            f"{plain}-rc.1.",
        )
    return v


def _target(version: Any, name: str = "--to") -> dra_core.KubeVersion:
    v = parse_release(version, name)
    if not dra_facts.UPGRADE_MIN_MINOR < v.minor <= UPGRADE_MAX_MINOR:
        raise UpgradePlanError(
            f"{name} {version!r} is outside the releases the version model covers for "
            f"upgrades (1.{dra_facts.UPGRADE_MIN_MINOR + 1} to 1.{UPGRADE_MAX_MINOR}).",
            f"give a release from 1.{dra_facts.UPGRADE_MIN_MINOR + 1}.0 "
            f"to 1.{UPGRADE_MAX_MINOR}.x.",
        )
    return v


def parse_target(value: Any, name: str = "--to") -> dra_core.KubeVersion:
    """The release to upgrade to: ``parse_release`` and within the releases the upgrade
    covers (1.32 to ``UPGRADE_MAX_MINOR``). Raises UpgradePlanError naming ``name``."""
    return _target(value, name)


def parse_via(
    values: Sequence[Any], target: dra_core.KubeVersion, name: str = "--via"
) -> dict[int, dra_core.KubeVersion]:
    """The releases to pass through, by minor: each an exact release (``parse_release``) of
    a minor below ``target``'s, at most one per minor. What needs the cluster (a minor not
    between the cluster's and the target's) is checked by ``build_plan``. Raises
    UpgradePlanError naming ``name`` and the value."""
    out: dict[int, dra_core.KubeVersion] = {}
    for raw in values:
        v = parse_release(raw, name)
        if v.minor >= target.minor:
            raise UpgradePlanError(
                f"{name} {v} is not between the cluster and --to ({target}): a release to pass "
                f"through must be of a minor below {target.minor_version}.",
                "give only releases of the minors between the cluster's and the target's.",
            )
        if v.minor in out and out[v.minor] != v:
            raise UpgradePlanError(
                f"{name} names two releases of {v.minor_version}: {out[v.minor]} and {v}; "
                "each minor is passed through once.",
                f"give one {v.minor_version} release.",
            )
        out[v.minor] = v
    return out


def judge_input(
    target: Any,
    *,
    via: Sequence[Any] = (),
    batch_size: int | str = 1,
    min_gpu_available_percent: int | float | str = 0,
    features: Sequence[str] = (),
    gates: Mapping[str, bool] | None = None,
    repo_url_template: str = DEFAULT_REPO_URL,
    workers: int = 1,
    input_names: Mapping[str, str] | None = None,
) -> None:
    """Judge what the plan takes that needs neither the cluster nor a host, before either
    is read: the target and each ``via`` release (exact releases, no pre-release, in the
    model, one per minor, below the target), the batch size against ``workers`` (the
    inventory's hosts outside kube_control_plane), the GPU floor, the DRA wishes at every
    release named, and the repository template. ``input_names`` as for
    :func:`build_plan`. Raises UpgradePlanError (VersionParseError for a value that is no
    version) naming the input, the value and the fix."""
    names = {**INPUT_NAMES, **dict(input_names or {})}
    tv = parse_target(target, names["target"])
    via_versions = parse_via(list(via), tv, names["via"])
    parse_batch_size(batch_size, max(1, workers), names["batch_size"])
    parse_min_gpu_percent(min_gpu_available_percent, names["min_gpu_available_percent"])
    for release in [*via_versions.values(), tv]:
        try:
            dra_plan.plan_components(str(release), list(features), dict(gates or {}))
        except dra_core.VersionModelError as exc:
            given = [f"{names['features']}={list(features)!r}"] if features else []
            given += [f"{names['gates']}={dict(gates or {})!r}"] if gates else []
            raise UpgradePlanError(
                f"{', '.join(given) or 'the DRA settings'} at {release}: {exc.reason}", exc.fix
            ) from None
    repo_url(str(tv), repo_url_template)
