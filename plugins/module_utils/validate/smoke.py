# Copyright: gpufleet contributors
# Apache License 2.0 (see LICENSE)
"""The smoke test of ``gpufleet validate --smoke``: real claims, real pods, then cleanup.

In a throwaway namespace (``gpufleet-validate-<suffix>``) it creates one
ResourceClaimTemplate per configured template (built by ``claims.templates.build``:
``{kind: gpu-with-memory, min_memory_gib: 1}`` by default, one ``mig-slice`` per
profile in ``smoke_profiles``) and one pod per template that prints the GPU it sees. Each
template gives the check ``smoke.<template name>``, which passes when, within the timeout,
the pod's generated claim was seen allocated and reserved for the pod, and the pod
Succeeded on a GPU node. Then the namespace is deleted, or kept when a check failed (the
report names it) unless ``smoke_keep_on_failure`` is false.

Polling lists the namespace's pods and claims (two requests per round, every
``POLL_S`` seconds), never per object.
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Mapping
from typing import Any

from ansible_collections.gpufleet.cluster.plugins.module_utils.claims import (
    metadata as claims_metadata,
)
from ansible_collections.gpufleet.cluster.plugins.module_utils.claims import slices as cslices
from ansible_collections.gpufleet.cluster.plugins.module_utils.claims import templates as ct
from ansible_collections.gpufleet.cluster.plugins.module_utils.cluster.listing import (
    Listing,
    Settings,
)
from ansible_collections.gpufleet.cluster.plugins.module_utils.kube import client as vk
from ansible_collections.gpufleet.cluster.plugins.module_utils.validate.nodes import (
    attr_value,
)
from ansible_collections.gpufleet.cluster.plugins.module_utils.validate.report import (
    FAIL,
    Check,
    Evidence,
    finish,
)

__all__ = ["DEFAULT_COMMAND", "published_kinds", "run_smoke", "smoke_pod", "smoke_templates"]

POLL_S = 2.0
#: What the smoke pod runs: the GPU the container sees (the simulator's device file in the
#: lab, nvidia-smi -L on a real node), then a pause so the claim is seen reserved.
DEFAULT_COMMAND = [
    "sh",
    "-c",
    "echo NVIDIA_VISIBLE_DEVICES=$NVIDIA_VISIBLE_DEVICES; "
    "cat /run/gpufleet-gpu-simulator/device 2>/dev/null || nvidia-smi -L; sleep 4",
]


def smoke_templates(
    options: Mapping[str, Any],
    namespace: str,
    version: str,
    published: tuple[bool, list[str]] | None = None,
) -> list[dict[str, Any]]:
    """The ResourceClaimTemplates to try: ``smoke_templates`` when given, else one per
    kind of device the cluster should hand out: a whole GPU (``smoke-gpu``, at least
    1 GiB) when a GPU node publishes one, and a ``mig-slice`` per MIG profile that is
    configured (``smoke_profiles``) or published (``published`` as returned by
    :func:`published_kinds`; None: the whole GPU only, as when nothing is known). Each
    entry of ``smoke_profiles`` is added in any case. Raises ClaimTemplateError for a bad
    entry."""
    wanted = list(options.get("smoke_templates") or [])
    profiles = [str(p) for p in options.get("smoke_profiles") or []]
    if not wanted:
        whole, seen = published if published is not None else (True, [])
        profiles += [p for p in seen if p not in profiles]
        if whole or not profiles:
            wanted = [{"kind": "gpu-with-memory", "min_memory_gib": 1, "name": "smoke-gpu"}]
    for p in dict.fromkeys(profiles):
        wanted.append({"kind": "mig-slice", "profile": p})
    out = []
    for w in wanted:
        params = {k: v for k, v in dict(w).items() if k != "kind"}
        params["namespace"] = namespace
        out.append(ct.build(str(w.get("kind")), params, kubernetes_version=version))
    return out


def published_kinds(listing: Listing, settings: Settings) -> tuple[bool, list[str]]:
    """What the GPU nodes can hand out: (a whole GPU is published or nothing at all is,
    the MIG profiles published or wanted by ``settings.mig_layout``, sorted). Devices are
    those of ``settings.driver`` in ResourceSlices of the inventory's GPU nodes (all nodes
    when the inventory names none); their ``type`` and ``profile`` attributes are the
    NVIDIA DRA driver's (``gpu``/``mig``, ``1g.18gb``)."""
    gpu_nodes = set(settings.gpu_nodes)
    types: set[str] = set()
    profiles: set[str] = set()
    for rs in listing.slices:
        spec = rs.get("spec") or {}
        if spec.get("driver") != settings.driver:
            continue
        if gpu_nodes and spec.get("nodeName") not in gpu_nodes:
            continue
        for d in spec.get("devices") or []:
            kind = str(attr_value(d, "type") or "gpu")
            types.add(kind)
            if kind == "mig" and attr_value(d, "profile"):
                profiles.add(str(attr_value(d, "profile")))
    for raw in settings.mig_layout.values():
        layouts = (
            raw.values()
            if isinstance(raw, Mapping) and raw and all(str(k).isdigit() for k in raw)
            else [raw]
        )
        for layout in layouts:
            if isinstance(layout, Mapping):
                profiles.update(str(k) for k, v in layout.items() if v)
    return ("gpu" in types or not types), sorted(profiles)


