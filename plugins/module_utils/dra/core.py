# Copyright: gpufleet contributors
# Apache License 2.0 (see LICENSE)
"""The DRA version model, part: the version model's base: range, errors, Kubernetes versions.

Importers import the part that defines what they use (no module re-exports another's names)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Union

from ansible_collections.gpufleet.cluster.plugins.module_utils.common.messages import Refused

# --------------------------------------------------------------------------------------
# Range of the model
# --------------------------------------------------------------------------------------

MIN_MINOR = 26
MAX_MINOR = 38
#: Minors whose facts are projected from code comments of the newest release, not read
#: from a release of their own.
PROJECTED_MINORS: frozenset = frozenset()
#: Minors whose facts come from notes, not from a release's source.
UNVERIFIED_MINORS = frozenset({26, 27, 28})
#: Minors the provision roles accept (design: DRA with structured parameters).
PROVISION_MIN_MINOR = 32
PROVISION_MAX_MINOR = 38
#: The release every message gives as its example: the newest generated release that is no
#: pre-release (``dra/releases/``), written out so that the model's base imports no release
#: table (the per-node readers ship this file); tests/unit/dra/test_release_messages.py
#: holds it to the generated data.
EXAMPLE_RELEASE = "1.37.2"

APISERVER = "kube-apiserver"
CONTROLLER_MANAGER = "kube-controller-manager"
SCHEDULER = "kube-scheduler"
KUBELET = "kubelet"
COMPONENTS = (APISERVER, CONTROLLER_MANAGER, SCHEDULER, KUBELET)
_ALL = frozenset(COMPONENTS)

ALPHA = "alpha"
BETA = "beta"
GA = "ga"
DEPRECATED = "deprecated"

RESOURCE_GROUP = "resource.k8s.io"
DRA_GATE = "DynamicResourceAllocation"
#: Kubernetes declares gate dependencies (``defaultKubernetesFeatureGateDependencies``)
#: and refuses to start a component that enables a gate whose dependency is disabled,
#: from this minor on (``AddDependencies`` first appears in pkg/features in v1.35).
DEPENDENCIES_DECLARED_SINCE = 35

# --------------------------------------------------------------------------------------
# Errors
# --------------------------------------------------------------------------------------


class VersionModelError(Refused):
    """A wish the model cannot satisfy, with the reason and the fix.

    Attributes: ``reason`` (what is wrong, naming the value), ``fix`` (what to do).
    ``str(error)`` is ``"<reason> Fix: <fix>"`` (``messages.with_fix``).
    """


class VersionParseError(VersionModelError):
    """Malformed input (a version string, a ``NAME=true|false`` entry): not a wish at all."""


# --------------------------------------------------------------------------------------
# Versions
# --------------------------------------------------------------------------------------

_VERSION_RE = re.compile(
    r"^v?(\d+)\.(\d+)(?:\.(\d+))?(?:-([0-9A-Za-z.\-]+))?(?:\+[0-9A-Za-z.\-]+)?\Z"
)


@dataclass(frozen=True, order=True)
class KubeVersion:
    """A Kubernetes version. ``patch`` is None when only the minor was given ("1.35")."""

    major: int
    minor: int
    patch: int | None = None
    pre: str | None = None

    @property
    def minor_version(self) -> str:
        """``"1.35"``."""
        return f"{self.major}.{self.minor}"

    def __str__(self) -> str:
        text = self.minor_version
        if self.patch is not None:
            text += f".{self.patch}"
        if self.pre:
            text += "-" + self.pre
        return text


VersionLike = Union[str, KubeVersion]  # noqa: UP007 (evaluated at run time on managed hosts)


def example_release() -> str:
    """``"1.37.2"``: the release every message gives as its example (``EXAMPLE_RELEASE``)."""
    return EXAMPLE_RELEASE


def _version_fix() -> str:
    ex = example_release()
    return f"give MAJOR.MINOR[.PATCH] with an optional leading v, e.g. {ex} or v{ex}."


def parse_version(value: VersionLike, name: str = "version") -> KubeVersion:
    """Parse ``"1.35"``, ``"1.35.0"``, ``"v1.35.0"`` or ``"v1.35.0-rc.1"`` into a KubeVersion.

    Raises VersionParseError naming ``name`` and the bad value when it is not a version, or
    when its major is not 1. The range of the model is not checked here.
    """
    if isinstance(value, KubeVersion):
        return value
    if not isinstance(value, str):
        raise VersionParseError(
            f"{name}={value!r} is not a Kubernetes version string.",
            _version_fix(),
        )
    match = _VERSION_RE.match(value.strip())
    if not match:
        raise VersionParseError(
            f"{name}={value!r} is not a Kubernetes version.",
            _version_fix(),
        )
    major, minor = int(match.group(1)), int(match.group(2))
    patch = int(match.group(3)) if match.group(3) is not None else None
    if major != 1:
        raise VersionParseError(
            f"{name}={value!r} has major version {major}; Kubernetes versions are 1.x.",
            f"give a version such as {example_release()}.",
        )
    return KubeVersion(major, minor, patch, match.group(4))


def _in_model(version: VersionLike, name: str = "version") -> KubeVersion:
    v = parse_version(version, name)
    if not MIN_MINOR <= v.minor <= MAX_MINOR:
        raise VersionModelError(
            f"{name}={v} is outside the DRA version model ({_mv(MIN_MINOR)} to {_mv(MAX_MINOR)}).",
            f"use a Kubernetes release from {_mv(MIN_MINOR)} to {_mv(MAX_MINOR)}.",
        )
    return v


def _mv(minor: int) -> str:
    return f"1.{minor}"
