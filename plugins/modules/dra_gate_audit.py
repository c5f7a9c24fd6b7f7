#!/usr/bin/python
# Copyright: gpufleet contributors
# Apache License 2.0 (see LICENSE)
"""Compare the DRA feature gates of a cluster across processes, files, ConfigMaps, hosts and
the DRA version model."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: dra_gate_audit
short_description: Audit the DRA feature gates and runtime-config of a kubeadm cluster
version_added: "0.1.0"
description:
  - Compares what M(gpufleet.cluster.dra_gate_audit_facts) read on every node (running
    processes, static pod manifests, kubelet configuration, C(/metrics)) with the kubeadm
    ConfigMaps C(kube-system/kubeadm-config) and C(kube-system/kubelet-config), host with host,
    and everything with the collection's DRA version model for the target Kubernetes version.
  - 'Findings have a stable id: C(gates.process-file-drift) (a process runs with other flags
    than its file: a restart is pending or a hand edit), C(gates.configmap-drift) (a file
    differs from the ConfigMap: C(kubeadm upgrade) would drop or change the entry),
    C(gates.node-drift) (one component differs between hosts), C(gates.model-missing),
    C(gates.model-mismatch), C(gates.model-forbidden) (an entry that stops the component at
    the target version), C(gates.model-advice), C(gates.runtime-config-unserved),
    C(gates.runtime-config-missing), C(gates.metric-drift), C(gates.metric-stage),
    C(gates.kubelet-flag-override), C(gates.restart-pending), C(gates.process-absent),
    C(gates.facts-missing), C(gates.component-not-found), C(gates.configmap-absent) and
    C(gates.source-unreadable).'
  - Each finding has a severity (C(fail) or C(warn)), the host (none for ConfigMap findings),
    the component, the gate or runtime-config entry, what each source says, a message and the
    fix.
  - Runs on the control host (C(delegate_to) or a play on C(localhost)); only reads.
  - The module fails when a finding has severity C(fail), unless O(fail_on_drift=false).
author:
  - gpufleet maintainers (!UNKNOWN)
requirements:
  - PyYAML
  - kubernetes (the Python client) and urllib3, which it installs, unless
    O(configmaps=false) and O(version) is given
  - msgspec (recommended), which decodes the listed pages faster; without it the
    standard library's json decodes them, to the same result
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
  - gpufleet.cluster.kube_auth

options:
  facts:
    description:
      - Per host what M(gpufleet.cluster.dra_gate_audit_facts) returned as C(facts), as a
        mapping inventory host to facts, or as a list of facts (each names its C(host)).
    type: raw
    required: true
  hosts:
    description:
      - Hosts that must have facts; a host without facts (unreachable, failed) is a
        C(gates.facts-missing) failure.
    type: list
    elements: str
    default: []
  version:
    description:
      - Kubernetes version to judge against, for example C(1.35.2); give the next release to
        check a cluster before upgrading to it. Defaults to the kube-apiserver's version
        (C(/version)).
    type: str
  features:
    description:
      - DRA features wanted beyond core DRA, by name (C(gpufleet gates plan --help) lists them).
    type: list
    elements: str
    default: []
  gates:
    description:
      - Explicit feature-gate wishes, gate name to boolean, as for the role
        C(dra_feature_gates).
    type: dict
    default: {}
  components:
    description:
      - Components audited.
    type: list
    elements: str
    choices: [kube-apiserver, kube-controller-manager, kube-scheduler, kubelet]
    default: [kube-apiserver, kube-controller-manager, kube-scheduler, kubelet]
  configmaps:
    description:
      - Read C(kube-system/kubeadm-config) and C(kube-system/kubelet-config) and compare them
        with the files.
    type: bool
    default: true
  fail_on_drift:
    description:
      - Fail the task when a finding has severity C(fail).
    type: bool
    default: true
attributes:
  check_mode:
    support: full
    details: The module only reads; it behaves the same in check mode.
  diff_mode:
    support: none
  platform:
    platforms: posix
seealso:
  - module: gpufleet.cluster.dra_gate_audit_facts
  - module: gpufleet.cluster.kubeadm_config_gates
  - module: gpufleet.cluster.static_pod_flags
  - module: gpufleet.cluster.kubelet_config_gates
"""

