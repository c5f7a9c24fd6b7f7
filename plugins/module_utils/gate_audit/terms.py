# Copyright: gpufleet contributors
# Apache License 2.0 (see LICENSE)
"""The vocabulary of the DRA gate audit: components, entry kinds (feature gate,
runtime-config), source names, severities, the kubeadm ConfigMaps, and the one error the
audit raises (``GateAuditError``); the value normalisation every part shares.

Pure, standard library only: shipped to the nodes with ``gate_audit.facts`` and
``gate_audit.metrics``.
"""

from __future__ import annotations

from ansible_collections.gpufleet.cluster.plugins.module_utils.dra import core as dra_core
from ansible_collections.gpufleet.cluster.plugins.module_utils.kube import flags as kfl
from ansible_collections.gpufleet.cluster.plugins.module_utils.kube import manifests as kce

__all__ = [
    "COMPONENTS",
    "DEFAULT_SECURE_PORTS",
    "FEATURE_METRIC",
    "GateAuditError",
]


COMPONENTS = dra_core.COMPONENTS


APISERVER, CONTROLLER_MANAGER, SCHEDULER, KUBELET = dra_core.COMPONENTS


FEATURE_GATE = "feature-gate"


RUNTIME_CONFIG = "runtime-config"


PROCESS = "process"


FILE = "file"


CONFIGMAP = "configmap"


METRIC = "metric"


MODEL = "model"


FAIL = "fail"


WARN = "warn"


SEVERITY_ORDER = {FAIL: 0, WARN: 1}


#: Secure ports the components serve /metrics on when no flag says otherwise:
#: kube-apiserver ``--secure-port`` 6443 (kubeadm's default), kube-controller-manager
#: 10257 (``KubeControllerManagerPort``), kube-scheduler 10259 (``KubeSchedulerPort``),
#: kubelet 10250 (``KubeletPort``); ``staging/src/k8s.io/cloud-provider/ports.go`` and
#: ``pkg/cluster/ports/ports.go``.
DEFAULT_SECURE_PORTS = {
    APISERVER: 6443,
    CONTROLLER_MANAGER: 10257,
    SCHEDULER: 10259,
    KUBELET: 10250,
}


#: The metric every component registers with one sample per feature gate
#: (component-base/metrics/prometheus/feature/metrics.go, ``featureInfo``).
FEATURE_METRIC = "kubernetes_feature_enabled"


#: kubeadm ConfigMaps (cmd/kubeadm/app/constants: KubeadmConfigConfigMap,
#: KubeletBaseConfigurationConfigMap) and their keys.
KUBEADM_CONFIGMAP = "kube-system/kubeadm-config"


KUBELET_CONFIGMAP = "kube-system/kubelet-config"


CLUSTER_SECTIONS = kce.CLUSTER_CONFIGURATION_SECTIONS


class GateAuditError(ValueError):
    """Input the audit cannot use (malformed facts, a bad parameter); the message names
    the value and the fix."""


# ------------------------------------------------------------------ flag sets


def bool_text(value: bool) -> str:
    return "true" if value else "false"


def rc_value(value: str) -> str:
    """A runtime-config value as kube-apiserver reads it: ``""`` is true, Go booleans are
    normalised to ``true``/``false``, anything else is kept."""
    if value == "":
        return "true"
    parsed = kfl.parse_go_bool(value)
    return value if parsed is None else bool_text(parsed)


FACTS_FIX = (
    "fix: pass what the module gpufleet.cluster.dra_gate_audit_facts of the same collection "
    "version returned (its 'facts')"
)


def configmap_for(component: str) -> str:
    return KUBELET_CONFIGMAP if component == KUBELET else KUBEADM_CONFIGMAP
