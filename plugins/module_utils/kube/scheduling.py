# Copyright: gpufleet contributors
# Apache License 2.0 (see LICENSE)
"""Where a DaemonSet's pod can run: whether a Node passes the pod's node selector, required
node affinity and tolerations (``scheduling_problem``), and the tolerations a pod needs for
the taints of its nodes (``tolerations_for``).

The rules are the DaemonSet controller's (pkg/controller/daemon/daemon_controller.go
``NodeShouldRunDaemonPod``): only required node affinity counts, only ``NoSchedule`` and
``NoExecute`` taints keep a pod off, and the node-condition taints of
``DAEMONSET_TOLERATED_TAINTS`` never do. The callers (the DRA driver's kubelet plugin, NVIDIA's
device plugin) name their own chart values and pod in the reasons.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from ansible_collections.gpufleet.cluster.plugins.module_utils.common import k8s_names
from ansible_collections.gpufleet.cluster.plugins.module_utils.common.messages import RefusedValue

__all__ = [
    "DAEMONSET_TOLERATED_TAINTS",
    "TAINT_EFFECTS",
    "node_name_of",
    "scheduling_problem",
    "tolerations_for",
]

#: Taints every DaemonSet pod tolerates: the DaemonSet controller adds these tolerations
#: itself (pkg/controller/daemon/util/daemonset_util.go AddOrUpdateDaemonPodTolerations).
#: The effects a node taint may have (``k8s.io/api/core/v1`` ``TaintEffect``).
TAINT_EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")

DAEMONSET_TOLERATED_TAINTS = frozenset(
    {
        "node.kubernetes.io/not-ready",
        "node.kubernetes.io/unreachable",
        "node.kubernetes.io/disk-pressure",
        "node.kubernetes.io/memory-pressure",
        "node.kubernetes.io/pid-pressure",
        "node.kubernetes.io/unschedulable",
        "node.kubernetes.io/network-unavailable",
    }
)


def node_name_of(node: Mapping[str, Any]) -> str:
    """A Node object's ``metadata.name`` ("" when it has none)."""
    return str(node.get("metadata", {}).get("name") or "")


def _expr_matches(labels: Mapping[str, str], expr: Mapping[str, Any]) -> bool:
    key, op = expr.get("key"), expr.get("operator")
    vals = [str(v) for v in expr.get("values") or []]
    if op == "In":
        return key in labels and labels[key] in vals
    if op == "NotIn":
        return key not in labels or labels[key] not in vals
    if op == "Exists":
        return key in labels
    if op == "DoesNotExist":
        return key not in labels
    if op in ("Gt", "Lt") and key in labels and vals:
        try:
            have, want = int(labels[key]), int(vals[0])
        except ValueError:
            return False
        return have > want if op == "Gt" else have < want
    return False


def _describe_expr(expr: Mapping[str, Any]) -> str:
    op, key, vals = expr.get("operator"), expr.get("key"), expr.get("values") or []
    if op == "In":
        return f"{key}={'|'.join(str(v) for v in vals)}"
    if op == "Exists":
        return f"{key} (any value)"
    if op == "DoesNotExist":
        return f"no {key}"
    if op == "NotIn":
        return f"{key} not in {list(vals)}"
    return f"{key} {op} {list(vals)}"


def _tolerates(tol: Mapping[str, Any], taint: Mapping[str, Any]) -> bool:
    if tol.get("effect") and tol.get("effect") != taint.get("effect"):
        return False
    op = tol.get("operator") or "Equal"
    if not tol.get("key"):
        return op == "Exists"
    if tol.get("key") != taint.get("key"):
        return False
    return op == "Exists" or str(tol.get("value") or "") == str(taint.get("value") or "")


