# Copyright: gpufleet contributors
# Apache License 2.0 (see LICENSE)
"""Kueue quota objects from inventory variables: device-class mappings, ResourceFlavor,
Cohorts, ClusterQueues, LocalQueues and WorkloadPriorityClasses.

Standard library only. Every function is pure: it reads the ``kueue_*`` variables (shapes
in ``roles/kueue/meta/argument_specs.yml``) and returns Kubernetes objects as dicts, or
raises :class:`KueueInputError` naming the variable, the value and a fix.

The quota model (Kueue's own, ``apis/kueue/v1beta2``): a *resource* is a name a quota is
counted in. For DRA devices it is a device-class mapping of Kueue's Configuration
(``resources.deviceClassMappings``): here every DeviceClass maps to a resource of its own
name, so a quota on ``mig.nvidia.com`` counts the devices claimed through DeviceClass
``mig.nvidia.com``. Kueue refuses CEL selectors in counted claims (``kueue.versions``), so
a quota per MIG profile needs a DeviceClass per profile: :func:`profile_device_class`
(``mig-1g.18gb.gpufleet.io``, selector on the driver's ``profile`` attribute).

A team gets a ClusterQueue (its quota: ``nominalQuota`` per resource, ``borrowingLimit``,
``lendingLimit``; its preemption policy; its cohort) and a LocalQueue of the same name in
its namespace, which Jobs name with the ``kueue.x-k8s.io/queue-name`` label.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ansible_collections.gpufleet.cluster.plugins.module_utils.common import k8s_names as kn
from ansible_collections.gpufleet.cluster.plugins.module_utils.dra_driver.chart import (
    MIG_CLASS,
    NVIDIA_DRIVER,
)
from ansible_collections.gpufleet.cluster.plugins.module_utils.kueue import versions as kv
from ansible_collections.gpufleet.cluster.plugins.module_utils.mig.profiles import parse_profile

__all__ = [
    "KueueInputError",
    "Quota",
    "Team",
    "device_class_mappings",
    "parse_teams",
    "profile_device_class",
    "profile_device_class_object",
    "queue_objects",
]

#: Suffix of the per-profile DeviceClasses this collection creates.
PROFILE_CLASS_SUFFIX = ".gpufleet.io"
#: Label on every object the kueue role creates (what it may prune or list).
MANAGED_LABEL = "gpufleet.io/managed-by"
#: Kueue's limits on the mappings (pkg/config/validation.go, validateDeviceClassMappings).
MAX_MAPPINGS = 16
MAX_CLASSES_PER_MAPPING = 8

RECLAIM_POLICIES = ("Never", "LowerPriority", "Any")
WITHIN_CQ_POLICIES = ("Never", "LowerPriority", "LowerOrNewerEqualPriority")
BORROW_POLICIES = ("Never", "LowerPriority")


class KueueInputError(ValueError):
    """Bad ``kueue_*`` input: ``variable``, ``value``, ``problem`` and ``fix``."""

    def __init__(self, variable: str, value: Any, problem: str, fix: str) -> None:
        self.variable, self.value, self.problem, self.fix = variable, value, problem, fix
        super().__init__(f"{variable}={value!r}: {problem}; fix: {fix}")


@dataclass(frozen=True)
class Quota:
    """One resource of a team: ``nominal`` devices (or units), and the optional
    ``borrowing_limit`` / ``lending_limit`` (None: no limit, Kueue's default)."""

    resource: str
    nominal: int
    borrowing_limit: int | None = None
    lending_limit: int | None = None


@dataclass(frozen=True)
class Team:
    """A team's ClusterQueue and LocalQueue: ``name`` (both objects), ``namespace`` (of the
    LocalQueue), ``cohort`` (empty: none), ``quotas``, and ``preemption`` (Kueue's
    ``ClusterQueuePreemption`` fields)."""

    name: str
    namespace: str
    cohort: str
    quotas: tuple[Quota, ...]
    preemption: Mapping[str, Any] = field(default_factory=dict)


def profile_device_class(profile: str) -> str:
    """``1g.18gb`` -> ``mig-1g.18gb.gpufleet.io``; raises KueueInputError for a name that is
    a GPU-instance profile as nvidia-smi prints it (``mig.profiles.parse_profile``)."""
    parsed = parse_profile(profile)
    if parsed is None or parsed.ci_slices is not None:
        raise KueueInputError(
            "kueue_profile_classes",
            profile,
            "is not a MIG profile name",
            "give the name nvidia-smi mig -lgip prints, e.g. 1g.18gb",
        )
    return "mig-" + profile.replace("+", "-") + PROFILE_CLASS_SUFFIX


def profile_device_class_object(profile: str, resource_api: str) -> dict[str, Any]:
    """The DeviceClass of one MIG profile, in ``resource_api`` (``resource.k8s.io/v1``):
    the MIG class's selector (``type == 'mig'``, as the NVIDIA driver's
    ``mig.nvidia.com``) and the driver's ``profile`` attribute."""
    expression = (
        f"device.driver == '{NVIDIA_DRIVER}' && device.attributes['{NVIDIA_DRIVER}'].type == "
        f"'mig' && device.attributes['{NVIDIA_DRIVER}'].profile == '{profile}'"
    )
    return {
        "apiVersion": resource_api,
        "kind": "DeviceClass",
        "metadata": {"name": profile_device_class(profile), "labels": {MANAGED_LABEL: "kueue"}},
        "spec": {"selectors": [{"cel": {"expression": expression}}]},
    }


def device_class_mappings(
    device_classes: Sequence[str], profiles: Sequence[str] = ()
) -> list[dict[str, Any]]:
    """Kueue's ``resources.deviceClassMappings``: one resource per DeviceClass, named as
    the class, for ``device_classes`` and the class of each of ``profiles``. Raises
    KueueInputError past Kueue's limit of 16 mappings or for a duplicate."""
    names = list(device_classes) + [profile_device_class(p) for p in profiles]
    if len(set(names)) != len(names):
        dup = sorted({n for n in names if names.count(n) > 1})
        raise KueueInputError(
            "kueue_device_classes", dup, "names a DeviceClass twice", "list each class once"
        )
    if len(names) > MAX_MAPPINGS:
        raise KueueInputError(
            "kueue_profile_classes",
            list(profiles),
            f"makes {len(names)} device-class mappings; Kueue accepts {MAX_MAPPINGS}",
            "give per-profile quotas only for the profiles teams are charged for",
        )
    return [{"name": n, "deviceClassNames": [n]} for n in names]


def _int(variable: str, value: Any, minimum: int = 0) -> int:
    if isinstance(value, bool) or not isinstance(value, int | str):
        raise KueueInputError(variable, value, "is not a whole number", "write a count, e.g. 4")
    try:
        number = int(str(value).strip())
    except ValueError:
        raise KueueInputError(
            variable, value, "is not a whole number", "write a count of devices, e.g. 4"
        ) from None
    if number < minimum:
        raise KueueInputError(variable, value, f"is below {minimum}", f"write {minimum} or more")
    return number


def _name(variable: str, value: Any) -> str:
    why = kn.dns1123_label(value)
    if why:
        raise KueueInputError(
            variable,
            value,
            why,
            "use lower-case letters, digits and '-', at most 63 characters, e.g. team-a",
        )
    return value


def _quotas(where: str, raw: Any) -> tuple[Quota, ...]:
    if not isinstance(raw, Mapping) or not raw:
        raise KueueInputError(
            where,
            raw,
            "is not a map of resource -> quota",
            f"write e.g. {{{MIG_CLASS}: {{nominal: 4, borrowing_limit: 2}}}}",
        )
    out = []
    for resource in sorted(raw):
        spec = raw[resource]
        here = f"{where}.{resource}"
        if not isinstance(spec, Mapping):
            spec = {"nominal": spec}
        unknown = sorted(set(spec) - {"nominal", "borrowing_limit", "lending_limit"})
        if unknown:
            raise KueueInputError(
                f"{here}.{unknown[0]}",
                spec[unknown[0]],
                "is not a quota key",
                "use nominal, borrowing_limit and lending_limit",
            )
        if "nominal" not in spec:
            raise KueueInputError(here, dict(spec), "has no nominal", "add nominal: <count>")
        nominal = _int(f"{here}.nominal", spec["nominal"])
        limits = {}
        for key in ("borrowing_limit", "lending_limit"):
            value = spec.get(key)
            limits[key] = None if value is None else _int(f"{here}.{key}", value)
        lending = limits["lending_limit"]
        if lending is not None and lending > nominal:
            raise KueueInputError(
                f"{here}.lending_limit",
                lending,
                f"is more than nominal ({nominal}); Kueue refuses it",
                f"lend at most {nominal}",
            )
        out.append(Quota(str(resource), nominal, limits["borrowing_limit"], lending))
    return tuple(out)


def _preemption(where: str, raw: Any) -> dict[str, Any]:
    raw = raw or {}
    if not isinstance(raw, Mapping):
        raise KueueInputError(where, raw, "is not a map", "write {reclaim_within_cohort: Any}")
    out: dict[str, Any] = {}
    for key, api, allowed in (
        ("reclaim_within_cohort", "reclaimWithinCohort", RECLAIM_POLICIES),
        ("within_cluster_queue", "withinClusterQueue", WITHIN_CQ_POLICIES),
    ):
        if key in raw:
            if raw[key] not in allowed:
                raise KueueInputError(
                    f"{where}.{key}", raw[key], "is not a Kueue policy", f"one of {allowed}"
                )
            out[api] = raw[key]
    if "borrow_within_cohort" in raw:
        policy = raw["borrow_within_cohort"]
        if policy not in BORROW_POLICIES:
            raise KueueInputError(
                f"{where}.borrow_within_cohort", policy, "is not a Kueue policy", BORROW_POLICIES
            )
        bwc: dict[str, Any] = {"policy": policy}
        if raw.get("max_priority_threshold") is not None:
            bwc["maxPriorityThreshold"] = _int(
                f"{where}.max_priority_threshold", raw["max_priority_threshold"], -(2**31)
            )
        out["borrowWithinCohort"] = bwc
    unknown = sorted(
        set(raw)
        - {
            "reclaim_within_cohort",
            "within_cluster_queue",
            "borrow_within_cohort",
            "max_priority_threshold",
        }
    )
    if unknown:
        raise KueueInputError(
            f"{where}.{unknown[0]}",
            raw[unknown[0]],
            "is not a preemption key",
            "use reclaim_within_cohort, within_cluster_queue, borrow_within_cohort, "
            "max_priority_threshold",
        )
    return out


def parse_teams(raw: Any) -> list[Team]:
    """``kueue_teams`` -> teams. Each item: ``name``, ``namespace`` (default the name),
    ``cohort`` (default none), ``quotas`` (resource -> ``{nominal, borrowing_limit,
    lending_limit}`` or a bare count), ``preemption``. Raises KueueInputError."""
    if not isinstance(raw, Sequence) or isinstance(raw, str | bytes):
        raise KueueInputError("kueue_teams", raw, "is not a list", "write a list of teams")
    teams = []
    seen: set[str] = set()
    for i, item in enumerate(raw):
        where = f"kueue_teams[{i}]"
        if not isinstance(item, Mapping):
            raise KueueInputError(where, item, "is not a map", "write {name: team-a, quotas: ...}")
        name = _name(f"{where}.name", item.get("name"))
        if name in seen:
            raise KueueInputError(f"{where}.name", name, "is used twice", "give each team a name")
        seen.add(name)
        cohort = item.get("cohort") or ""
        if cohort:
            _name(f"{where}.cohort", cohort)
        teams.append(
            Team(
                name=name,
                namespace=_name(f"{where}.namespace", item.get("namespace") or name),
                cohort=cohort,
                quotas=_quotas(f"{where}.quotas", item.get("quotas")),
                preemption=_preemption(f"{where}.preemption", item.get("preemption")),
            )
        )
    return teams


def _cluster_queue(team: Team, flavor: str, api: str) -> dict[str, Any]:
    resources = []
    for q in team.quotas:
        # Quantities as strings, as the API server stores them: an integer is stored as
        # the string on create, so a re-apply of an integer changes the ClusterQueue.
        entry: dict[str, Any] = {"name": q.resource, "nominalQuota": str(q.nominal)}
        if q.borrowing_limit is not None:
            entry["borrowingLimit"] = str(q.borrowing_limit)
        if q.lending_limit is not None:
            entry["lendingLimit"] = str(q.lending_limit)
        resources.append(entry)
    spec: dict[str, Any] = {
        "namespaceSelector": {
            "matchLabels": {"kubernetes.io/metadata.name": team.namespace},
        },
        "resourceGroups": [
            {
                "coveredResources": [q.resource for q in team.quotas],
                "flavors": [{"name": flavor, "resources": resources}],
            }
        ],
    }
    if team.cohort:
        spec["cohortName"] = team.cohort
    if team.preemption:
        spec["preemption"] = dict(team.preemption)
    return {
        "apiVersion": api,
        "kind": "ClusterQueue",
        "metadata": {"name": team.name, "labels": {MANAGED_LABEL: "kueue"}},
        "spec": spec,
    }


def queue_objects(
    release: kv.KueueRelease,
    teams: Sequence[Team],
    *,
    flavor: str = "gpu",
    flavor_node_labels: Mapping[str, str] | None = None,
    cohorts: Sequence[Mapping[str, Any]] = (),
    priority_classes: Sequence[Mapping[str, Any]] = (),
) -> list[dict[str, Any]]:
    """The Kueue objects of the quota model, in apply order: WorkloadPriorityClasses,
    the ResourceFlavor ``flavor`` (``nodeLabels``: where its devices are), Cohorts (those
    of ``cohorts`` with their ``parent``, and every cohort a team names), then per team
    its ClusterQueue and LocalQueue. In ``release.kueue_api``. Raises KueueInputError."""
    api = release.kueue_api
    labels = {MANAGED_LABEL: "kueue"}
    out: list[dict[str, Any]] = []
    for i, pc in enumerate(priority_classes):
        out.append(
            {
                "apiVersion": api,
                "kind": "WorkloadPriorityClass",
                "metadata": {
                    "name": _name(f"kueue_priority_classes[{i}].name", pc.get("name")),
                    "labels": labels,
                },
                "value": _int(f"kueue_priority_classes[{i}].value", pc.get("value"), -(2**31)),
                "description": str(pc.get("description") or ""),
            }
        )
    rf: dict[str, Any] = {
        "apiVersion": api,
        "kind": "ResourceFlavor",
        "metadata": {"name": _name("kueue_flavor", flavor), "labels": labels},
        "spec": {},
    }
    if flavor_node_labels:
        rf["spec"]["nodeLabels"] = dict(flavor_node_labels)
    out.append(rf)
    named: dict[str, str] = {}
    for i, c in enumerate(cohorts):
        name = _name(f"kueue_cohorts[{i}].name", c.get("name"))
        parent = c.get("parent") or ""
        if parent:
            _name(f"kueue_cohorts[{i}].parent", parent)
        named[name] = parent
    for team in teams:
        if team.cohort:
            named.setdefault(team.cohort, "")
    for name in sorted(named):
        spec = {"parentName": named[name]} if named[name] else {}
        out.append(
            {
                "apiVersion": api,
                "kind": "Cohort",
                "metadata": {"name": name, "labels": labels},
                "spec": spec,
            }
        )
    for team in teams:
        out.append(_cluster_queue(team, flavor, api))
        out.append(
            {
                "apiVersion": api,
                "kind": "LocalQueue",
                "metadata": {"name": team.name, "namespace": team.namespace, "labels": labels},
                "spec": {"clusterQueue": team.name},
            }
        )
    return out
