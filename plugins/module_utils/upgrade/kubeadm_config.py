# Copyright: gpufleet contributors
# Apache License 2.0 (see LICENSE)
"""kubeadm's side of a rolling upgrade: the UpgradeConfiguration ``kubeadm upgrade
apply``/``node`` read, the apply command, and the DRA settings the kubeadm ConfigMaps hold.

Pure: no I/O. kubeadm reads an ``UpgradeConfiguration`` (``kubeadm upgrade apply
--config``) from ``kubeadm.k8s.io/v1beta4``, i.e. from 1.31
(``cmd/kubeadm/app/apis/kubeadm/v1beta4/types.go``; ``--config`` mixes only with
``--yes``, ``--ignore-preflight-errors``, ``--dry-run`` and ``--skip-*``:
``cmd/kubeadm/app/apis/kubeadm/validation/validation.go`` ``isAllowedFlag``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ansible_collections.gpufleet.cluster.plugins.module_utils.common import messages as msg
from ansible_collections.gpufleet.cluster.plugins.module_utils.dra import core as dra_core
from ansible_collections.gpufleet.cluster.plugins.module_utils.dra import settings as dra_settings
from ansible_collections.gpufleet.cluster.plugins.module_utils.dra.kubernetes_facts import (
    UPGRADE_CONFIGURATION_SINCE,
)
from ansible_collections.gpufleet.cluster.plugins.module_utils.kube import kubelet_config
from ansible_collections.gpufleet.cluster.plugins.module_utils.kube.flags import ConfigEditError


def upgrade_configuration(
    version: str,
    *,
    ignore_preflight_errors: Sequence[str] = (),
    image_pull_policy: str = "",
    etcd_upgrade: bool = True,
    certificate_renewal: bool = True,
) -> dict[str, Any] | None:
    """The ``kubeadm.k8s.io/v1beta4`` UpgradeConfiguration for ``kubeadm upgrade apply`` and
    ``kubeadm upgrade node --config`` at ``version``, or None before 1.31 (flags only).
    Field names from ``cmd/kubeadm/app/apis/kubeadm/v1beta4/types.go``."""
    v = dra_core.parse_version(version)
    if v.minor < UPGRADE_CONFIGURATION_SINCE:
        return None
    common: dict[str, Any] = {
        "certificateRenewal": certificate_renewal,
        "etcdUpgrade": etcd_upgrade,
    }
    if ignore_preflight_errors:
        common["ignorePreflightErrors"] = list(ignore_preflight_errors)
    if image_pull_policy:
        common["imagePullPolicy"] = image_pull_policy
    # kubeadm refuses a pre-release target unless told (phases/upgrade/policy.go)
    unstable = {"allowExperimentalUpgrades": True} if v.pre else {}
    return {
        "apiVersion": "kubeadm.k8s.io/v1beta4",
        "kind": "UpgradeConfiguration",
        "apply": {"kubernetesVersion": f"v{v}", **unstable, **common},
        "node": dict(common),
        "plan": {
            "kubernetesVersion": f"v{v}",
            **unstable,
            "etcdUpgrade": etcd_upgrade,
            **(
                {"ignorePreflightErrors": list(ignore_preflight_errors)}
                if ignore_preflight_errors
                else {}
            ),
        },
    }


def apply_command(
    version: dra_core.KubeVersion, ignore_preflight_errors: Sequence[str]
) -> tuple[bool, list[str]]:
    """``(UpgradeConfiguration used, kubeadm upgrade apply argv)`` for ``version``: with a
    configuration file from 1.UPGRADE_CONFIGURATION_SINCE on, else with flags."""
    cfg = upgrade_configuration(str(version), ignore_preflight_errors=ignore_preflight_errors)
    if cfg is not None:
        return True, ["kubeadm", "upgrade", "apply", f"v{version}", "--config",
                      "/etc/kubernetes/gpufleet/upgrade-configuration.yaml", "--yes"]  # fmt: skip
    command = ["kubeadm", "upgrade", "apply", f"v{version}", "--yes"]
    if version.pre:
        command.append("--allow-experimental-upgrades")
    if ignore_preflight_errors:
        command.append("--ignore-preflight-errors=" + ",".join(ignore_preflight_errors))
    return False, command


def settings_from_configmaps(
    cluster_configuration: Mapping[str, Any] | None, kubelet_configuration: Mapping[str, Any] | None
) -> dict[str, dict[str, Any]]:
    """Feature gates and runtime-config per component as the kubeadm ConfigMaps hold them:
    ``ClusterConfiguration`` (``apiServer``/``controllerManager``/``scheduler``
    ``extraArgs``, a map in v1beta3, a list of ``{name, value}`` in v1beta4) and
    ``KubeletConfiguration`` (``featureGates``). Returns the ``current_settings`` shape of
    ``build_plan``. Malformed gate values raise VersionParseError."""
    out: dict[str, dict[str, Any]] = {}
    cc = cluster_configuration or {}
    for key, component in (
        ("apiServer", dra_core.APISERVER),
        ("controllerManager", dra_core.CONTROLLER_MANAGER),
        ("scheduler", dra_core.SCHEDULER),
    ):
        args = (cc.get(key) or {}).get("extraArgs") or {}
        pairs: list[tuple[str, str]]
        if isinstance(args, Mapping):
            pairs = [(str(k), str(v)) for k, v in args.items()]
        else:
            pairs = [(str(a.get("name")), str(a.get("value", ""))) for a in args]
        gates: dict[str, bool] = {}
        rc: list[str] = []
        for name, value in pairs:
            if name == "feature-gates":
                gates.update(dra_settings.parse_feature_gates(value))
            elif name == "runtime-config":
                rc.extend(f"{k}={v}" for k, v in dra_settings.parse_runtime_config(value))
        out[component] = {"feature_gates": gates, "runtime_config": rc}
    try:
        gates = kubelet_config.feature_gates_of(
            kubelet_configuration or {}, "kubeadm ConfigMap kubelet-config"
        )
    except ConfigEditError as exc:
        text, fix = msg.split_fix(str(exc))
        raise dra_core.VersionParseError(text + ".", fix) from None
    out[dra_core.KUBELET] = {
        "feature_gates": {str(k): v for k, v in (gates or {}).items()},
        "runtime_config": [],
    }
    return out
