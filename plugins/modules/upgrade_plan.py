#!/usr/bin/python
# Copyright: gpufleet contributors
# Apache License 2.0 (see LICENSE)
"""Plan a rolling Kubernetes upgrade from what the cluster runs."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: upgrade_plan
short_description: Plan a rolling kubeadm upgrade, one minor at a time
version_added: "0.1.0"
description:
  - Reads, with one list call each, the Nodes (kubelet versions, cordon state), the
    C(kube-apiserver) static pods in C(kube-system) (apiserver versions from the image tag)
    and the ResourceSlices (GPU devices per node), plus the C(kubeadm-config) and
    C(kubelet-config) ConfigMaps (the DRA settings in force), and plans the upgrade to
    O(target) with the collection's planner (module_utils C(upgrade_plan)).
  - With O(host_facts) (what M(gpufleet.cluster.dra_gate_audit_facts) read on each node)
    it also judges every host's static pod manifests, kubelet configuration file and
    running processes against each step's target release.
  - An entry the target release refuses to start with and the upgrade does not change
    itself (a feature gate outside the DRA gates, such as C(CSIMigration); a runtime-config
    entry the transition does not drop) is returned in RV(blocking) with where it is, why
    and the fix. The module does not fail for it; the upgrade role refuses such a plan
    before any host is changed.
  - Returns the whole plan and, for convenience, its first step and the hosts of each
    kind in the order they are to be upgraded.
  - With O(snapshot) it plans from a saved cluster snapshot instead; no cluster and no
    host is read (kubeadm versions and gate facts are the snapshot's).
    O(save_snapshot) writes what was read, in that shape.
  - With O(judge_only) it judges only what needs neither the cluster nor a host (the
    releases, batch size, GPU floor, DRA wishes, repository template) and returns no plan;
    playbooks/upgrade.yml runs it first, on the control host, before any host is read.
  - Reads the upgrade report of an earlier run (O(report_path)); the hosts it drained and
    left cordoned on the way to O(target) are resumed, unless the report is another
    cluster's (its C(cluster_uid) differs from the cluster's kube-system UID).
  - Changes nothing on the cluster or the hosts; writes only O(plan_file) and
    O(save_snapshot) on the control host, also in check mode. Runs on the control host.
author:
  - gpufleet maintainers (!UNKNOWN)
requirements:
  - kubernetes (the Python client) and urllib3, which it installs
  - msgspec (recommended), which decodes the listed pages faster; without it the
    standard library's json decodes them, to the same result
  - PyYAML
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
  - gpufleet.cluster.kube_auth
options:
  target:
    description: Release to upgrade to, for example C(1.37.2).
    type: str
    required: true
  hosts:
    description:
      - Inventory hosts in order, each C({host, name, control_plane}); C(name) is the
        Kubernetes node name.
    type: list
    elements: dict
    required: true
  kubeadm_versions:
    description: Host to C(kubeadm version -o short) output.
    type: dict
    default: {}
  via:
    description: Releases to pass through for the minors between the cluster's and O(target).
    type: list
    elements: str
    default: []
  batch_size:
    description: Workers per batch, a number or a percentage such as C(20%).
    type: str
    default: "1"
  min_gpu_available_percent:
    description:
      - Floor on GPU devices left schedulable while a batch is drained, in percent (a number,
        as text; the planner judges it).
    type: str
    default: "0"
  features:
    description: DRA features wanted (as for the dra_feature_gates role).
    type: list
    elements: str
    default: []
  gates:
    description: Explicit feature-gate wishes.
    type: dict
    default: {}
  package_revision:
    description: Debian/RPM revision of the packages (C(1.1) on pkgs.k8s.io).
    type: str
    default: "1.1"
  repo_url:
    description: Package repository URL template with C({minor}).
    type: str
    default: "https://pkgs.k8s.io/core:/stable:/v{minor}/deb/"
  gpu_driver:
    description: DRA driver whose devices count as GPU capacity.
    type: str
    default: gpu.nvidia.com
  ignore_preflight_errors:
    description: kubeadm preflight errors to ignore (goes into the UpgradeConfiguration).
    type: list
    elements: str
    default: []
  report_path:
    description:
      - The upgrade report of module M(gpufleet.cluster.upgrade_report) on the control host
        (missing or unreadable is an empty report). The hosts an earlier run to O(target)
        drained and left cordoned (C(cordoned_by_upgrade)) are resumed rather than skipped
        when they already run O(target) (their kubelet part again, then uncordon); the plan
        is then not up to date. A report of another cluster is not resumed (RV(notes)).
    type: path
  snapshot:
    description:
      - A cluster snapshot (JSON, as O(save_snapshot) writes it, with C(schema), C(hosts),
        C(nodes), C(pods), C(resourceslices), C(kubeadm_versions),
        C(cluster_configuration), C(kubelet_configuration), C(gate_audit.facts),
        C(cluster_uid)) to plan from. O(kubeadm_versions) and O(host_facts) are then
        ignored, and O(hosts) is used only when the snapshot has none.
    type: path
  save_snapshot:
    description: Write what was read from the cluster and the hosts to this file (JSON).
    type: path
  plan_file:
    description: Write the whole plan (RV(plan)) to this file as JSON (sorted keys).
    type: path
  judge_only:
    description:
      - Judge the input only (O(target), O(via), O(batch_size) against the workers of
        O(hosts), O(min_gpu_available_percent), O(features) and O(gates) at each release,
        O(repo_url), that O(save_snapshot) can be written, that O(snapshot) can be read);
        read neither the cluster nor a host, return no plan.
    type: bool
    default: false
  probe_cluster:
    description:
      - With O(judge_only) and without O(snapshot), also check that O(kubeconfig) is a file
        and ask its API server for C(/version) (one request, the client's connect and read
        timeouts), so that a cluster that cannot be read is refused before any host is.
    type: bool
    default: false
  input_names:
    description:
      - How messages name the inputs C(target), C(via), C(batch_size),
        C(min_gpu_available_percent), C(features), C(gates), C(snapshot),
        C(save_snapshot) and C(kubeconfig) (default the upgrade role's variables).
        C(gpufleet upgrade) passes its option names for the values it got from options.
    type: dict
    default: {}
  host_facts:
    description:
      - The C(facts) that M(gpufleet.cluster.dra_gate_audit_facts) returned on the nodes
        (each names its C(host)). Hosts not in O(hosts) are ignored; a host without facts
        is not judged (the plan warns).
    type: list
    elements: dict
    default: []
notes:
  - O(kubeconfig) is the admin kubeconfig on the control host; it is required unless
    O(snapshot) or O(judge_only) is given.
attributes:
  check_mode:
    support: full
    details: The module only reads; it behaves the same in check mode.
  diff_mode:
    support: none
  platform:
    platforms: posix
"""