def scheduling_problem(
    node: Mapping[str, Any],
    pod_spec: Mapping[str, Any],
    *,
    values: str = "",
    owner: str = "the pod's",
) -> str:
    """Why a DaemonSet pod cannot run on ``node`` (a Node object), or "" when it can.

    ``pod_spec`` holds the pod's ``nodeSelector``, ``affinity`` and ``tolerations`` (a pod
    template's spec, or chart values of the same names; a missing one is empty). The reason
    names those settings with the prefix ``values`` (``kubeletPlugin.`` for the DRA driver's
    chart, ``""`` for charts with top-level ``nodeSelector``) and the pod by ``owner``, a
    possessive (``the device plugin's``)."""
    labels = node.get("metadata", {}).get("labels") or {}
    selector = pod_spec.get("nodeSelector") or {}
    missing = [f"{k}={v}" for k, v in selector.items() if labels.get(k) != str(v)]
    if missing:
        return "lacks the label(s) " + ", ".join(missing) + f" that {values}nodeSelector requires"
    required = ((pod_spec.get("affinity") or {}).get("nodeAffinity") or {}).get(
        "requiredDuringSchedulingIgnoredDuringExecution"
    ) or {}
    terms = required.get("nodeSelectorTerms") or []
    if terms and not any(
        all(_expr_matches(labels, e) for e in t.get("matchExpressions") or []) for t in terms
    ):
        wants = [
            " and ".join(_describe_expr(e) for e in t.get("matchExpressions") or []) for t in terms
        ]
        return (
            f"matches none of {owner} required node affinity terms: it needs one of "
            + "; ".join(wants)
        )
    tolerations = pod_spec.get("tolerations") or []
    for taint in node.get("spec", {}).get("taints") or []:
        if taint.get("effect") not in ("NoSchedule", "NoExecute"):
            continue
        if taint.get("key") in DAEMONSET_TOLERATED_TAINTS:
            continue
        if not any(_tolerates(t, taint) for t in tolerations):
            value = f"={taint['value']}" if taint.get("value") else ""
            return (
                f"has the taint {taint.get('key')}{value}:{taint.get('effect')} that "
                f"{values}tolerations do not tolerate"
            )
    return ""


def tolerations_for(
    taints: Iterable[Any],
    kept: Iterable[Mapping[str, Any]] = (),
    *,
    variable: str,
    error: type[RefusedValue] = RefusedValue,
) -> list[dict[str, Any]]:
    """``kept`` (a chart's own tolerations, copied, first), then one toleration per taint of
    ``taints`` (``{key, value?, effect}``, as ``gpu_node_labels_taints`` gives them) that
    ``kept`` does not already hold: by key and, where the taint has one, effect
    (``operator: Exists``, so any value is tolerated).

    Raises ``error`` (a ``RefusedValue``; the caller's own class) naming ``variable`` (the
    role variable the taints come from) for taints that are not a list, or a taint that is
    not a mapping with a key that is a qualified name and an effect of ``TAINT_EFFECTS``."""
    out = [dict(t) for t in kept]
    if not isinstance(taints, list | tuple):
        raise error(
            variable,
            taints,
            "not a list",
            "give taints as a list of {key: nvidia.com/gpu, effect: NoSchedule}",
        )
    for taint in taints:
        if not isinstance(taint, Mapping) or not taint.get("key"):
            raise error(
                variable,
                taint,
                "each taint needs a key (and an effect)",
                "give taints as {key: nvidia.com/gpu, effect: NoSchedule}",
            )
        why = k8s_names.qualified_name(taint["key"])
        if why or taint.get("effect") not in (None, "", *TAINT_EFFECTS):
            raise error(
                variable,
                taint,
                f"its key {why}" if why else f"its effect is none of {', '.join(TAINT_EFFECTS)}",
                "give taints as {key: nvidia.com/gpu, effect: NoSchedule}, as the nodes have them",
            )
        tol = {"key": str(taint["key"]), "operator": "Exists"}
        if taint.get("effect"):
            tol["effect"] = str(taint["effect"])
        if tol not in out:
            out.append(tol)
    return out
