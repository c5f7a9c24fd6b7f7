# Copyright: gpufleet contributors
# Apache License 2.0 (see LICENSE)
"""Kueue quotas judged against the devices a fleet publishes: before provisioning (from
the inventory's MIG layouts) and on a running cluster (from ResourceSlices and Kueue's
own objects).

Standard library only; pure functions over plain data.

What a fleet publishes, per host (``host_devices``): NVIDIA's DRA driver publishes one
device per whole GPU (DeviceClass ``gpu.nvidia.com``) and one per MIG device
(``mig.nvidia.com``; a GPU in MIG mode publishes its MIG devices, not itself). A host's
GPUs carry the layout of ``mig_layout`` (the same on each GPU of ``mig_devices``) or of
``mig_config_name`` in its mig-parted config (per GPU index); with neither, every GPU is
whole. The per-profile DeviceClasses of ``kueue.queues.profile_device_class`` select the
MIG devices of one profile.

With dynamic MIG (the DRA driver's ``DynamicMIG``) a GPU publishes itself and every MIG
profile at every placement, all consuming one CounterSet: alternatives, not capacity. Such
a GPU counts as 1 whole GPU plus, per MIG profile, the most of its devices allocatable at
once (``GIProfile.max_instances`` before provisioning; ``claims.counters.most_at_once`` of
the published counters on a cluster), and ``mig.nvidia.com`` as the largest of those: a
mix of profiles never holds more MIG devices than the smallest profile alone.

Preflight (:func:`check_quotas`), each finding ``(severity, variable, value, message,
fix)``:

* error: a quota on a DeviceClass that is neither published by the driver nor a mapped
  per-profile class, or on a profile class whose profile no layout carves, or on a
  class of which the layouts publish no device (``gpu.nvidia.com`` on an all-MIG fleet);
  a per-profile class asked for a profile no layout carves;
* warning: a team's nominal quota larger than the devices the fleet publishes (it can
  never be used in full), and the sum of the teams' nominal quotas of a resource larger
  than the fleet (the cohort promises more than exists), naming the team(s) and resource.

While a dynamic-MIG GPU's MIG devices are unknown (``FleetDevices.mig_unknown``), quotas on
``mig.nvidia.com`` and the per-profile classes are not judged (the caller says why).

Validate (:func:`validate_checks`) makes checks in the ``kueue`` area of the report.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ansible_collections.gpufleet.cluster.plugins.module_utils.common import limits as ig
from ansible_collections.gpufleet.cluster.plugins.module_utils.dra_driver import chart as ddc
from ansible_collections.gpufleet.cluster.plugins.module_utils.kueue import queues as kq

ERROR = "error"
WARNING = "warning"
#: Resources that are not device classes: Kueue counts them from pod requests.
CORE_RESOURCES = ("cpu", "memory", "ephemeral-storage", "pods")


@dataclass
class FleetDevices:
    """Devices the fleet publishes: ``whole`` GPUs, MIG devices per ``profiles``, the
    ``hosts`` each comes from (for messages); ``dynamic_mig`` the ``mig.nvidia.com``
    devices of dynamic-MIG GPUs (the largest per-profile count of each GPU, which
    ``profiles`` holds too: their profiles are alternatives, so the class total is not
    the sum of ``profiles``) and ``dynamic_profiles`` the share of ``profiles`` that comes
    from those GPUs; ``mig_unknown`` the dynamic-MIG GPUs whose MIG devices are unknown
    (no profile table for their model)."""

    whole: int = 0
    profiles: Counter = field(default_factory=Counter)
    hosts: int = 0
    dynamic_mig: int = 0
    dynamic_profiles: Counter = field(default_factory=Counter)
    mig_unknown: int = 0

    @property
    def mig(self) -> int:
        """Devices of ``mig.nvidia.com``: every MIG device of a static layout, plus the
        most at once of each dynamic-MIG GPU."""
        return sum(self.profiles.values()) - sum(self.dynamic_profiles.values()) + self.dynamic_mig

    def count(self, resource: str, profile_classes: Mapping[str, str]) -> int | None:
        """Devices of DeviceClass ``resource``; None for a class this model does not know,
        and for a MIG class while ``mig_unknown`` GPUs leave the MIG devices unknown."""
        if resource == ddc.GPU_CLASS:
            return self.whole
        if self.mig_unknown and (resource == ddc.MIG_CLASS or resource in profile_classes):
            return None
        if resource == ddc.MIG_CLASS:
            return self.mig
        if resource in profile_classes:
            return self.profiles.get(profile_classes[resource], 0)
        return None


def host_devices(
    gpu_count: int,
    layouts: Mapping[int, Mapping[str, int]],
    dynamic: Mapping[str, int] | None = None,
) -> FleetDevices:
    """What one host with ``gpu_count`` GPUs publishes; ``layouts`` maps a GPU index to its
    MIG devices ``{profile: count}`` (a GPU absent or with ``{}`` is whole).

    ``dynamic``: for a host whose DRA driver runs ``DynamicMIG``, ``{profile: most
    instances at once}`` of its GPU model (``GIProfile.max_instances``); ``layouts`` is
    then not read (the mig role refuses a layout there). Each GPU counts as 1 whole GPU,
    that many devices of each profile, and ``max(dynamic.values())`` MIG devices; an empty
    mapping (model without a profile table) counts its GPUs in ``mig_unknown``."""
    out = FleetDevices(hosts=1)
    if dynamic is not None:
        at_once = {p: int(n) for p, n in dynamic.items() if int(n) > 0}
        out.whole = gpu_count
        if not at_once:
            out.mig_unknown = gpu_count
            return out
        for _unused in range(gpu_count):
            out.profiles.update(at_once)
            out.dynamic_profiles.update(at_once)
        out.dynamic_mig = gpu_count * max(at_once.values())
        return out
    for index in range(gpu_count):
        layout = {p: int(n) for p, n in (layouts.get(index) or {}).items() if int(n) > 0}
        if layout:
            out.profiles.update(layout)
        else:
            out.whole += 1
    return out


def fleet_devices(hosts: Iterable[FleetDevices]) -> FleetDevices:
    """The sum over ``hosts``."""
    out = FleetDevices()
    for h in hosts:
        out.whole += h.whole
        out.profiles.update(h.profiles)
        out.hosts += h.hosts
        out.dynamic_mig += h.dynamic_mig
        out.dynamic_profiles.update(h.dynamic_profiles)
        out.mig_unknown += h.mig_unknown
    return out


def _is_device_class(resource: str) -> bool:
    return resource not in CORE_RESOURCES and "/" not in resource and "." in resource


def check_quotas(
    teams: Sequence[kq.Team],
    fleet: FleetDevices,
    device_classes: Sequence[str],
    profiles: Sequence[str],
) -> list[tuple[str, str, Any, str, str]]:
    """Preflight findings for ``teams`` (parsed ``kueue_teams``) against ``fleet``, with
    the mapped ``device_classes`` (``kueue_device_classes``) and per-profile
    ``profiles`` (``kueue_profile_classes``); see the module docstring."""
    out: list[tuple[str, str, Any, str, str]] = []
    carved = sorted(p for p, n in fleet.profiles.items() if n > 0)
    profile_classes = {}
    for i, profile in enumerate(profiles):
        name = kq.profile_device_class(profile)
        profile_classes[name] = profile
        if profile not in carved and not fleet.mig_unknown:
            out.append(
                (
                    ERROR,
                    f"kueue_profile_classes[{i}]",
                    profile,
                    f"no MIG layout of the inventory carves {profile} and no dynamic-MIG GPU "
                    f"publishes it; its DeviceClass {name} would select no device",
                    "choose among the profiles the layouts carve or the dynamic-MIG GPUs "
                    "publish: " + (", ".join(carved) or "none"),
                )
            )
    mapped = set(device_classes) | set(profile_classes)
    totals: dict[str, list[tuple[str, int]]] = {}
    for t, team in enumerate(teams):
        for q in team.quotas:
            var = f"kueue_teams[{t}].quotas.{q.resource}"
            if not _is_device_class(q.resource):
                continue
            if q.resource not in mapped:
                out.append(
                    (
                        ERROR,
                        var,
                        q.nominal,
                        f"team {team.name}: {q.resource} is not a DeviceClass the DRA driver "
                        "publishes nor a per-profile class; Kueue would never count a device "
                        "against it",
                        "use one of " + ", ".join(sorted(mapped)) + ", or add the MIG profile "
                        "to kueue_profile_classes (its class is mig-<profile>.gpufleet.io)",
                    )
                )
                continue
            published = fleet.count(q.resource, profile_classes)
            if published is None:  # a mapped class of another kind (vfio, ...): not judged
                continue
            if published == 0:
                out.append(
                    (
                        ERROR,
                        var,
                        q.nominal,
                        f"team {team.name}: the inventory's MIG layouts publish no device of "
                        f"{q.resource} on any of {fleet.hosts} GPU host(s)",
                        f"quota a class the layouts publish (whole GPUs: {ddc.GPU_CLASS}, MIG "
                        f"devices: {ddc.MIG_CLASS}) or change the layouts",
                    )
                )
                continue
            totals.setdefault(q.resource, []).append((team.name, q.nominal))
            if q.nominal > published:
                out.append(
                    (
                        WARNING,
                        var,
                        q.nominal,
                        f"team {team.name}: nominal quota {q.nominal} of {q.resource} is more "
                        f"than the {published} the fleet can ever publish",
                        f"lower it to {published} or less, or add GPUs to the fleet",
                    )
                )
    for resource, entries in sorted(totals.items()):
        total = sum(n for _unused, n in entries)
        published = fleet.count(resource, profile_classes) or 0
        if len(entries) > 1 and total > published:
            names = ", ".join(f"{name} {n}" for name, n in entries)
            out.append(
                (
                    WARNING,
                    "kueue_teams",
                    dict(entries),
                    f"the teams' nominal quotas of {resource} add up to {total} ({names}), "
                    f"more than the {published} devices the fleet publishes",
                    "keep the sum of nominal quotas at or below the published devices; lend "
                    "idle quota through a cohort instead",
                )
            )
    return out


# ------------------------------------------------------------------ validate


@dataclass
class KueueListing:
    """What validate reads for Kueue: the manager ``deployment`` (None: absent), its
    ``config`` (the parsed Configuration, None: unreadable), the cluster's
    ``device_classes`` (names), ``devices`` (``report.fleet.Device`` list), and Kueue's
    ``cluster_queues``, ``local_queues``, ``workloads`` and ``pods`` (dicts); ``at_once``
    the per-profile devices allocatable at once of each CounterSet (``published_counts``;
    empty when no device consumes counters)."""

    deployment: Mapping[str, Any] | None
    config: Mapping[str, Any] | None
    device_classes: Sequence[str]
    devices: Sequence[Any]
    cluster_queues: Sequence[Mapping[str, Any]]
    local_queues: Sequence[Mapping[str, Any]]
    workloads: Sequence[Mapping[str, Any]]
    pods: Sequence[Mapping[str, Any]] = ()
    errors: Mapping[str, str] = field(default_factory=dict)
    at_once: Mapping[str, Mapping[str, int]] = field(default_factory=dict)


def parse_config(text: Any) -> Mapping[str, Any] | None:
    """The Configuration of the manager's ConfigMap: JSON text (as the role writes it) or
    an already parsed mapping; None when it does not read as JSON."""
    if isinstance(text, Mapping):
        return text
    if not isinstance(text, str | bytes):
        return None
    try:
        out = ig.load_json(
            text if isinstance(text, str) else text.decode("utf-8", "replace"),
            "the Kueue Configuration",
        )
    except ig.InputError:
        return None
    return out if isinstance(out, Mapping) else None


def mappings_of(config: Mapping[str, Any] | None, field_path: str) -> dict[str, list[str]]:
    """``{resource: [device classes]}`` of the Configuration's mappings at ``field_path``."""
    node: Any = config or {}
    for key in field_path.split("."):
        node = node.get(key) if isinstance(node, Mapping) else None
    out: dict[str, list[str]] = {}
    for m in node or []:
        if isinstance(m, Mapping) and isinstance(m.get("name"), str):
            out[m["name"]] = [str(c) for c in m.get("deviceClassNames") or []]
    return out