EXAMPLES = r"""
- name: Upgrade | Plan
  gpufleet.cluster.upgrade_plan:
    kubeconfig: ~/.kube/config
    target: 1.37.2
    hosts:
      - {host: cp-1, name: cp-1, control_plane: true}
      - {host: gpu-1, name: gpu-1, control_plane: false}
    kubeadm_versions: {cp-1: v1.36.3, gpu-1: v1.36.3}
    batch_size: 20%
    min_gpu_available_percent: 50

- name: Upgrade | Plan, judging what each node's files and processes hold
  gpufleet.cluster.upgrade_plan:
    kubeconfig: ~/.kube/config
    target: 1.38.0
    hosts:
      - {host: cp-1, name: cp-1, control_plane: true}
      - {host: gpu-1, name: gpu-1, control_plane: false}
    # node_gates: registered from gpufleet.cluster.dra_gate_audit_facts on each node
    host_facts: >-
      {{ ['cp-1', 'gpu-1'] | map('extract', hostvars) | selectattr('node_gates', 'defined')
         | map(attribute='node_gates.facts') | list }}
  register: planned

- name: Upgrade | Refuse a blocked plan
  ansible.builtin.assert:
    that: planned.blocking | length == 0
    fail_msg: "{{ planned.blocking | map(attribute='fix') | join('; ') }}"
"""

