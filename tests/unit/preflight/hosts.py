"""One host's preflight check with good defaults and the problems by rule, shared by the rule
tests.
"""

from __future__ import annotations

from typing import Any

from ansible_collections.gpufleet.cluster.plugins.module_utils.preflight import problem as pp
from ansible_collections.gpufleet.cluster.plugins.module_utils.preflight import rules as pf

GPU = ["k8s_cluster", "kube_node", "gpu_nodes", "gpu_h200"]

CP = ["k8s_cluster", "kube_control_plane"]

GOOD = {"kubeadm_kubernetes_version": "1.37.2"}


def _host(
    variables: dict[str, Any], groups: list[str] | None = None, **kw: Any
) -> list[pp.Problem]:
    return pf.check_host("gpu-1", groups or GPU, {**GOOD, **variables}, **kw)


def _rules(problems: list[pp.Problem]) -> dict[str, pp.Problem]:
    return {p.rule: p for p in problems}
