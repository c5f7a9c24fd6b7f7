# Copyright: gpufleet contributors
# Apache License 2.0 (see LICENSE)
"""Kubernetes releases from which a behaviour the roles rely on exists, each with where in
the Kubernetes source it comes from. Minors of 1.x (``31`` is Kubernetes 1.31).

The rest of the version model holds the other facts: the provision range
(``dra.core.PROVISION_MIN_MINOR``/``PROVISION_MAX_MINOR``), gate dependencies
(``dra.core.DEPENDENCIES_DECLARED_SINCE``), feature gates and ``resource.k8s.io`` versions per
release (``dra.gates``, ``dra.api``), kubeadm's configuration API (``dra.api``), the CEL
environment per release (``dra.cel_env``)."""

from __future__ import annotations

__all__ = ["FAIL_CGROUP_V1_SINCE", "UPGRADE_CONFIGURATION_SINCE", "UPGRADE_MIN_MINOR"]

#: ``KubeletConfiguration.failCgroupV1`` exists from 1.31 (KEP-4569;
#: staging/src/k8s.io/kubelet/config/v1beta1/types.go ``FailCgroupV1``): older kubelets
#: ignore ``kubeadm_allow_cgroup_v1``.
FAIL_CGROUP_V1_SINCE = 31

#: kubeadm takes an ``UpgradeConfiguration`` (``kubeadm upgrade apply --config``) from 1.31,
#: with kubeadm.k8s.io/v1beta4 (cmd/kubeadm/app/apis/kubeadm/v1beta4/types.go
#: ``UpgradeConfiguration``); older kubeadm upgrades take flags only.
UPGRADE_CONFIGURATION_SINCE = 31

#: The oldest release a rolling upgrade starts from (design: any consecutive pair of minors
#: from 1.31; kubeadm upgrades one minor at a time, cmd/kubeadm/app/phases/upgrade/
#: policy.go ``EnforceVersionPolicies``). The newest it goes to is
#: ``dra.core.PROVISION_MAX_MINOR``.
UPGRADE_MIN_MINOR = 31
