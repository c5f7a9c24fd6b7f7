# Copyright: gpufleet contributors
# Apache License 2.0 (see LICENSE)
"""A Job ready for Kueue with the ResourceClaimTemplate its pods claim devices through.

Standard library only; pure. Kueue counts a claim only in the form its device counting
takes (``kueue.versions.KueueRelease.claim_rules``): a ResourceClaimTemplate, requests
``exactly`` with ``allocationMode: ExactCount``, no CEL selector. So a MIG slice of any
profile is claimed from DeviceClass ``mig.nvidia.com``, a slice of one profile from that
profile's class (``mig-<profile>.gpufleet.io``, made by the kueue role with
``kueue_profile_classes``).

The Job carries the label ``kueue.x-k8s.io/queue-name`` (the team's LocalQueue; Kueue's
``constants.QueueLabel``), optionally ``kueue.x-k8s.io/priority-class`` (a
WorkloadPriorityClass), and starts suspended: Kueue unsuspends it on admission (its own
webhook would suspend it too; written here so that no pod starts before admission even
where the webhook is not yet ready).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from ansible_collections.gpufleet.cluster.plugins.module_utils.common import k8s_names as names
from ansible_collections.gpufleet.cluster.plugins.module_utils.dra import api as dra_api
from ansible_collections.gpufleet.cluster.plugins.module_utils.dra_driver import chart as ddc
from ansible_collections.gpufleet.cluster.plugins.module_utils.kueue import queues as kq

__all__ = ["PRIORITY_LABEL", "QUEUE_LABEL", "KueueJobError", "kueue_claim_template", "kueue_job"]

QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
PRIORITY_LABEL = "kueue.x-k8s.io/priority-class"
_DNS_LABEL = names.dns1123_label
_SUBDOMAIN = names.dns1123_subdomain


class KueueJobError(ValueError):
    """Bad input for a Kueue Job: the message names the option and the fix."""


def _check(option: str, value: str, rule: Callable[[Any], str | None], what: str) -> str:
    """``value`` when ``rule`` (a ``common.k8s_names`` check) accepts it; else
    KueueJobError naming ``option``, the value, why and the fix."""
    why = rule(value)
    if why:
        shown = value if not isinstance(value, str) or len(value) <= 70 else value[:70] + "..."
        raise KueueJobError(f"{option}={shown!r} {why}; it must be {what}; write e.g. team-a")
    return value


def device_class_for(kind: str, profile: str | None) -> str:
    """The DeviceClass a Kueue-counted claim of ``kind`` names: ``mig-slice`` ->
    ``mig.nvidia.com``, or the profile's class with ``profile``. Raises KueueJobError for a
    kind whose claims select devices with CEL."""
    if kind == "mig-slice":
        if not profile:
            return ddc.MIG_CLASS
        try:
            return kq.profile_device_class(profile)
        except kq.KueueInputError as exc:
            raise KueueJobError(f"--profile={profile!r}: {exc.problem}; {exc.fix}") from None
    raise KueueJobError(
        f"{kind} claims select devices with CEL, which Kueue does not count; with "
        "--kueue-queue use mig-slice (with or without --profile)"
    )


def kueue_claim_template(
    *,
    name: str,
    namespace: str,
    device_class: str,
    count: int,
    api_version: str,
    request_name: str = "gpu",
) -> dict[str, Any]:
    """A ResourceClaimTemplate of ``count`` devices of ``device_class`` in the form Kueue
    counts (``api_version`` ``resource.k8s.io/v1``: ``exactly``; v1beta1/v1beta2 shapes are
    not counted by Kueue, which reads ``resource.k8s.io/v1``)."""
    if api_version != "resource.k8s.io/v1":
        first = dra_api.first_release_serving("ResourceClaimTemplate", ("v1",), by_default=True)
        raise KueueJobError(
            f"--kubernetes-version gives {api_version}; Kueue reads claims as "
            f"resource.k8s.io/v1 (Kubernetes {first} or newer)"
        )
    if not isinstance(count, int) or isinstance(count, bool) or count < 1:
        raise KueueJobError(f"--count={count!r}: give 1 or more")
    return {
        "apiVersion": api_version,
        "kind": "ResourceClaimTemplate",
        "metadata": {
            "name": _check("--name", name, _SUBDOMAIN, "a DNS subdomain"),
            "namespace": _check("--namespace", namespace, _DNS_LABEL, "a DNS label"),
        },
        "spec": {
            "spec": {
                "devices": {
                    "requests": [
                        {
                            "name": request_name,
                            "exactly": {
                                "deviceClassName": device_class,
                                "allocationMode": "ExactCount",
                                "count": count,
                            },
                        }
                    ]
                }
            }
        },
    }


def kueue_job(
    *,
    name: str,
    namespace: str,
    queue: str,
    template: str,
    image: str = "busybox:1",
    command: Sequence[str] = ("sh", "-c", "sleep 3600"),
    priority_class: str = "",
    image_pull_policy: str = "IfNotPresent",
) -> dict[str, Any]:
    """A suspended batch/v1 Job in LocalQueue ``queue`` whose one pod claims devices
    through ResourceClaimTemplate ``template``."""
    labels = {QUEUE_LABEL: _check("--kueue-queue", queue, _DNS_LABEL, "a LocalQueue name")}
    if priority_class:
        # a WorkloadPriorityClass name (a DNS subdomain) that is also the value of the
        # label kueue.x-k8s.io/priority-class, so at most 63 characters
        _check("--kueue-priority-class", priority_class, _SUBDOMAIN, "a WorkloadPriorityClass")
        labels[PRIORITY_LABEL] = _check(
            "--kueue-priority-class", priority_class, names.label_value, "a label value"
        )
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": _check("--job-name", name, _DNS_LABEL, "a DNS label"),
            "namespace": _check("--namespace", namespace, _DNS_LABEL, "a DNS label"),
            "labels": labels,
        },
        "spec": {
            "suspend": True,
            "parallelism": 1,
            "completions": 1,
            "backoffLimit": 0,
            "template": {
                "spec": {
                    "restartPolicy": "Never",
                    "containers": [
                        {
                            "name": "main",
                            "image": image,
                            "imagePullPolicy": image_pull_policy,
                            "command": list(command),
                            "resources": {"claims": [{"name": "gpu"}]},
                        }
                    ],
                    "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": template}],
                }
            },
        },
    }
