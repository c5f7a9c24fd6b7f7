# Copyright: gpufleet contributors
# Apache License 2.0 (see LICENSE)
"""What each Kubernetes release's own source says: the generated per-release facts.

One data module per minor (``releases/v1_<minor>.py``), written by
``python -m gpufleet.build.release_facts generate`` from ``lab/go/featuredump`` built against
``k8s.io/kubernetes`` at that release. This module only reads them; every decision is
made in the other parts of ``dra/``. Standard library only (Ansible ships module_utils to hosts).

Shapes:

* ``ReleaseFacts.gates``: gate name -> ``GateFacts`` (``specs``: ``SpecFacts`` in the
  order Kubernetes registers them; ``dependencies``: the gates Kubernetes declares it
  needs, from 1.35);
* ``ReleaseFacts.component_gates``: component -> gates only it registers (from
  ``k8s.io/controller-manager/pkg/features`` for kube-controller-manager);
* ``ReleaseFacts.resource``: ``resource.k8s.io`` version -> ``ApiFacts`` (listed in
  kube-apiserver's DefaultAPIResourceConfigSource, on by default, kinds, lifecycle);
* ``ReleaseFacts.group_versions``: every group/version kube-apiserver's scheme registers
  (``"apps/v1"``, core as ``"v1"``), the names ``--runtime-config`` accepts;
* ``ReleaseFacts.kubeadm``: ``KubeadmFacts`` (registered, old with the kubeadm release
  to migrate with, deprecated, experimental).
"""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass, field

from ansible_collections.gpufleet.cluster.plugins.module_utils.dra.releases import (
    v1_31,
    v1_32,
    v1_33,
    v1_34,
    v1_35,
    v1_36,
    v1_37,
    v1_38,
)

_MODULES = (
    v1_31,
    v1_32,
    v1_33,
    v1_34,
    v1_35,
    v1_36,
    v1_37,
    v1_38,
)


@dataclass(frozen=True)
class SpecFacts:
    """One versioned spec: ``since`` minor ("1.33" -> 33), ``stage`` (alpha, beta, ga,
    deprecated), ``default``, ``locked``, ``min_compat`` minor or None."""

    since: int
    stage: str
    default: bool
    locked: bool
    min_compat: int | None


@dataclass(frozen=True)
class GateFacts:
    name: str
    specs: tuple[SpecFacts, ...]
    dependencies: tuple[str, ...]


@dataclass(frozen=True)
class ApiFacts:
    """``served``: in DefaultAPIResourceConfigSource (enabled or disabled by default);
    ``removed``/``deprecated``: the minor the kinds' prerelease lifecycle names, or None."""

    version: str
    served: bool
    enabled_by_default: bool
    registered: bool
    kinds: tuple[str, ...]
    removed: int | None
    deprecated: int | None
    resource_defaults: tuple[tuple[str, bool], ...]


@dataclass(frozen=True)
class KubeadmFacts:
    """``old``: group-version -> kubeadm release to migrate with ("v1.36")."""

    registered: tuple[str, ...]
    old: tuple[tuple[str, str], ...]
    deprecated: tuple[str, ...]
    experimental: tuple[str, ...]


@dataclass(frozen=True)
class ReleaseFacts:
    """``gates``: every gate all four components register; ``component_gates``: component ->
    gates only that component registers (kube-controller-manager's own)."""

    release: str
    minor: int
    prerelease: bool
    dependencies_declared: bool
    gates: dict
    resource: dict
    kubeadm: KubeadmFacts
    component_gates: dict
    group_versions: frozenset = frozenset()
    #: gate -> {"lock"|"remove": minor}: what the release's own source comments announce
    #: for later minors (``release_facts.announced_lifecycle``).
    announced: dict = field(default_factory=dict)

    def gate(self, name: str) -> GateFacts | None:
        """``name``'s facts from the shared table or a component's own, or None."""
        found = self.gates.get(name)
        if found is not None:
            return found
        for table in self.component_gates.values():
            if name in table:
                return table[name]
        return None

    def registered_by(self, name: str) -> frozenset | None:
        """The components that register ``name``: None for all of them (or for a gate this
        release does not register), else the components whose own table holds it."""
        if name in self.gates:
            return None
        owners = frozenset(c for c, table in self.component_gates.items() if name in table)
        return owners or None

    def all_names(self) -> frozenset:
        return frozenset(self.gates) | frozenset(
            n for table in self.component_gates.values() for n in table
        )