EXAMPLES = r"""
- name: DRA gate audit | Read every node
  gpufleet.cluster.dra_gate_audit_facts:
    host: "{{ inventory_hostname }}"
  register: node_gates

- name: DRA gate audit | Compare, once, on the control host
  run_once: true
  delegate_to: localhost
  gpufleet.cluster.dra_gate_audit:
    facts: "{{ ansible_play_hosts | map('extract', hostvars, ['node_gates', 'facts']) | list }}"
    hosts: "{{ ansible_play_hosts_all }}"
    kubeconfig: /etc/kubernetes/admin.conf
    features: [prioritized-list]

- name: DRA gate audit | Check the cluster against the next release before upgrading
  gpufleet.cluster.dra_gate_audit:
    facts: "{{ collected_facts }}"
    version: 1.36.3
    configmaps: true
    fail_on_drift: false
  register: pre_upgrade
"""

RETURN = r"""
audit:
  description:
    - The audit. C(version), C(features), C(gates), C(ok), C(counts) (C(fail), C(warn)),
      C(findings) (failures first; each with C(id), C(severity), C(host), C(component),
      C(kind), C(name), C(values) source to value, C(message), C(fix)), C(summary) (C(hosts),
      C(components), C(cells) component to host to C(state), C(feature_gates),
      C(runtime_config), C(metrics), C(flagged), C(fail), C(warn); C(configmaps)) and C(plan)
      (what the version model wants per component).
  returned: always
  type: dict
  sample:
    version: 1.37.2
    ok: false
    counts: {fail: 1, warn: 0}
    findings:
      - id: gates.node-drift
        severity: fail
        host: cp-2
        component: kube-apiserver
        kind: feature-gate
        name: DRAPartitionableDevices
        values: {this host: "false", reference: "true"}
        message: kube-apiserver on cp-2 runs with DRAPartitionableDevices=false; 1 of 2 hosts
          run DRAPartitionableDevices=true (the version model's value)
        fix: "give kube-apiserver the same --feature-gates on every host: gpufleet gates apply
          -i INVENTORY"
table:
  description: The audit as plain-text lines (hosts and components, then the findings).
  returned: always
  type: list
  elements: str
version:
  description: The Kubernetes version judged against and where it came from.
  returned: always
  type: dict
  sample: {version: 1.37.2, source: kube-apiserver /version}
"""

import traceback

from ansible.module_utils.basic import AnsibleModule, missing_required_lib
from ansible_collections.gpufleet.cluster.plugins.module_utils.dra import core as dra_core
from ansible_collections.gpufleet.cluster.plugins.module_utils.gate_audit import audit as ga
from ansible_collections.gpufleet.cluster.plugins.module_utils.gate_audit import facts as gf
from ansible_collections.gpufleet.cluster.plugins.module_utils.gate_audit import report as gr
from ansible_collections.gpufleet.cluster.plugins.module_utils.gate_audit import terms as gt
from ansible_collections.gpufleet.cluster.plugins.module_utils.kube import client as vk
from ansible_collections.gpufleet.cluster.plugins.module_utils.kube import manifests as kce

try:
    from kubernetes import client as k8s_client
    from kubernetes.client.rest import ApiException

    HAS_KUBERNETES = True
    KUBERNETES_IMPORT_ERROR = None
except ImportError:
    HAS_KUBERNETES = False
    KUBERNETES_IMPORT_ERROR = traceback.format_exc()

NAMESPACE = "kube-system"


def host_facts(raw) -> dict[str, gf.HostFacts]:
    """Host -> HostFacts from the ``facts`` parameter (a mapping or a list)."""
    if isinstance(raw, dict):
        return {str(h): gf.HostFacts.from_dict(f, str(h)) for h, f in raw.items()}
    if isinstance(raw, list):
        out: dict[str, gf.HostFacts] = {}
        for index, item in enumerate(raw):
            facts = gf.HostFacts.from_dict(item)
            if facts.host in out:
                raise gt.GateAuditError(
                    f"facts[{index}]: host {facts.host!r} appears twice; fix: give every host "
                    "its own name (the facts module's host option, normally inventory_hostname)"
                )
            out[facts.host] = facts
        return out
    raise gt.GateAuditError(
        f"facts is a {type(raw).__name__}; fix: pass a mapping of host to the facts module's "
        "'facts', or a list of them"
    )