RETURN = r"""
reason:
  description: On failure, what is wrong, naming the input (variable or option) and the value.
  returned: failure
  type: str
fix:
  description: On failure, what to do.
  returned: failure
  type: str
cluster_uid:
  description: UID of the cluster's kube-system Namespace (null when unknown).
  returned: success and not judge_only
  type: str
left_cordoned:
  description:
    - Hosts the upgrade report (O(report_path)) names as drained and left cordoned by an
      earlier run to O(target) (C(cordoned_by_upgrade)); [] for another cluster's report.
  returned: success and not judge_only
  type: list
  elements: str
notes:
  description: Notes on the input, such as a report of another cluster that is not resumed.
  returned: success
  type: list
  elements: str
plan:
  description:
    - The plan (UpgradePlan.to_dict) - target, path, nodes, steps (waves, packages, DRA
      changes).
  returned: success and not judge_only
  type: dict
step:
  description: The first step of the plan, or null when every component runs the target.
  returned: success
  type: dict
steps:
  description: Number of steps on the path.
  returned: success
  type: int
blocking:
  description:
    - What stops the upgrade (the plan's C(blocking)), every step's. Each item has
      C(version) (the step's target), C(source) (C(configmap), C(file) or C(process)),
      C(host) (null for a ConfigMap), C(file), C(configmap), C(where), C(component),
      C(kind) (C(feature-gate) or C(runtime-config)), C(gate), C(name), C(entry),
      C(reason) and C(fix).
  returned: success
  type: list
  elements: dict
  sample:
    - version: 1.38.0
      source: file
      host: gpu-1
      file: /var/lib/kubelet/config.yaml
      configmap: null
      where: /var/lib/kubelet/config.yaml
      component: kubelet
      kind: feature-gate
      gate: CSIMigration
      name: CSIMigration
      entry: CSIMigration=true
      reason: >-
        Kubernetes 1.38.0-beta.0 registers no feature gate CSIMigration, nor does any
        release of the model: every component refuses to start with 'unrecognized feature
        gate: CSIMigration'
      fix: >-
        remove CSIMigration from featureGates in /var/lib/kubelet/config.yaml on gpu-1
        before upgrading to 1.38.0
"""

import importlib.util
import json
import os

from ansible.module_utils.basic import AnsibleModule, missing_required_lib

#: The libraries the cluster reader needs (imported there, at call time).
IMPORT_ERROR = next(
    (
        ImportError(f"No module named {m!r}")
        for m in ("yaml", "kubernetes")
        if not importlib.util.find_spec(m)
    ),
    None,
)

from ansible_collections.gpufleet.cluster.plugins.module_utils.dra import core as dra_core
from ansible_collections.gpufleet.cluster.plugins.module_utils.dra_driver.chart import NVIDIA_DRIVER
from ansible_collections.gpufleet.cluster.plugins.module_utils.kube import client as vk
from ansible_collections.gpufleet.cluster.plugins.module_utils.upgrade import cluster as uc
from ansible_collections.gpufleet.cluster.plugins.module_utils.upgrade import input as upgrade_input
from ansible_collections.gpufleet.cluster.plugins.module_utils.upgrade import kubeadm_config as ukc
from ansible_collections.gpufleet.cluster.plugins.module_utils.upgrade import nodes as un
from ansible_collections.gpufleet.cluster.plugins.module_utils.upgrade import plan as up

#: How messages name the module's inputs by default: the upgrade role's variables.
ROLE_NAMES = {
    "target": "upgrade_kubernetes_version",
    "via": "upgrade_via",
    "batch_size": "upgrade_batch_size",
    "min_gpu_available_percent": "upgrade_min_gpu_available_percent",
    "features": "upgrade_dra_features",
    "gates": "upgrade_dra_gates",
    "snapshot": "upgrade_snapshot",
    "save_snapshot": "upgrade_save_snapshot",
    "kubeconfig": "upgrade_kubeconfig",
}

