"""Filters for the cluster-wide variables (module_utils cluster_facts): the role variables
that disagree with them, and the role variables as the roles will see them."""

from __future__ import annotations

DOCUMENTATION = r"""
name: cluster_facts_check
short_description: Refuse role variables that disagree with the cluster-wide variables
version_added: 0.1.0
description:
  - The Kubernetes release, the kubeconfig and the NVIDIA DRA driver's namespace are set once
    for the cluster (C(gpufleet_kubernetes_version), C(gpufleet_kubeconfig),
    C(gpufleet_dra_driver_namespace)); each role's own variable defaults to them.
  - An error for each role variable the inventory also sets to another value (naming both
    variables and both values), and for a cluster-wide release that is not a release or
    that the version model does not provision. Identical errors of several hosts are merged.
  - Filter C(cluster_facts_effective) returns the same hosts with each role variable that is
    not set given its cluster-wide value, for the other preflight rules.
options:
  _input:
    description:
      - Inventory host to C({variables, cluster}); C(variables) the role variables the
        inventory sets, C(cluster) the cluster-wide ones it sets.
    type: dict
    required: true
"""

EXAMPLES = r"""
- name: Preflight | Check the role variables against the cluster-wide ones
  ansible.builtin.set_fact:
    preflight_cluster_result: >-
      {{ {'cp-1': {'variables': {'mig_kubeconfig': '/etc/k.conf'},
                   'cluster': {'gpufleet_kubeconfig': '~/.kube/prod.conf'}}}
         | gpufleet.cluster.cluster_facts_check }}
"""

RETURN = r"""
_value:
  description:
    - C(ok), true when no role variable disagrees; C(errors), a list of C({rule, severity,
      variable, value, message, fix, hosts}); C(report), one line per error.
  type: dict
"""

from ansible.errors import AnsibleFilterError


def _hosts(hosts, name):
    from ansible_collections.gpufleet.cluster.plugins.module_utils.cluster import facts as cf
    from ansible_collections.gpufleet.cluster.plugins.module_utils.common.limits import (
        plain_value as _plain,
    )

    if not hasattr(hosts, "items"):
        raise AnsibleFilterError(
            f"{name} takes a mapping of inventory host to {{variables, cluster}}, got "
            f"{type(hosts).__name__}"
        )
    data = _plain(hosts)
    known = {fact.name for fact in cf.CLUSTER_FACTS}
    out = {}
    for host, entry in data.items():
        entry = entry if isinstance(entry, dict) else {}
        cluster = {k: v for k, v in (entry.get("cluster") or {}).items() if k in known}
        out[host] = {**entry, "variables": dict(entry.get("variables") or {}), "cluster": cluster}
    return out


def cluster_facts_check(hosts):
    """``{"ok", "errors", "report"}`` for the hosts' role and cluster-wide variables."""
    from ansible_collections.gpufleet.cluster.plugins.module_utils.cluster import facts as cf

    data = _hosts(hosts, "cluster_facts_check")
    return cf.check_hosts(
        {h: {"variables": {**e["variables"], **e["cluster"]}} for h, e in data.items()}
    )


def cluster_facts_effective(hosts):
    """The hosts with ``variables`` as the roles see them (see module_utils cluster_facts)."""
    from ansible_collections.gpufleet.cluster.plugins.module_utils.cluster import facts as cf

    data = _hosts(hosts, "cluster_facts_effective")
    out = {}
    for host, entry in data.items():
        filled = cf.effective_variables({**entry["variables"], **entry["cluster"]})
        for name in entry["cluster"]:
            if name not in entry["variables"]:
                filled.pop(name, None)
        out[host] = {**entry, "variables": filled}
    return out


class FilterModule:
    """Cluster-wide variable filters."""

    def filters(self):
        return {
            "cluster_facts_check": cluster_facts_check,
            "cluster_facts_effective": cluster_facts_effective,
        }