def _unreachable(api_client, err: BaseException) -> str:
    """The API server of ``api_client`` gave no answer: say which, why and the fix."""
    server = getattr(getattr(api_client, "configuration", None), "host", "?")
    return vk.unreachable(server, err, vk.REQUEST_TIMEOUT)


#: The module's options (DOCUMENTATION describes each).
ARGUMENT_SPEC = dict(
    facts=dict(type="raw", required=True),
    hosts=dict(type="list", elements="str", default=[]),
    version=dict(type="str"),
    features=dict(type="list", elements="str", default=[]),
    gates=dict(type="dict", default={}),
    components=dict(
        type="list",
        elements="str",
        choices=list(gt.COMPONENTS),
        default=list(gt.COMPONENTS),
    ),
    configmaps=dict(type="bool", default=True),
    **vk.kube_auth_argspec(),
    fail_on_drift=dict(type="bool", default=True),
)


def main() -> None:
    module = AnsibleModule(
        argument_spec=ARGUMENT_SPEC,
        supports_check_mode=True,
    )
    params = module.params
    if not kce.HAS_YAML:
        module.fail_json(msg=missing_required_lib("PyYAML"), exception=kce.YAML_IMPORT_ERROR)
    try:
        hosts = host_facts(params["facts"])
    except gt.GateAuditError as err:
        module.fail_json(msg=str(err))
    needs_api = params["configmaps"] or not params["version"]
    api_client = None
    if needs_api:
        if not HAS_KUBERNETES:
            module.fail_json(
                msg=missing_required_lib("kubernetes")
                + "; or give version and configmaps=false to audit without the cluster",
                exception=KUBERNETES_IMPORT_ERROR,
            )
        try:
            api_client = vk.api_client(params["kubeconfig"], params["context"])
        except vk.KubeError as err:
            module.fail_json(
                msg=f"{err.message}; fix: pass kubeconfig (dra_gate_audit_kubeconfig) and context"
            )
    version = params["version"]
    version_source = "the version parameter"
    if not version:
        try:
            api = k8s_client.VersionApi(api_client)
            version = api.get_code(_request_timeout=vk.REQUEST_TIMEOUT).git_version
        except ApiException as err:
            module.fail_json(
                msg=f"cannot read /version from the kube-apiserver: {err}; fix: check the "
                "kubeconfig, or give version"
            )
        except Exception as err:  # no answer: refused, timed out, TLS
            module.fail_json(msg=_unreachable(api_client, err) + "; or give version")
        version_source = "kube-apiserver /version"
    try:
        dra_core.parse_version(version, "version")
    except dra_core.VersionParseError as err:
        module.fail_json(msg=str(err))
    configmaps = None
    if params["configmaps"]:
        try:
            configmaps = ga.read_configmap_facts(vk.Kube.from_client(api_client), version)
        except vk.KubeError as err:
            fix = (
                "use a user that may read ConfigMaps in kube-system"
                if err.status
                else "check that kube-apiserver answers"
            )
            module.fail_json(
                msg=f"cannot read ConfigMaps in {NAMESPACE}: {err}; fix: {fix}, or configmaps=false"
            )
    try:
        result = ga.audit(
            hosts,
            version,
            features=params["features"],
            gates=params["gates"],
            configmaps=configmaps,
            expected_hosts=params["hosts"],
            components=params["components"],
        )
    except dra_core.VersionModelError as err:
        module.fail_json(msg=f"the DRA version model refuses the request at {version}: {err}")
    except gt.GateAuditError as err:
        module.fail_json(msg=str(err))
    data = result.to_dict()
    table = gr.format_table(data)
    out = dict(
        changed=False,
        audit=data,
        table=table,
        version={"version": result.version, "source": version_source},
    )
    if result.failed and params["fail_on_drift"]:
        first = result.failed[0]
        module.fail_json(
            msg=f"{len(result.failed)} gate finding(s) failed, first: {first.id} "
            f"{first.host or '(cluster)'} {first.component or ''} {first.name or ''}: "
            f"{first.message}",
            **out,
        )
    module.exit_json(msg=f"{len(result.failed)} failed, {len(result.warnings)} warnings", **out)


if __name__ == "__main__":
    main()