def smoke_pod(template: Mapping[str, Any], options: Mapping[str, Any]) -> dict[str, Any]:
    """A pod that uses one claim from ``template`` and prints the GPU it sees."""
    name = template["metadata"]["name"]
    command = list(options.get("smoke_command") or DEFAULT_COMMAND)
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": f"{name}-pod"[:63],
            "namespace": template["metadata"]["namespace"],
            "labels": {"app.kubernetes.io/managed-by": "gpufleet-validate"},
        },
        "spec": {
            "restartPolicy": "Never",
            "terminationGracePeriodSeconds": 1,
            "tolerations": [
                {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}
            ],
            "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": name}],
            "containers": [
                {
                    "name": "smoke",
                    "image": options.get("smoke_image") or "busybox:1",
                    "imagePullPolicy": options.get("smoke_image_pull_policy") or "IfNotPresent",
                    "command": command,
                    "resources": {"claims": [{"name": "gpu"}]},
                }
            ],
        },
    }


def run_smoke(
    kube: vk.Kube, listing: Listing, settings: Settings, options: Mapping[str, Any]
) -> list[Check]:
    """Run the smoke test; returns one check per template (``smoke.setup`` when nothing
    could be created)."""
    version = settings.version or (listing.version or {}).get("gitVersion") or ""
    timeout = float(options.get("smoke_timeout") or 180)
    namespace = f"gpufleet-validate-{secrets.token_hex(3)}"
    try:
        templates = smoke_templates(options, namespace, version, published_kinds(listing, settings))
    except (claims_metadata.ClaimTemplateError, ValueError) as err:
        return [
            Check(
                "smoke.setup",
                "smoke test set up",
                FAIL,
                f"bad smoke template: {err}",
                fix="fix validate_smoke_templates / validate_smoke_profiles",
            )
        ]
    failed_setup = _create(kube, namespace, templates, options)
    if failed_setup is not None:
        return [failed_setup]
    pods_by_template = {
        t["metadata"]["name"]: f"{t['metadata']['name']}-pod"[:63] for t in templates
    }
    start = time.monotonic()
    pods, seen = _watch(
        kube, namespace, listing.resource_version or "v1", pods_by_template, timeout
    )
    elapsed = time.monotonic() - start
    checks = [
        _verdict(
            kube,
            namespace,
            tname,
            pname,
            pods.get(pname) or {},
            seen[tname],
            settings,
            timeout,
            elapsed,
        )
        for tname, pname in pods_by_template.items()
    ]
    _clean_up(kube, namespace, checks, options.get("smoke_keep_on_failure", True))
    return checks


