# Copyright: gpufleet contributors
# Apache License 2.0 (see LICENSE)
"""Validation checks of the DRA API a cluster serves: ``api.resource-versions`` (the
resource.k8s.io versions the version model expects, ``served_api_versions`` and the
runtime-config plan), ``api.deviceclasses`` and ``api.scheduler-dynamicresources``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ansible_collections.gpufleet.cluster.plugins.module_utils.cluster.listing import (
    Listing,
    Settings,
    cluster_version,
    name_of,
)
from ansible_collections.gpufleet.cluster.plugins.module_utils.dra import api as dra_api
from ansible_collections.gpufleet.cluster.plugins.module_utils.dra import core as dra_core
from ansible_collections.gpufleet.cluster.plugins.module_utils.dra import gates as dra_gates
from ansible_collections.gpufleet.cluster.plugins.module_utils.dra import plan as dra_plan
from ansible_collections.gpufleet.cluster.plugins.module_utils.validate.report import (
    FAIL,
    WARN,
    Check,
    Evidence,
    finish,
    skipped,
)

__all__ = [
    "api_checks",
]


# ------------------------------------------------------------------ api


def api_checks(
    listing: Listing,
    settings: Settings,
    scheduler: Sequence[Mapping[str, Any]] | None = None,
    audit: Mapping[str, Any] | None = None,
) -> list[Check]:
    """``api.resource-versions``, ``api.deviceclasses``, ``api.scheduler-dynamicresources``.
    ``scheduler``: per control-plane host the check-mode result of the module
    ``scheduler_dynamic_resources`` (``host``, ``custom_config``, ``changes``, ``message``,
    ``failed``/``msg``); None or empty: that check is skipped. ``audit``: the gate audit
    (``gate_report.AuditResult.to_dict()``), whose per-host kube-scheduler gates tell
    whether a gate that is off by default was turned on there."""
    out = [_resource_versions(listing, settings), _device_classes(listing, settings)]
    out.append(_scheduler(listing, settings, scheduler, audit))
    return out


def _scheduler_gate_on(audit: Mapping[str, Any] | None, host: str) -> bool:
    """True when the gate audit read the DRA gate set to true on ``host``'s kube-scheduler
    (its running process, else its static pod manifest)."""
    cells = ((audit or {}).get("summary") or {}).get("cells") or {}
    cell = (cells.get("kube-scheduler") or {}).get(host) or {}
    return (cell.get("feature_gates") or {}).get(dra_core.DRA_GATE) is True


def _resource_versions(listing: Listing, settings: Settings) -> Check:
    title = "resource.k8s.io versions the model expects are served"
    version = cluster_version(listing, settings)
    if not version:
        return skipped("api.resource-versions", title, "the Kubernetes version is unknown")
    try:
        states = dra_api.served_api_versions(version)
        plan = dra_plan.plan_components(version, settings.features, settings.gates)
    except dra_core.VersionModelError as err:
        return skipped(
            "api.resource-versions", title, f"the version model refuses {version}: {err}"
        )
    served = [v.get("groupVersion") for v in (listing.resource_group or {}).get("versions") or []]
    ev = Evidence(
        "GET /apis/resource.k8s.io", f"served: {', '.join(served) or 'none (group absent)'}"
    )
    wanted = [s.group_version for s in states if s.enabled_by_default]
    wanted += [
        e.split("=", 1)[0]
        for e in plan.runtime_config
        if e.endswith("=true") and e.startswith(dra_core.RESOURCE_GROUP)
    ]
    wanted = list(dict.fromkeys(wanted))
    known = {s.group_version for s in states}
    c = Check(
        "api.resource-versions",
        title,
        evidence=[ev, Evidence("DRA version model", f"{version}: expects {', '.join(wanted)}")],
    )
    for gv in wanted:
        if gv not in served:
            c.problem(None, FAIL, f"{gv} is not served; Kubernetes {version} needs it for DRA")
    for gv in served:
        if gv not in known:
            c.problem(
                None,
                WARN,
                f"{gv} is served but the version model says {version} has no such version",
            )
    c.fix = (
        "set kube-apiserver --runtime-config as the version model plans it: gpufleet gates "
        f"plan --to {version} shows it, gpufleet gates apply -i INVENTORY sets it"
    )
    return finish(c, f"served: {', '.join(served)}")


def _device_classes(listing: Listing, settings: Settings) -> Check:
    title = "DeviceClasses present"
    if "deviceclasses" in listing.errors:
        return skipped(
            "api.deviceclasses",
            title,
            f"DeviceClasses could not be listed: {listing.errors['deviceclasses']}",
        )
    names = sorted(name_of(c) for c in listing.classes)
    c = Check(
        "api.deviceclasses",
        title,
        evidence=[Evidence(listing.src("deviceclasses"), ", ".join(names) or "none")],
    )
    for want in settings.device_classes:
        if want not in names:
            c.problem(
                want,
                FAIL,
                f"DeviceClass {want} does not exist (classes: {', '.join(names) or 'none'})",
            )
    c.fix = (
        "install the DRA driver chart, which creates them (gpufleet up -i INVENTORY, role "
        "dra_driver)"
    )
    return finish(c, f"{', '.join(settings.device_classes)} present")


def _scheduler(
    listing: Listing,
    settings: Settings,
    scheduler: Sequence[Mapping[str, Any]] | None,
    audit: Mapping[str, Any] | None = None,
) -> Check:
    cid, title = "api.scheduler-dynamicresources", "kube-scheduler profile runs DynamicResources"
    if not scheduler:
        return skipped(
            cid, title, "no control-plane host reported its kube-scheduler configuration"
        )
    c = Check(cid, title)
    version = cluster_version(listing, settings)
    gate = None
    if version:
        try:
            gate = dra_gates.gate_state(dra_core.DRA_GATE, version)
        except dra_core.VersionModelError:
            gate = None
    for r in scheduler:
        host = str(r.get("host", "?"))
        if r.get("failed"):
            c.problem(
                host, FAIL, f"the kube-scheduler configuration could not be read: {r.get('msg')}"
            )
            continue
        c.evidence.append(
            Evidence(
                f"{host}: {r.get('manifest', 'kube-scheduler manifest')}", str(r.get("message", ""))
            )
        )
        for ch in r.get("changes") or []:
            c.problem(
                host,
                FAIL,
                f"{ch.get('where')}: {ch.get('what')} is {ch.get('old') or 'absent'} "
                f"({ch.get('why')})",
            )
        if (
            not r.get("custom_config")
            and gate is not None
            and gate.known
            and not gate.default
            and not gate.locked
            and not _scheduler_gate_on(audit, host)
        ):
            c.problem(
                host,
                WARN,
                "default profile: DynamicResources runs only while the "
                f"{dra_core.DRA_GATE} gate is on "
                f"({gate.describe()} in {version}); see gates.model",
            )
    c.fix = (
        "enable DynamicResources in every profile: gpufleet gates apply -i INVENTORY (module "
        "scheduler_dynamic_resources)"
    )
    return finish(c, "every kube-scheduler profile includes DynamicResources")
