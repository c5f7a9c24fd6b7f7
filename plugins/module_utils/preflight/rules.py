# Copyright: gpufleet contributors
# Apache License 2.0 (see LICENSE)
"""Cross-variable checks of an inventory, run before any host is changed.

Argument specs check one variable at a time; the rules here look at several at once
(combinations, version ranges, removed variables, a MIG layout against the node's GPU
model, the DRA driver chart against the cluster's release). Pure: data in, a list of
``Problem`` out. The ``preflight_check`` filter calls ``check_inventory`` from the
``preflight`` role, which fails once, listing every error of every host.

Input shape (``check_inventory``)::

    {"<inventory host>": {
        "groups": ["k8s_cluster", "kube_node", "gpu_nodes", "gpu_h200"],
        "variables": {"nvidia_driver_branch": "580", ...},   # as the inventory sets them
        "gpus": [{"name": "NVIDIA H200", ...}],               # gpu_facts, optional
        "driver_version": "580.159.04"},                      # gpu_facts, optional
     ...}

Variables a host does not set take the roles' own defaults (``defaults/main.yml`` of
each role, read by ``preflight.problem.settings_for``; nothing is copied here). The rules
live by area: ``preflight.release`` (variables, release, gates), ``preflight.stack``
(driver, toolkit, DRA driver chart and gates, by the dra_driver role's own rules),
``preflight.mig`` (layouts and configs against the GPU model), ``preflight.config_values``
(values written into configuration files, units and command lines), ``preflight.gpu_paths``
(the GPU path each pool declares: one of ``gpu_path_device_plugin``, ``gpu_path_dra``).

Facts and sources of the rules:

* Provision range: ``dra.supported_for_provision`` (1.32 to 1.38).
* NVIDIA DRA driver chart (``nvidia-dra-driver-gpu`` <= 25.12, ``dra-driver-nvidia-gpu``
  >= 0.4): ``Chart.yaml`` ``kubeVersion: >=1.32.0-0``; ``docs/prerequisites.md`` documents
  Kubernetes 1.34.2 as the minimum and host driver branch 565 for GPU allocation; driver
  feature gates ``TimeSlicingSettings``/``MPSSupport`` since 25.8 (0.2), ``DynamicMIG``
  since 25.12 (0.3); ``pkg/featuregates/featuregates.go`` ``ValidateFeatureGates``:
  DynamicMIG excludes MPSSupport, PassthroughSupport and NVMLDeviceHealthCheck,
  PassthroughSupport excludes NVMLDeviceHealthCheck. DynamicMIG publishes partitionable
  devices (KEP-4815): Kubernetes 1.34 or newer with ``DRAPartitionableDevices`` on, and at
  start-up it destroys MIG devices it did not create (``DestroyUnknownMIGDevices``), so a
  static MIG layout and DynamicMIG exclude each other.
* Container toolkit 1.17.4 is the first to read containerd 2's configuration version 3;
  CDI needs containerd 1.7 (``nvidia.containerd.check_toolkit``).
* Driver pin and branch 565 (``nvidia.driver.check_pin``).
* ``KubeletConfiguration.failCgroupV1`` exists from Kubernetes 1.31 (KEP-4569), so
  ``kubeadm_allow_cgroup_v1`` does nothing on older kubelets.
* MIG fit: ``mig.planner.plan`` / ``check_config`` with the models of ``mig.profiles``.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any

from ansible_collections.gpufleet.cluster.plugins.module_utils.preflight import (
    config_values as pconfig,
)
from ansible_collections.gpufleet.cluster.plugins.module_utils.preflight import (
    gpu_paths as ppaths,
)
from ansible_collections.gpufleet.cluster.plugins.module_utils.preflight import (
    kueue as pkueue,
)
from ansible_collections.gpufleet.cluster.plugins.module_utils.preflight import (
    libraries as plib,
)
from ansible_collections.gpufleet.cluster.plugins.module_utils.preflight import mig as pmig
from ansible_collections.gpufleet.cluster.plugins.module_utils.preflight import problem as pp
from ansible_collections.gpufleet.cluster.plugins.module_utils.preflight import (
    release as prel,
)
from ansible_collections.gpufleet.cluster.plugins.module_utils.preflight import specs as ps
from ansible_collections.gpufleet.cluster.plugins.module_utils.preflight import (
    stack as pstack,
)
from ansible_collections.gpufleet.cluster.plugins.module_utils.preflight.problem import (
    ERROR,
    SITE_DEFAULTS,
    WARNING,
    BadValue,
    HostContext,
    Problem,
    short,
    text_of,
)

__all__ = [
    "ERROR",
    "SITE_DEFAULTS",
    "WARNING",
    "Problem",
    "check_host",
    "check_inventory",
    "format_report",
]

_HOSTS_LISTED = 5

#: Every per-host rule, in the order its problems are listed.
HOST_RULES = (
    prel.rule_release,
    prel.rule_gates,
    prel.rule_kubelet_extra_gates,
    prel.rule_cgroup_v1,
    pstack.rule_driver,
    pstack.rule_toolkit,
    pstack.rule_driver_chart,
    pstack.rule_driver_gates,
    pmig.rule_mig,
    pconfig.rule_config_values,
    ppaths.rule_gpu_path,
)


def check_host(
    host: str,
    groups: Iterable[str],
    variables: Mapping[str, Any],
    *,
    removed: Mapping[str, Any] | None = None,
    known_variables: Iterable[str] | None = None,
    gpus: Sequence[Mapping[str, Any]] | None = None,
    driver_version: str = "",
    mig_config_file_text: str = "",
) -> list[Problem]:
    """Every rule for one host; ``variables`` as the inventory sets them (the roles'
    defaults and ``SITE_DEFAULTS`` are filled in: ``preflight.problem.settings_for``).

    ``removed`` maps a removed variable name to its new name (a string) or to
    ``{"new": NAME, "fix": TEXT}``; ``known_variables``, when given, are all variable names
    the roles declare: a variable with a role's prefix outside that list is reported as a
    probable typo (warning). ``gpus``/``driver_version``: gathered ``gpu_facts``
    (``gpufleet_gpus``, ``gpufleet_gpu_driver_version``), optional;
    ``mig_config_file_text``: the content of ``mig_config_file``, read on the control host.
    """
    settings = pp.settings_for(dict(variables))
    ctx = HostContext(
        host,
        tuple(groups),
        settings,
        variables,
        list(gpus or []),
        driver_version or "",
        mig_config_file_text or "",
    )
    prel.rule_removed(ctx, removed or {})
    if known_variables is not None:
        prel.rule_unknown(ctx, set(known_variables), removed or {})
    for rule in HOST_RULES:
        try:
            rule(ctx)
        except BadValue as exc:
            ctx.add(exc.problem)
    out = []
    seen = set()
    for p in ctx.problems:
        if p.key() not in seen:
            seen.add(p.key())
            out.append(p)
    return out


def _spec_problems(
    variables: Mapping[str, Any], role_specs: Mapping[str, Mapping[str, Any]]
) -> Iterator[Problem]:
    for role, name, value, message in ps.argument_spec_problems(variables, role_specs):
        spec = role_specs[role][name]
        wanted = str(spec.get("type") or "str")
        if spec.get("elements"):
            wanted += f" of {spec['elements']}"
        if spec.get("choices"):
            wanted += " (one of " + ", ".join(map(str, spec["choices"])) + ")"
        yield pp.problem(
            "argument-spec",
            ERROR,
            name,
            value,
            f"the {role} role's argument spec refuses it: {message}",
            f"give {name} as {wanted} (roles/{role}/meta/argument_specs.yml)",
        )


def check_inventory(
    hosts: Mapping[str, Mapping[str, Any]],
    removed: Mapping[str, Any] | None = None,
    known_variables: Iterable[str] | None = None,
    role_specs: Mapping[str, Mapping[str, Any]] | None = None,
    controller: Mapping[str, Any] | None = None,
) -> list[Problem]:
    """Run every rule on every host; merge identical problems; add inventory-wide ones.

    ``hosts``: inventory host -> ``{"groups", "variables", "gpus", "driver_version"}`` (see
    the module docstring); ``role_specs``: role -> options of its argument spec
    (:func:`preflight_specs.load_role_specs`), each value a host sets judged by it;
    ``controller``, when given, ``{"python": <path>, "importable": {<import name>: bool}}``
    of the control host's Python (``preflight.libraries``). Returns
    problems sorted errors first, then by rule and variable; each lists the hosts it
    applies to. Inventory-wide: the GPU group has no host (error), hosts disagree on the
    Kubernetes release (error), Kueue quotas against the published devices
    (``preflight.kueue``), the control host's Python libraries (``preflight.libraries``).
    """
    known = list(known_variables) if known_variables is not None else None
    merged: dict[tuple, list[str]] = {}
    first: dict[tuple, Problem] = {}
    releases: dict[str, list[str]] = {}
    gpu_groups: set[str] = set()
    any_gpu = False
    for host in sorted(hosts):
        data = hosts[host] or {}
        groups = list(data.get("groups") or [])
        variables = dict(data.get("variables") or {})
        settings = pp.settings_for(variables)
        gpu_group = text_of(settings, "gpu_node_labels_group") or "gpu_nodes"
        gpu_groups.add(gpu_group)
        any_gpu = any_gpu or gpu_group in groups
        for name in pp.RELEASE_VARIABLES:
            text = text_of(settings, name)
            if text:
                releases.setdefault(text, []).append(host)
                break
        for p in check_host(
            host,
            groups,
            variables,
            removed=removed,
            known_variables=known,
            gpus=data.get("gpus") or [],
            driver_version=str(data.get("driver_version") or ""),
            mig_config_file_text=str(data.get("mig_config_file_text") or ""),
        ):
            merged.setdefault(p.key(), []).append(host)
            first.setdefault(p.key(), p)
        for p in _spec_problems(variables, role_specs or {}):
            merged.setdefault(p.key(), []).append(host)
            first.setdefault(p.key(), p)
    out = [
        Problem(p.rule, p.severity, p.variable, p.value, p.message, p.fix, tuple(merged[k]))
        for k, p in first.items()
    ]
    if hosts and not any_gpu:
        group = sorted(gpu_groups)[0] if gpu_groups else "gpu_nodes"
        out.append(
            pp.problem(
                "gpu-group-empty",
                ERROR,
                "gpu_node_labels_group",
                group,
                f"no inventory host is in the group {group!r}: no node would get the GPU "
                "stack, the labels or the DRA kubelet plugin",
                f"put the GPU hosts in {group!r} (children groups per GPU model), or set "
                "gpu_node_labels_group to the group that holds them",
            )
        )
    if len(releases) > 1:
        desc = "; ".join(f"{v} on {_hosts_text(h, hosts)}" for v, h in sorted(releases.items()))
        out.append(
            pp.problem(
                "release-hosts-differ",
                ERROR,
                "kubeadm_kubernetes_version",
                sorted(releases),
                f"hosts plan for different Kubernetes releases ({desc})",
                "set the release once for the whole cluster (group_vars/all.yml); change it "
                "with the upgrade playbook, one minor at a time",
            )
        )
    out += pkueue.kueue_problems(hosts)
    if controller is not None:
        out += plib.library_problems(controller["importable"], controller["python"])
    out.sort(key=lambda p: (p.severity != ERROR, p.rule, p.variable, p.hosts))
    return out


def _hosts_text(names: Sequence[str], hosts: Mapping[str, Mapping[str, Any]]) -> str:
    """``all 12 hosts``, ``group gpu_h200 (4 hosts)``, or the first names and a count."""
    chosen = set(names)
    if chosen == set(hosts) and len(hosts) > 1:
        return f"all {len(hosts)} hosts"
    members: dict[str, set[str]] = {}
    for host, data in hosts.items():
        for g in (data or {}).get("groups") or []:
            members.setdefault(g, set()).add(host)
    ordered = sorted(chosen)
    exact = sorted(g for g, m in members.items() if m == chosen)
    if exact and len(chosen) > _HOSTS_LISTED:
        return f"group {exact[0]} ({len(chosen)} hosts)"
    text = ", ".join(ordered[:_HOSTS_LISTED])
    if len(ordered) > _HOSTS_LISTED:
        text += f" and {len(ordered) - _HOSTS_LISTED} more"
    return text


def format_report(
    problems: Sequence[Problem], hosts: Mapping[str, Mapping[str, Any]] | None = None
) -> str:
    """One paragraph per problem: ``ERROR rule: variable=value (on hosts): message; fix: ...``."""
    errors = sum(1 for p in problems if p.severity == ERROR)
    warnings = len(problems) - errors
    lines = [f"preflight: {errors} error(s), {warnings} warning(s)"]
    for p in problems:
        where = f" (on {_hosts_text(p.hosts, hosts or {})})" if p.hosts else ""
        lines.append(
            f"{p.severity.upper()} [{p.rule}] {p.variable}={short(p.value)}{where}: "
            f"{p.message}; fix: {p.fix}"
        )
    return "\n".join(lines)