def _create(
    kube: vk.Kube, namespace: str, templates: list[dict[str, Any]], options: Mapping[str, Any]
) -> Check | None:
    """The throwaway namespace, each ResourceClaimTemplate and its pod; a failed
    ``smoke.setup`` check (the namespace deleted again) when the API refuses one."""
    try:
        kube.request(
            "POST",
            "/api/v1/namespaces",
            body={
                "apiVersion": "v1",
                "kind": "Namespace",
                "metadata": {
                    "name": namespace,
                    "labels": {"app.kubernetes.io/managed-by": "gpufleet-validate"},
                },
            },
        )
        _wait_for_default_service_account(kube, namespace)
        for t in templates:
            api = t["apiVersion"].rsplit("/", 1)[-1]
            kube.request(
                "POST",
                f"/apis/resource.k8s.io/{api}/namespaces/{namespace}/resourceclaimtemplates",
                body=t,
            )
            kube.request("POST", f"/api/v1/namespaces/{namespace}/pods", body=smoke_pod(t, options))
    except vk.KubeError as err:
        _delete_namespace(kube, namespace)
        return Check(
            "smoke.setup",
            "smoke test set up",
            FAIL,
            f"could not create the smoke objects in {namespace}: {err}",
            fix="check the validating user's rights (namespaces, pods, resourceclaimtemplates "
            "create/delete)",
        )
    return None


def _watch(
    kube: vk.Kube,
    namespace: str,
    rv: str,
    pods_by_template: Mapping[str, str],
    timeout: float,
) -> tuple[dict[str, Mapping[str, Any]], dict[str, dict[str, Any]]]:
    """Poll the namespace's pods and claims until every pod ended or ``timeout`` seconds
    passed. Returns the last pods by name and, per template, what was seen of its claim:
    ``{"claim": name, "allocated": [devices] or None, "reserved": bool}``."""
    seen: dict[str, dict[str, Any]] = {
        n: {"allocated": None, "reserved": False} for n in pods_by_template
    }
    deadline = time.monotonic() + timeout
    pods: dict[str, Mapping[str, Any]] = {}
    while True:
        try:
            pods = {
                p["metadata"]["name"]: p for p in kube.list(f"/api/v1/namespaces/{namespace}/pods")
            }
            claims = kube.list(f"/apis/resource.k8s.io/{rv}/namespaces/{namespace}/resourceclaims")
        except vk.KubeError:
            claims = []
        for tname, pname in pods_by_template.items():
            if pname in pods:
                _note_claims(seen[tname], pods[pname], claims)
        done = all(
            (pods.get(p) or {}).get("status", {}).get("phase") in ("Succeeded", "Failed")
            for p in pods_by_template.values()
        )
        if done or time.monotonic() > deadline:
            return pods, seen
        time.sleep(POLL_S)


def _note_claims(
    seen: dict[str, Any], pod: Mapping[str, Any], claims: list[Mapping[str, Any]]
) -> None:
    """Record the claim the pod owns: its name, its allocated devices, whether it is
    reserved for the pod."""
    uid = pod["metadata"].get("uid")
    for cl in claims:
        owners = cl["metadata"].get("ownerReferences") or []
        owner = next((o for o in owners if o.get("kind") == "Pod"), None)
        if not owner or owner.get("uid") != uid:
            continue
        seen["claim"] = cl["metadata"]["name"]
        devs = cslices.allocated_devices(cl)
        if devs:
            seen["allocated"] = devs
        if any(r.get("uid") == uid for r in (cl.get("status") or {}).get("reservedFor") or []):
            seen["reserved"] = True