def _condition(obj: Mapping[str, Any], kind: str) -> Mapping[str, Any] | None:
    for c in (obj.get("status") or {}).get("conditions") or []:
        if isinstance(c, Mapping) and c.get("type") == kind:
            return c
    return None


def _name(obj: Mapping[str, Any]) -> str:
    meta = obj.get("metadata") or {}
    ns = meta.get("namespace")
    return f"{ns}/{meta.get('name')}" if ns else str(meta.get("name"))


def controller_problems(deployment: Mapping[str, Any] | None) -> list[str]:
    """Why the Kueue manager is not ready ([] when ready): absent, or fewer ready replicas
    than wanted."""
    if deployment is None:
        return ["the Deployment kueue-controller-manager does not exist"]
    wanted = int((deployment.get("spec") or {}).get("replicas") or 1)
    ready = int((deployment.get("status") or {}).get("readyReplicas") or 0)
    if ready < wanted:
        return [f"{ready} of {wanted} replicas of kueue-controller-manager are ready"]
    return []


def mapping_problems(
    mappings: Mapping[str, Sequence[str]], device_classes: Sequence[str], expected: Sequence[str]
) -> list[str]:
    """Mappings against the DeviceClasses that exist: every mapped class must exist, and
    every ``expected`` class (the driver's, the per-profile ones) must be mapped."""
    out = []
    existing = set(device_classes)
    mapped = {c for classes in mappings.values() for c in classes}
    for resource, classes in sorted(mappings.items()):
        for c in classes:
            if c not in existing:
                out.append(f"resource {resource} maps DeviceClass {c}, which does not exist")
    for c in expected:
        if c in existing and c not in mapped:
            out.append(
                f"DeviceClass {c} is published but not mapped: Kueue leaves workloads that "
                "claim it inadmissible"
            )
    return out