ARGUMENT_SPEC = dict(
    **vk.kube_auth_argspec(),
    target=dict(type="str", required=True),
    hosts=dict(type="list", elements="dict", required=True),
    kubeadm_versions=dict(type="dict", default={}),
    via=dict(type="list", elements="str", default=[]),
    batch_size=dict(type="str", default="1"),
    min_gpu_available_percent=dict(type="str", default="0"),
    features=dict(type="list", elements="str", default=[]),
    gates=dict(type="dict", default={}),
    package_revision=dict(type="str", default=upgrade_input.DEFAULT_PACKAGE_REVISION),
    repo_url=dict(type="str", default=upgrade_input.DEFAULT_REPO_URL),
    gpu_driver=dict(type="str", default=NVIDIA_DRIVER),
    ignore_preflight_errors=dict(type="list", elements="str", default=[]),
    report_path=dict(type="path"),
    host_facts=dict(type="list", elements="dict", default=[]),
    snapshot=dict(type="path"),
    save_snapshot=dict(type="path"),
    plan_file=dict(type="path"),
    judge_only=dict(type="bool", default=False),
    probe_cluster=dict(type="bool", default=False),
    input_names=dict(type="dict", default={}),
)


def fail(module: AnsibleModule, reason: str, fix: str) -> None:
    """Fail with ``reason`` and ``fix`` apart (for the CLI) and together in ``msg``."""
    module.fail_json(msg=f"{reason}; fix: {fix}" if fix else reason, reason=reason, fix=fix)


def judge(p: dict, names: dict) -> None:
    """Everything that needs neither the cluster nor a host (module_utils judge_input, the
    snapshot files). Raises VersionModelError or SnapshotError."""
    upgrade_input.judge_input(
        p["target"],
        via=p["via"],
        batch_size=p["batch_size"],
        min_gpu_available_percent=p["min_gpu_available_percent"],
        features=p["features"],
        gates=p["gates"],
        repo_url_template=p["repo_url"],
        workers=sum(1 for h in p["hosts"] if not h.get("control_plane")),
        input_names=names,
    )
    if p["save_snapshot"]:
        uc.check_save_path(p["save_snapshot"], f"{names['save_snapshot']} {p['save_snapshot']!r}")
    if p["snapshot"]:
        uc.load_snapshot(p["snapshot"], f"{names['snapshot']} {p['snapshot']!r}")


def usable_kubeconfig(module: AnsibleModule, names: dict) -> str:
    """O(kubeconfig) when it is a file; else fails the module naming it and the fix."""
    kubeconfig = module.params["kubeconfig"]
    if not kubeconfig or not os.path.isfile(kubeconfig):
        fail(
            module,
            f"{names['kubeconfig']} {kubeconfig!r}: the kubeconfig file does not exist or is "
            "not a file.",
            "give the cluster's admin kubeconfig (a copy of /etc/kubernetes/admin.conf) with "
            "--kubeconfig FILE or -e upgrade_kubeconfig=FILE, or plan from a saved cluster "
            "with --snapshot FILE (upgrade_snapshot).",
        )
    return kubeconfig


def cannot_read(module: AnsibleModule, names: dict, exc: vk.KubeError) -> None:
    """Fail the module for a cluster that cannot be read through O(kubeconfig)."""
    kubeconfig, name = module.params["kubeconfig"], names["kubeconfig"]
    fail(
        module,
        f"{name} {kubeconfig!r}: {' '.join(exc.message.split())[:600]}",
        f"check that the API server is up and reachable from here (kubectl --kubeconfig "
        f"{kubeconfig} get nodes), that {name} names this cluster's admin kubeconfig, or "
        "plan from a saved cluster with --snapshot FILE (upgrade_snapshot).",
    )