def _verdict(
    kube: vk.Kube,
    namespace: str,
    tname: str,
    pname: str,
    pod: Mapping[str, Any],
    seen: Mapping[str, Any],
    settings: Settings,
    timeout: float,
    elapsed: float,
) -> Check:
    """The check of one template: its pod's phase and node, its claim, the pod's log."""
    phase = (pod.get("status") or {}).get("phase", "absent")
    node = (pod.get("spec") or {}).get("nodeName")
    c = Check(f"smoke.{tname}", f"a pod gets a device from ResourceClaimTemplate {tname}")
    c.evidence.append(
        Evidence(
            f"pod {namespace}/{pname}", f"phase {phase} on {node or 'no node'} after {elapsed:.0f}s"
        )
    )
    if seen["allocated"]:
        c.evidence.append(
            Evidence(
                f"claim {namespace}/{seen.get('claim')}",
                f"allocated {', '.join(seen['allocated'])}; reserved for the pod: "
                f"{seen['reserved']}",
            )
        )
    if pod:
        try:
            log = kube.request_text(f"/api/v1/namespaces/{namespace}/pods/{pname}/log")
            c.evidence.append(Evidence("pod log", log.strip()[:400] or "(empty)"))
        except vk.KubeError as err:
            c.evidence.append(Evidence("pod log", f"not readable: {err}"))
    why = _scheduling_message(pod)
    if not seen["allocated"]:
        c.problem(
            pname,
            FAIL,
            f"its claim was never seen allocated within {timeout:.0f}s"
            + (f": {why}" if why else ""),
        )
    elif not seen["reserved"] and phase != "Succeeded":
        c.problem(pname, FAIL, "its claim was allocated but never reserved for the pod")
    if phase != "Succeeded":
        c.problem(
            pname,
            FAIL,
            f"pod phase {phase} (wanted Succeeded within {timeout:.0f}s)"
            + (f": {why}" if why else ""),
        )
    if node and settings.gpu_nodes and node not in settings.gpu_nodes:
        c.problem(pname, FAIL, f"ran on {node}, which is not a GPU node of the inventory")
    claim = seen.get("claim")
    c.fix = (
        (f"gpufleet claims explain {namespace}/{claim}" if claim else "gpufleet claims explain")
        + f", the pod's events (kubectl -n {namespace} describe pod {pname}), and the "
        "kubelet plugin's log on the node"
    )
    return finish(c, f"claim allocated and reserved, pod Succeeded on {node}")


def _clean_up(kube: vk.Kube, namespace: str, checks: list[Check], keep: Any) -> None:
    """Delete the namespace, or, when a check failed and ``keep``, keep it and say how to
    delete it; either is recorded on every check."""
    if keep and any(c.status == FAIL for c in checks):
        kept = (
            f"namespace {namespace} kept for inspection; delete it with: "
            f"kubectl delete namespace {namespace}"
        )
        for c in checks:
            c.evidence.append(Evidence("kept for inspection", kept))
            if c.status == FAIL:
                c.fix = f"{c.fix}. {kept}"
        return
    ok = _delete_namespace(kube, namespace)
    for c in checks:
        c.evidence.append(
            Evidence(
                "cleanup", f"namespace {namespace} " + ("deleted" if ok else "could NOT be deleted")
            )
        )


def _wait_for_default_service_account(
    kube: vk.Kube, namespace: str, timeout_s: float = 120.0
) -> None:
    """Wait until the ServiceAccount controller has made ``default`` in the new namespace:
    the ServiceAccount admission plugin refuses a pod before that ("serviceaccount
    "default" not found", 403). Raises the last ``KubeError`` after ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            kube.get(f"/api/v1/namespaces/{namespace}/serviceaccounts/default")
            return
        except vk.KubeError:
            if time.monotonic() >= deadline:
                raise
            time.sleep(1)


def _scheduling_message(pod: Mapping[str, Any]) -> str:
    for cond in (pod.get("status") or {}).get("conditions") or []:
        if cond.get("type") == "PodScheduled" and cond.get("status") != "True":
            return str(cond.get("message") or cond.get("reason") or "")
    for cs in (pod.get("status") or {}).get("containerStatuses") or []:
        waiting = (cs.get("state") or {}).get("waiting")
        if waiting:
            return f"{waiting.get('reason')}: {waiting.get('message', '')}"
    return ""


def _delete_namespace(kube: vk.Kube, namespace: str) -> bool:
    try:
        kube.request("DELETE", f"/api/v1/namespaces/{namespace}")
        return True
    except vk.KubeError as err:
        return err.status == 404