def local_queue_problems(
    local_queues: Sequence[Mapping[str, Any]], cluster_queues: Sequence[Mapping[str, Any]]
) -> list[tuple[str, str]]:
    """``(local queue, message)`` for each LocalQueue whose ClusterQueue does not exist."""
    names = {(cq.get("metadata") or {}).get("name") for cq in cluster_queues}
    out = []
    for lq in local_queues:
        target = (lq.get("spec") or {}).get("clusterQueue")
        if target not in names:
            out.append((_name(lq), f"points at ClusterQueue {target}, which does not exist"))
    return out


def quota_totals(cluster_queues: Sequence[Mapping[str, Any]]) -> dict[str, dict[str, int]]:
    """``{resource: {cluster queue: nominal}}`` over every flavor of every ClusterQueue
    (quantities read as whole numbers; a fractional or suffixed one counts as 0)."""
    out: dict[str, dict[str, int]] = {}
    for cq in cluster_queues:
        name = str((cq.get("metadata") or {}).get("name"))
        for group in (cq.get("spec") or {}).get("resourceGroups") or []:
            for flavor in group.get("flavors") or []:
                for r in flavor.get("resources") or []:
                    try:
                        n = int(str(r.get("nominalQuota", 0)))
                    except ValueError:
                        n = 0
                    per = out.setdefault(str(r.get("name")), {})
                    per[name] = per.get(name, 0) + n
    return out