def read_state(module: AnsibleModule, names: dict) -> dict:
    """What the plan reads: the snapshot, else the cluster (upgrade_cluster.read_cluster)
    with O(hosts), O(kubeadm_versions) and O(host_facts). Fails the module when the
    cluster cannot be read. Raises SnapshotError."""
    p = module.params
    if p["snapshot"]:
        data = uc.load_snapshot(p["snapshot"], f"{names['snapshot']} {p['snapshot']!r}")
        data.setdefault("hosts", [dict(h) for h in p["hosts"]])
        for h in data["hosts"]:
            h.setdefault("name", h["host"])
        return data
    kubeconfig = usable_kubeconfig(module, names)
    try:
        data = uc.read_cluster(kubeconfig, p["context"])
    except vk.KubeError as exc:  # the API or the kubeconfig: cannot plan
        cannot_read(module, names, exc)
    data["hosts"] = [dict(h) for h in p["hosts"]]
    data["kubeadm_versions"] = {k: (v or None) for k, v in p["kubeadm_versions"].items()}
    data["gate_facts"] = {str(f.get("host") or ""): f for f in p["host_facts"]}
    return data


def plan_state(p: dict, data: dict, resume: list, names: dict) -> up.UpgradePlan:
    """The plan of ``data`` (read_state's shape). Raises VersionModelError."""
    nodes = un.nodes_from_objects(
        data["hosts"],
        data.get("nodes") or [],
        data.get("pods") or [],
        data.get("resourceslices") or [],
        data.get("kubeadm_versions") or {},
        p["gpu_driver"],
    )
    return up.build_plan(
        p["target"],
        nodes,
        batch_size=p["batch_size"],
        min_gpu_available_percent=p["min_gpu_available_percent"],
        via=p["via"],
        features=p["features"],
        gates=p["gates"],
        current_settings=ukc.settings_from_configmaps(
            data.get("cluster_configuration"), data.get("kubelet_configuration")
        ),
        package_revision=p["package_revision"],
        repo_url_template=p["repo_url"],
        ignore_preflight_errors=p["ignore_preflight_errors"],
        resume_hosts=resume,
        host_facts=data.get("gate_facts") or {},
        input_names=names,
    )


def main() -> None:
    module = AnsibleModule(argument_spec=ARGUMENT_SPEC, supports_check_mode=True)
    if IMPORT_ERROR is not None:
        module.fail_json(
            msg=missing_required_lib("kubernetes and PyYAML"), exception=str(IMPORT_ERROR)
        )
    p = module.params
    names = {**ROLE_NAMES, **{str(k): str(v) for k, v in p["input_names"].items()}}
    notes: list[str] = []
    try:
        if p["judge_only"]:
            judge(p, names)
            if p["probe_cluster"] and not p["snapshot"]:
                try:
                    vk.Kube(usable_kubeconfig(module, names), p["context"]).get("/version")
                except vk.KubeError as exc:
                    cannot_read(module, names, exc)
            module.exit_json(changed=False, notes=notes)
        data = read_state(module, names)
        if p["save_snapshot"]:
            uc.save_snapshot(
                p["save_snapshot"], data, f"{names['save_snapshot']} {p['save_snapshot']!r}"
            )
        report = uc.read_report(p["report_path"]) if p["report_path"] else {}
        if uc.foreign_report(report, data.get("cluster_uid")):
            notes.append(
                f"the upgrade report {p['report_path']} is another cluster's (kube-system "
                f"{report.get('cluster_uid')}): nothing in it is resumed"
            )
            report = {}
        left_cordoned = uc.resume_hosts(report, [p["target"]])
        plan = plan_state(p, data, left_cordoned, names)
    except (dra_core.VersionModelError, uc.SnapshotError) as exc:
        fail(module, exc.reason, exc.fix)
    doc = plan.to_dict()
    if p["plan_file"]:
        try:
            with open(p["plan_file"], "w", encoding="utf-8") as fh:
                fh.write(json.dumps(doc, indent=2, sort_keys=True) + "\n")
        except OSError as exc:
            fail(
                module,
                f"upgrade_plan_file {p['plan_file']!r} cannot be written: {exc.strerror}.",
                "give a file in an existing, writable directory.",
            )
    module.exit_json(
        changed=False,
        plan=doc,
        step=doc["steps"][0] if doc["steps"] else None,
        steps=len(doc["steps"]),
        blocking=doc["blocking"],
        cluster_uid=data.get("cluster_uid"),
        left_cordoned=left_cordoned,
        notes=notes,
    )


if __name__ == "__main__":
    main()
