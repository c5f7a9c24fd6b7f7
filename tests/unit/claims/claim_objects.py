"""Claim templates and their problems, shared by the builder and checker tests."""

from __future__ import annotations

from ansible_collections.gpufleet.cluster.plugins.module_utils.claims import check as cchk
from ansible_collections.gpufleet.cluster.plugins.module_utils.claims import problems as cprob
from ansible_collections.gpufleet.cluster.plugins.module_utils.claims import templates as ct

MEMORY_CEL = "device.capacity['gpu.nvidia.com'].memory.compareTo(quantity('40Gi')) >= 0"


def devices(obj: dict) -> dict:
    return obj["spec"]["spec"]["devices"]


def errors(obj: dict, version: str | None = None) -> list[cprob.Problem]:
    return [p for p in cchk.check_claim_spec(obj, version) if p.severity == cprob.ERROR]


def _base() -> dict:
    return ct.gpu_with_memory(40, kubernetes_version="1.37.2")


def _exact(obj: dict) -> dict:
    return devices(obj)["requests"][0]["exactly"]