def published_counts(
    devices: Iterable[Any],
    profile_classes: Mapping[str, str],
    at_once: Mapping[str, Mapping[str, int]] | None = None,
) -> dict[str, int]:
    """Devices per DeviceClass from ``report.fleet.Device`` records (``kind`` gpu or mig,
    ``profile``, ``counter_set``).

    A device without ``counter_set`` counts once. Devices consuming a CounterSet (a GPU
    of dynamic MIG: the whole GPU and every MIG placement, alternatives of one another)
    count per CounterSet as ``at_once`` gives it (CounterSet id -> ``{profile: most
    allocatable at once on the empty GPU}``, ``claims.counters.profiles_at_once``): 1
    ``gpu.nvidia.com`` when the set has a whole-GPU device, per profile its count, and
    ``mig.nvidia.com`` the largest count of its MIG profiles (a mix of profiles holds no
    more devices than the smallest profile alone: each MIG device takes at least one of
    the GPU's compute slices, and the smallest takes one). A CounterSet missing from ``at_once``
    (its pool does not publish it: the scheduler allocates none of its devices) counts
    nothing."""
    whole, mig = 0, 0
    migs: Counter = Counter()
    shared: dict[str, list[Any]] = {}
    for d in devices:
        if d.counter_set:
            shared.setdefault(d.counter_set, []).append(d)
        elif d.kind == "gpu":
            whole += 1
        elif d.kind == "mig":
            migs[d.profile] += 1
            mig += 1
    for set_id, members in shared.items():
        counts = (at_once or {}).get(set_id, {})
        if any(d.kind == "gpu" for d in members) and counts.get("gpu", 0) > 0:
            whole += 1
        per = {p: counts.get(p, 0) for p in {d.profile for d in members if d.kind == "mig"}}
        migs.update(per)
        mig += max(per.values(), default=0)
    out = {ddc.GPU_CLASS: whole, ddc.MIG_CLASS: mig}
    for cls, profile in profile_classes.items():
        out[cls] = migs.get(profile, 0)
    return out


