"""Filter that runs the cross-variable checks of an inventory (module_utils preflight)."""

from __future__ import annotations

DOCUMENTATION = r"""
name: preflight_check
short_description: Cross-variable checks of an inventory, before any host is changed
version_added: 0.1.0
description:
  - Runs every rule of the collection's preflight checks on every host given and merges the
    problems that several hosts share, so that a role can fail once listing them all.
  - 'Rules: removed variables, variables with a role prefix that no role declares (warning),
    every value a role''s argument spec refuses (Ansible''s own validator, before any play),
    the Kubernetes release (format, the version model''s provision range, the same release in every
    role and on every host), DRA feature gates and features the release accepts, kubeadm
    and dra_feature_gates asking for the same gates (warning), kubeadm_allow_cgroup_v1 before
    1.31 (warning), the NVIDIA driver pin and branch 565 for DRA, the container toolkit
    against the containerd release, the DRA driver chart against the release (kubeVersion
    and the documented minimum of the version model), DRA driver feature gates that exclude each
    other or that the chart lacks, DynamicMIG against the release and against a static MIG
    layout, a MIG layout against the node group''s GPU model, and every value the roles write
    into a configuration file, a systemd unit or a command line against that place''s grammar
    (Prometheus durations, HOST:PORT, absolute paths, URLs, no line break), and the Python
    libraries of meta/ee-requirements.txt, which the modules run on the control host import,
    in the Python that runs ansible-playbook.'
options:
  _input:
    description:
      - Inventory host to C({groups, variables, gpus, driver_version}); C(variables) holds the
        variables the inventory sets, C(gpus) and C(driver_version) the optional gpu_facts
        C(gpufleet_gpus) and C(gpufleet_gpu_driver_version).
    type: dict
    required: true
  removed:
    description: Removed variable name to its new name, or to C({new, fix}).
    type: dict
    default: {}
  known_variables:
    description:
      - Every variable name the roles declare; a variable with a role prefix outside it is
        reported as a probable typo. Omit to skip that rule.
    type: list
    elements: str
  roles_dir:
    description:
      - The collection's roles directory; with O(roles), every value a host sets is judged by
        its role's C(meta/argument_specs.yml) (entry point C(main); C(required) is not
        judged). Omit to skip that rule.
    type: str
  roles:
    description: The roles whose argument specs judge the values (with O(roles_dir)).
    type: list
    elements: str
notes:
  - The companion filter C(config_value_problems) takes a mapping of variables and returns
    one line per value that cannot be written where its role writes it (the same rule).
"""

EXAMPLES = r"""
- name: Preflight | Check the inventory
  ansible.builtin.set_fact:
    preflight_result: >-
      {{ {'gpu-1': {'groups': ['gpu_nodes'], 'variables': {'nvidia_driver_branch': '550'}}}
         | gpufleet.cluster.preflight_check({'kube_version': 'kubeadm_kubernetes_version'}) }}
"""

RETURN = r"""
_value:
  description:
    - C(errors) and C(warnings), lists of C({rule, severity, variable, value, message, fix,
      hosts}); C(report), the problems as text, one line each, naming the variable, the value,
      the hosts and the fix; C(ok), true when there is no error.
  type: dict
"""

import importlib.util
import sys

from ansible.errors import AnsibleFilterError


def preflight_check(hosts, removed=None, known_variables=None, roles_dir=None, roles=None):
    """Return ``{"ok", "errors", "warnings", "report"}`` for the hosts' variables."""
    from ansible_collections.gpufleet.cluster.plugins.module_utils.common.limits import (
        plain_value as _plain,
    )
    from ansible_collections.gpufleet.cluster.plugins.module_utils.preflight import (
        libraries as preflight_libraries,
    )
    from ansible_collections.gpufleet.cluster.plugins.module_utils.preflight import (
        problem as preflight_problem,
    )
    from ansible_collections.gpufleet.cluster.plugins.module_utils.preflight import rules as pf
    from ansible_collections.gpufleet.cluster.plugins.module_utils.preflight import specs as ps

    if not hasattr(hosts, "items"):
        raise AnsibleFilterError(
            f"preflight_check takes a mapping of inventory host to its variables, got "
            f"{type(hosts).__name__}"
        )
    data = _plain(hosts)
    try:
        specs = ps.load_role_specs(str(roles_dir), _plain(roles or [])) if roles_dir else None
    except ValueError as err:
        raise AnsibleFilterError(str(err)) from None
    problems = pf.check_inventory(
        data,
        removed=_plain(removed or {}),
        known_variables=None if known_variables is None else _plain(known_variables),
        role_specs=specs,
        controller={
            "python": sys.executable,
            "importable": {
                name: importlib.util.find_spec(name) is not None
                for name in preflight_libraries.import_names()
            },
        },
    )
    return {
        "ok": not any(p.severity == preflight_problem.ERROR for p in problems),
        "errors": [p.to_dict() for p in problems if p.severity == preflight_problem.ERROR],
        "warnings": [p.to_dict() for p in problems if p.severity == preflight_problem.WARNING],
        "report": pf.format_report(problems, data),
    }


def config_value_problems(variables):
    """One line per value of ``variables`` that cannot be written where its role writes it
    (``preflight.config_values``): a role's check on entry."""
    from ansible_collections.gpufleet.cluster.plugins.module_utils.common.limits import (
        plain_value as _plain,
    )
    from ansible_collections.gpufleet.cluster.plugins.module_utils.preflight import (
        config_values as preflight_config_values,
    )

    if not hasattr(variables, "items"):
        raise AnsibleFilterError(
            f"config_value_problems takes a mapping of variables, got {type(variables).__name__}"
        )
    return preflight_config_values.check_values(_plain(variables))


class FilterModule:
    """Preflight filters."""

    def filters(self):
        return {"preflight_check": preflight_check, "config_value_problems": config_value_problems}