def _minor(text: str | None) -> int | None:
    if text is None:
        return None
    return int(str(text).split(".")[1])


def _gate_table(table: dict) -> dict:
    return {
        name: GateFacts(
            name,
            tuple(
                SpecFacts(_minor(s[0]) or 0, s[1], bool(s[2]), bool(s[3]), _minor(s[4]))
                for s in specs
            ),
            tuple(deps),
        )
        for name, (specs, deps) in table.items()
    }


def _load(module) -> ReleaseFacts:
    data = json.loads(module.FACTS_JSON)
    gates = _gate_table(data["gates"])
    resource = {
        ver: ApiFacts(
            ver,
            bool(a["served"]),
            bool(a["enabledByDefault"]),
            bool(a["registered"]),
            tuple(a["kinds"]),
            _minor(a["removed"]),
            _minor(a["deprecated"]),
            tuple(sorted(a["resourceDefaults"].items())),
        )
        for ver, a in data["resource"].items()
    }
    k = data["kubeadm"]
    return ReleaseFacts(
        release=data["release"],
        minor=_minor(data["release"]) or 0,
        prerelease="-" in data["release"],
        dependencies_declared=bool(data["dependenciesDeclared"]),
        gates=gates,
        resource=resource,
        kubeadm=KubeadmFacts(
            tuple(k["registered"]),
            tuple(sorted(k["old"].items())),
            tuple(k["deprecated"]),
            tuple(k["experimental"]),
        ),
        component_gates={
            component: _gate_table(table)
            for component, table in data.get("componentGates", {}).items()
        },
        group_versions=frozenset(data.get("groupVersions", ())),
        announced={
            gate: {step: _minor(when) for step, when in steps.items()}
            for gate, steps in data.get("announced", {}).items()
        },
    )


@functools.cache
def releases() -> dict:
    """minor -> ReleaseFacts, for every generated release (oldest first)."""
    out = {}
    for module in _MODULES:
        facts = _load(module)
        out[facts.minor] = facts
    return dict(sorted(out.items()))


def release(minor: int) -> ReleaseFacts | None:
    """The facts of ``minor``, or None when no release of it is generated."""
    return releases().get(minor)


def oldest_minor() -> int:
    return min(releases())


def newest_minor() -> int:
    return max(releases())


@functools.cache
def all_gate_names() -> frozenset:
    """Every gate name any generated release registers."""
    return frozenset(name for r in releases().values() for name in r.all_names())


@functools.cache
def presence(name: str) -> tuple:
    """The generated minors that register ``name``, oldest first."""
    return tuple(m for m, r in releases().items() if r.gate(name) is not None)


def removed_in(name: str, minor: int) -> int | None:
    """The first generated minor at or before ``minor`` that no longer registers ``name``
    after an earlier one did; None when ``name`` is registered at ``minor`` or never was
    before it."""
    present = [m for m in presence(name) if m <= minor]
    if not present:
        return None
    later = [m for m in releases() if present[-1] < m <= minor]
    return later[0] if later else None


def latest_gate_facts(name: str, minor: int) -> GateFacts | None:
    """The specs of ``name`` as the newest generated release up to ``minor`` (or, for a
    minor older than every generated release, the oldest one) registers them."""
    for m in sorted(releases(), reverse=True):
        if m <= max(minor, oldest_minor()) and releases()[m].gate(name) is not None:
            return releases()[m].gate(name)
    return None
