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

On a dynamic-MIG node (its published devices consume a GPU's shared counters, as NVIDIA's
driver with its ``DynamicMIG`` gate publishes them: ``validate.dynamic_mig.is_dynamic``)
the smoke claims no whole GPU: template ``dynamic-mig-<profile>`` asks DeviceClass
``mig.nvidia.com`` for the smallest MIG profile of the node's GPU model (``mig-slice``,
as ``gpufleet claims template`` writes it), so that the driver creates a GPU instance at
prepare. After the namespace is deleted the smoke waits until the pod and its claim are
gone (the kubelet keeps a pod until it unprepared its claims), and the check's ``data``
names the node (``dynamic_mig_node``); :func:`fold_leftover` then adds what
``nodes.dynamic-mig-leftover-gi`` found on that node, from ``nvidia-smi mig -lgi`` read
after the smoke (``playbooks/validate.yml`` runs the smoke before it reads the nodes).

Polling lists the namespace's pods and claims (two requests per round, every
``POLL_S`` seconds), never per object.
"""

from __future__ import annotations

import re
import secrets
import time
from collections.abc import Mapping, Sequence
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
from ansible_collections.gpufleet.cluster.plugins.module_utils.mig import profiles as mprof
from ansible_collections.gpufleet.cluster.plugins.module_utils.validate import dynamic_mig as vdm
from ansible_collections.gpufleet.cluster.plugins.module_utils.validate.nodes import (
    attr_value,
)
from ansible_collections.gpufleet.cluster.plugins.module_utils.validate.report import (
    FAIL,
    SKIP,
    Check,
    Evidence,
    finish,
)

__all__ = [
    "DEFAULT_COMMAND",
    "DYNAMIC_PREFIX",
    "dynamic_profiles",
    "fold_leftover",
    "published_kinds",
    "run_smoke",
    "smallest_profile",
    "smoke_pod",
    "smoke_templates",
]

POLL_S = 2.0
#: What the smoke pod runs: the GPU the container sees (the simulator's device file in the
#: lab, nvidia-smi -L on a real node), then a pause so the claim is seen reserved.
DEFAULT_COMMAND = [
    "sh",
    "-c",
    "echo NVIDIA_VISIBLE_DEVICES=$NVIDIA_VISIBLE_DEVICES; "
    "cat /run/gpufleet-gpu-simulator/device 2>/dev/null || nvidia-smi -L; sleep 4",
]
#: Name prefix of the smoke's dynamic-MIG templates (``dynamic-mig-1g-18gb``).
DYNAMIC_PREFIX = "dynamic-mig-"
#: The ``data`` key of a dynamic-MIG smoke check: the node its pod ran on.
DYNAMIC_NODE = "dynamic_mig_node"


def smoke_templates(
    options: Mapping[str, Any],
    namespace: str,
    version: str,
    published: tuple[bool, list[str]] | None = None,
    dynamic: Sequence[str] = (),
) -> list[dict[str, Any]]:
    """The ResourceClaimTemplates to try: ``smoke_templates`` when given, else one per
    kind of device the cluster should hand out: a whole GPU (``smoke-gpu``, at least
    1 GiB) when a GPU node publishes one, a ``mig-slice`` per MIG profile that is
    configured (``smoke_profiles``) or published (``published`` as returned by
    :func:`published_kinds`; None: the whole GPU only, as when nothing is known), and a
    ``mig-slice`` named ``dynamic-mig-<profile>`` per profile of ``dynamic`` (the
    smallest profile of each dynamic-MIG node's model, :func:`dynamic_profiles`). Each
    entry of ``smoke_profiles`` is added in any case. Raises ClaimTemplateError for a bad
    entry."""
    wanted = list(options.get("smoke_templates") or [])
    profiles = [str(p) for p in options.get("smoke_profiles") or []]
    if not wanted:
        whole, seen = published if published is not None else (True, [])
        profiles += [p for p in seen if p not in profiles]
        if whole or not (profiles or dynamic):
            wanted = [{"kind": "gpu-with-memory", "min_memory_gib": 1, "name": "smoke-gpu"}]
        for p in dict.fromkeys(dynamic):
            name = DYNAMIC_PREFIX + re.sub(r"[^a-z0-9]+", "-", p.lower()).strip("-")
            wanted.append({"kind": "mig-slice", "profile": p, "name": name})
    for p in dict.fromkeys(profiles):
        wanted.append({"kind": "mig-slice", "profile": p})
    out = []
    for w in wanted:
        params = {k: v for k, v in dict(w).items() if k != "kind"}
        params["namespace"] = namespace
        out.append(ct.build(str(w.get("kind")), params, kubernetes_version=version))
    return out


def _devices_by_node(listing: Listing, settings: Settings) -> dict[str, list[Mapping[str, Any]]]:
    """Node -> the devices of ``settings.driver`` its ResourceSlices publish, for the
    inventory's GPU nodes (all nodes when the inventory names none)."""
    gpu_nodes = set(settings.gpu_nodes)
    out: dict[str, list[Mapping[str, Any]]] = {}
    for rs in listing.slices:
        spec = rs.get("spec") or {}
        if spec.get("driver") != settings.driver:
            continue
        if gpu_nodes and spec.get("nodeName") not in gpu_nodes:
            continue
        out.setdefault(str(spec.get("nodeName") or ""), []).extend(spec.get("devices") or [])
    return out


def published_kinds(listing: Listing, settings: Settings) -> tuple[bool, list[str]]:
    """What the GPU nodes that are not dynamic-MIG nodes can hand out: (a whole GPU is
    published or nothing at all is, the MIG profiles published or wanted by
    ``settings.mig_layout``, sorted). Devices are those of ``settings.driver`` in
    ResourceSlices of the inventory's GPU nodes (all nodes when the inventory names none);
    their ``type`` and ``profile`` attributes are the NVIDIA DRA driver's (``gpu``/``mig``,
    ``1g.18gb``). A dynamic-MIG node's devices (``dynamic_mig.is_dynamic``) are every
    placement of every profile: :func:`dynamic_profiles` picks its smoke claim."""
    types: set[str] = set()
    profiles: set[str] = set()
    dynamic = False
    for devices in _devices_by_node(listing, settings).values():
        if vdm.is_dynamic(devices):
            dynamic = True
            continue
        for d in devices:
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
    return ("gpu" in types or not (types or dynamic)), sorted(profiles)


def smallest_profile(model: mprof.GpuModel) -> str | None:
    """The smallest MIG profile of ``model`` that has a placement: least memory, then
    fewest multiprocessors, a profile without ``+`` (extra engines) first; None for a model
    without profiles."""
    placed = [p for p in model.profiles if p.placements]
    if not placed:
        return None
    return min(placed, key=lambda p: (p.memory_mib, p.multiprocessors, "+" in p.name, p.name)).name


def dynamic_profiles(listing: Listing, settings: Settings) -> list[str]:
    """The smallest MIG profile (:func:`smallest_profile`) of the GPU model (the full
    GPU's or a MIG device's ``productName``) of each dynamic-MIG node, sorted and
    deduplicated; a node whose model has no MIG table is left out."""
    out: set[str] = set()
    for devices in _devices_by_node(listing, settings).values():
        if not vdm.is_dynamic(devices):
            continue
        for product in sorted({str(attr_value(d, "productName") or "") for d in devices}):
            try:
                small = smallest_profile(mprof.model(product))
            except mprof.UnknownGpuModel:
                continue
            if small:
                out.add(small)
    return sorted(out)


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
        templates = smoke_templates(
            options,
            namespace,
            version,
            published_kinds(listing, settings),
            dynamic_profiles(listing, settings),
        )
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
    for c, (tname, pname) in zip(checks, pods_by_template.items(), strict=True):
        node = ((pods.get(pname) or {}).get("spec") or {}).get("nodeName")
        if tname.startswith(DYNAMIC_PREFIX) and node:
            c.data[DYNAMIC_NODE] = node
    deleted = _clean_up(kube, namespace, checks, options.get("smoke_keep_on_failure", True))
    if deleted:
        rv = listing.resource_version or "v1"
        _wait_released(kube, f"{namespace}@{rv}", pods_by_template, seen, checks, timeout)
    return checks


def _wait_released(
    kube: vk.Kube,
    where: str,
    pods_by_template: Mapping[str, str],
    seen: Mapping[str, Mapping[str, Any]],
    checks: Sequence[Check],
    timeout: float,
) -> None:
    """After the namespace was deleted: wait (at most ``timeout`` seconds) until the pod
    and the claim of every dynamic-MIG check are gone, so that the GPU instance read
    afterwards is what the unprepare left. The kubelet removes a pod only once its claims
    are unprepared (``PodMightNeedToUnprepareResources``); a pod or claim still there
    fails the check. ``where``: ``NAMESPACE@VERSION`` (the resource.k8s.io version)."""
    namespace, rv = where.split("@", 1)
    waiting = {
        c.id: (f"/api/v1/namespaces/{namespace}/pods/{pods_by_template[t]}", seen[t].get("claim"))
        for c, t in zip(checks, pods_by_template, strict=True)
        if DYNAMIC_NODE in c.data
    }
    if not waiting:
        return
    start = time.monotonic()
    left = dict(waiting)
    while left and time.monotonic() - start < timeout:
        for cid, (pod_path, claim) in list(left.items()):
            paths = [pod_path] + (
                [f"/apis/resource.k8s.io/{rv}/namespaces/{namespace}/resourceclaims/{claim}"]
                if claim
                else []
            )
            if not any(_exists(kube, path) for path in paths):
                del left[cid]
        if left:
            time.sleep(POLL_S)
    gone_s = time.monotonic() - start
    for c in checks:
        if c.id not in waiting:
            continue
        if c.id in left:
            c.problem(
                c.data[DYNAMIC_NODE],
                FAIL,
                f"its pod or claim was still there {timeout:.0f}s after the namespace was "
                "deleted: the kubelet has not unprepared the claim",
            )
            finish(c, c.summary)
        else:
            c.evidence.append(
                Evidence(
                    f"pod and claim in {namespace}",
                    f"gone {gone_s:.0f}s after the namespace was deleted (claim unprepared)",
                )
            )


def _exists(kube: vk.Kube, path: str) -> bool:
    """Whether ``GET path`` finds the object (any answer other than 404 counts as there)."""
    try:
        kube.get(path)
    except vk.KubeError as err:
        return err.status != 404
    return True


def fold_leftover(checks: Sequence[Check], leftover: Check | None, read_after: bool) -> None:
    """Add to each dynamic-MIG smoke check (``data`` names its node) what
    ``nodes.dynamic-mig-leftover-gi`` (``leftover``, judged on the nodes' GPU facts) found
    on its node: a GPU instance that no allocated claim owns fails it. ``read_after``:
    the GPU facts were read after the smoke (``playbooks/validate.yml``); when not, or when
    the leftover check skipped or is absent, the check fails, saying why the instances
    could not be compared."""
    for c in checks:
        node = c.data.get(DYNAMIC_NODE)
        if not node or c.status == SKIP:
            continue
        why = ""
        if not read_after:
            why = "the GPU facts were read before the smoke (run playbooks/validate.yml)"
        elif leftover is None:
            why = f"check {vdm.LEFTOVER_ID} did not run"
        elif leftover.status == SKIP:
            why = f"check {vdm.LEFTOVER_ID} skipped: {leftover.reason}"
        if why or leftover is None:
            c.problem(node, FAIL, f"GPU instances on {node} not compared after the smoke: {why}")
            finish(c, c.summary)
            continue
        mine = [p for p in leftover.problems if p.subject == node]
        for p in mine:
            c.problem(node, p.status, f"after the smoke pod ended: {p.message}")
        c.evidence.append(
            Evidence(
                f"{vdm.LEFTOVER_ID} on {node} (nvidia-smi mig -lgi, read after the smoke)",
                f"{len(mine)} GPU instance(s) owned by no claim"
                if mine
                else "every GPU instance is owned by a claim; the smoke's is gone",
            )
        )
        if mine:
            c.fix = f"{c.fix}; {leftover.fix}" if c.fix else leftover.fix
        finish(c, c.summary)


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


def _clean_up(kube: vk.Kube, namespace: str, checks: list[Check], keep: Any) -> bool:
    """Delete the namespace, or, when a check failed and ``keep``, keep it and say how to
    delete it; either is recorded on every check. Returns whether it was deleted."""
    if keep and any(c.status == FAIL for c in checks):
        kept = (
            f"namespace {namespace} kept for inspection; delete it with: "
            f"kubectl delete namespace {namespace}"
        )
        for c in checks:
            c.evidence.append(Evidence("kept for inspection", kept))
            if c.status == FAIL:
                c.fix = f"{c.fix}. {kept}"
        return False
    ok = _delete_namespace(kube, namespace)
    for c in checks:
        c.evidence.append(
            Evidence(
                "cleanup", f"namespace {namespace} " + ("deleted" if ok else "could NOT be deleted")
            )
        )
    return ok


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
