# Copyright: gpufleet contributors
# Apache License 2.0 (see LICENSE)
"""The ``kueue`` area of the validation report: Kueue's controller, its device-class
mappings, its queues and quotas against the devices the cluster publishes, and why
workloads wait.

:func:`list_kueue` reads the cluster (one GET or list per kind, each with the client's
timeouts); :func:`kueue_checks` judges what it read (pure, ``kueue.checks``). Options
(``validate.kueue`` of the validate role): ``namespace`` (Kueue's, default
``kueue-system``), ``version`` (a row of ``kueue.versions``), ``device_classes`` (the
driver's classes that must be mapped), ``profiles`` (MIG profiles with a class of their
own).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ansible_collections.gpufleet.cluster.plugins.module_utils.claims import counters as ccounters
from ansible_collections.gpufleet.cluster.plugins.module_utils.dra_driver import chart as ddc
from ansible_collections.gpufleet.cluster.plugins.module_utils.kueue import checks as kc
from ansible_collections.gpufleet.cluster.plugins.module_utils.kueue import queues as kq
from ansible_collections.gpufleet.cluster.plugins.module_utils.kueue import versions as kv
from ansible_collections.gpufleet.cluster.plugins.module_utils.report import fleet as fr
from ansible_collections.gpufleet.cluster.plugins.module_utils.validate.report import (
    FAIL,
    WARN,
    Check,
    Evidence,
    finish,
)

__all__ = ["kueue_checks", "list_kueue", "published_devices"]

FIX_CONTROLLER = (
    "kubectl -n {ns} describe deploy kueue-controller-manager; rerun gpufleet up with "
    "site_kueue: true (the kueue role installs it)"
)


def published_devices(
    slices: Sequence[Mapping[str, Any]],
) -> tuple[list[fr.Device], dict[str, dict[str, int]]]:
    """The devices of NVIDIA's driver in ``slices`` (``report.fleet.devices_of``) and, per
    CounterSet of the slices (dynamic MIG: one per GPU), the devices of each profile
    allocatable at once on the empty GPU (``claims.counters.profiles_at_once``): what
    ``kueue.checks.published_counts`` counts. Allocations do not count: a quota is
    judged against the fleet, not against what is free now."""
    sets = ccounters.counter_sets(slices, [])
    at_once = {set_id: ccounters.profiles_at_once(cs) for set_id, cs in sets.items()}
    return fr.devices_of(slices, [], {}, sets=sets), at_once


def list_kueue(kube: Any, options: Mapping[str, Any], listing: Any) -> kc.KueueListing:
    """Read Kueue's objects with ``kube`` (``kube.client.Kube``); ``listing``: the
    validate run's cluster listing (its DeviceClasses, ResourceSlices, Pods). A kind
    that cannot be read is recorded in ``errors`` and left empty."""
    ns = str(options.get("namespace") or "kueue-system")
    release = kv.kueue_release(str(options.get("version") or "0.17.0"))
    group = release.kueue_api
    errors: dict[str, str] = {}

    def _get(path: str) -> Mapping[str, Any] | None:
        try:
            return kube.get(path)
        except Exception as exc:  # KubeError: absent or unreadable
            errors[path] = str(exc)
            return None

    def _list(path: str) -> list[dict[str, Any]]:
        try:
            return kube.list(path)
        except Exception as exc:
            errors[path] = str(exc)
            return []

    deployment = _get(f"/apis/apps/v1/namespaces/{ns}/deployments/kueue-controller-manager")
    cm = _get(f"/api/v1/namespaces/{ns}/configmaps/kueue-manager-config")
    config = kc.parse_config(((cm or {}).get("data") or {}).get("controller_manager_config.yaml"))
    devices, at_once = published_devices(list(listing.slices))
    return kc.KueueListing(
        deployment=deployment,
        config=config,
        device_classes=[str((c.get("metadata") or {}).get("name")) for c in listing.classes],
        devices=devices,
        at_once=at_once,
        cluster_queues=_list(f"/apis/{group}/clusterqueues"),
        local_queues=_list(f"/apis/{group}/localqueues"),
        workloads=_list(f"/apis/{group}/workloads"),
        pods=list(listing.pods),
        errors=errors,
    )


def kueue_checks(data: kc.KueueListing, options: Mapping[str, Any]) -> list[Check]:
    """The ``kueue.*`` checks of ``data``: controller, mappings, local-queues,
    quota-vs-devices, pending."""
    ns = str(options.get("namespace") or "kueue-system")
    release = kv.kueue_release(str(options.get("version") or "0.17.0"))
    profiles: Sequence[str] = list(options.get("profiles") or [])
    profile_classes = {kq.profile_device_class(p): p for p in profiles}
    expected = list(options.get("device_classes") or [*ddc.GPU_DEVICE_CLASSES])
    expected += sorted(profile_classes)
    checks = []

    c = Check("kueue.controller", "Kueue's controller manager is ready")
    c.evidence.append(Evidence(f"GET deployments/{ns}/kueue-controller-manager", "read"))
    for msg in kc.controller_problems(data.deployment):
        c.problem(f"{ns}/kueue-controller-manager", FAIL, msg)
    c.fix = FIX_CONTROLLER.format(ns=ns)
    checks.append(finish(c, "kueue-controller-manager is ready"))

    mappings = kc.mappings_of(data.config, release.mapping_field)
    c = Check("kueue.mappings", "Kueue's device-class mappings match the published classes")
    c.evidence.append(
        Evidence(
            f"GET configmaps/{ns}/kueue-manager-config",
            f"{release.mapping_field}: {len(mappings)} mapping(s)",
        )
    )
    if data.config is None:
        c.problem(None, FAIL, "the Configuration of kueue-manager-config cannot be read")
    for msg in kc.mapping_problems(mappings, data.device_classes, expected):
        c.problem(None, FAIL, msg)
    c.fix = "rerun the kueue role: it maps every DeviceClass of kueue_device_classes"
    checks.append(finish(c, f"{len(mappings)} mapping(s), every published class mapped"))

    c = Check("kueue.local-queues", "Every LocalQueue's ClusterQueue exists")
    c.evidence.append(Evidence("LIST localqueues, clusterqueues", f"{len(data.local_queues)}"))
    for subject, msg in kc.local_queue_problems(data.local_queues, data.cluster_queues):
        c.problem(subject, FAIL, msg)
    c.fix = "create the ClusterQueue (kueue_teams) or point the LocalQueue at one that exists"
    checks.append(finish(c, f"{len(data.local_queues)} LocalQueue(s), each with its queue"))

    counts = kc.published_counts(data.devices, profile_classes, data.at_once)
    totals = kc.quota_totals(data.cluster_queues)
    c = Check("kueue.quota-vs-devices", "Nominal quotas fit the published devices")
    shown = ", ".join(f"{k}: {v}" for k, v in sorted(counts.items()))
    dynamic = len({d.counter_set for d in data.devices if d.counter_set})
    if dynamic:
        shown += (
            f" (on {dynamic} GPU(s) with shared counters, the devices allocatable at once: "
            "a whole GPU or its MIG devices, one profile's most instances)"
        )
    c.evidence.append(Evidence("LIST resourceslices", shown))
    for resource, per in sorted(totals.items()):
        if resource not in counts:
            continue
        total = sum(per.values())
        if total > counts[resource]:
            queues = ", ".join(f"{q} {n}" for q, n in sorted(per.items()))
            c.problem(
                resource,
                WARN,
                f"nominal quotas add up to {total} ({queues}), the cluster publishes "
                f"{counts[resource]}{' at once' if dynamic else ''}: admitted workloads can "
                "wait for devices",
            )
    c.fix = "lower the nominal quotas (kueue_teams) to the published devices"
    c.data = {"published": counts, "nominal": totals}
    checks.append(finish(c, "every resource's nominal quotas fit the published devices"))

    on_quota, inadmissible, on_devices = kc.pending_workloads(data.workloads, data.pods)
    c = Check("kueue.pending", "Workloads wait on quota, not on devices")
    c.evidence.append(Evidence("LIST workloads, pods", f"{len(data.workloads)} workload(s)"))
    for subject, msg in inadmissible:
        c.problem(subject, FAIL, f"inadmissible: {msg}")
    for subject, msg in on_devices:
        c.problem(subject, FAIL, f"admitted by Kueue but waits for devices: {msg}")
    c.data = {
        "pending_on_quota": [s for s, _unused in on_quota],
        "inadmissible": [s for s, _unused in inadmissible],
        "pending_on_devices": [s for s, _unused in on_devices],
    }
    c.fix = (
        "inadmissible: map the DeviceClass (kueue_device_classes, kueue_profile_classes); "
        "waiting for devices: lower the quota to what the ResourceSlices publish"
    )
    ok = f"{len(on_quota)} workload(s) wait on quota (the queue works), none on devices"
    checks.append(finish(c, ok))
    for path, err in sorted(data.errors.items()):
        if "kueue-controller-manager" in path or "kueue-manager-config" in path:
            continue
        checks.append(
            Check(f"kueue.list-{path.rsplit('/', 1)[-1]}", f"{path} can be read", FAIL, err)
        )
    return checks