def _owner_job(wl: Mapping[str, Any]) -> str | None:
    for ref in (wl.get("metadata") or {}).get("ownerReferences") or []:
        if ref.get("kind") == "Job":
            return str(ref.get("name"))
    return None


def pending_workloads(
    workloads: Sequence[Mapping[str, Any]], pods: Sequence[Mapping[str, Any]]
) -> tuple[list[tuple[str, str]], list[tuple[str, str]], list[tuple[str, str]]]:
    """Split waiting workloads into three lists of ``(workload, message)``:

    * on quota: not admitted, Kueue's ``QuotaReserved`` condition False with its message
      (``couldn't assign flavors ... insufficient unused quota``): the queue works, the
      quota is used up;
    * inadmissible: not admitted and Kueue cannot count it (its message names a DeviceClass
      ``is not mapped``, or a claim form Kueue refuses): a set-up fault;
    * on devices: admitted by Kueue, but a pod of its Job is unschedulable: Kueue granted
      quota that the published devices cannot back (quota above the devices, or devices
      missing).
    """
    on_quota, inadmissible, on_devices = [], [], []
    unschedulable: dict[tuple[str, str], str] = {}
    for pod in pods:
        meta = pod.get("metadata") or {}
        job = (meta.get("labels") or {}).get("batch.kubernetes.io/job-name")
        cond = _condition(pod, "PodScheduled")
        if job and cond and cond.get("status") == "False":
            unschedulable[(str(meta.get("namespace")), str(job))] = str(cond.get("message") or "")
    for wl in workloads:
        admitted = _condition(wl, "Admitted")
        finished = _condition(wl, "Finished")
        if finished and finished.get("status") == "True":
            continue
        if admitted and admitted.get("status") == "True":
            job = _owner_job(wl)
            ns = str((wl.get("metadata") or {}).get("namespace"))
            if job and (ns, job) in unschedulable:
                on_devices.append((_name(wl), unschedulable[(ns, job)]))
            continue
        reserved = _condition(wl, "QuotaReserved")
        message = str((reserved or {}).get("message") or "")
        if "not mapped" in message or "not supported" in message:
            inadmissible.append((_name(wl), message))
        elif reserved is not None and reserved.get("status") == "False":
            on_quota.append((_name(wl), message))
    return on_quota, inadmissible, on_devices
