"""``gpufleet upgrade``: roll kubeadm, the control plane and the kubelets to a release, one
minor at a time, in lockstep.

``gpufleet upgrade -i INVENTORY --to VERSION --plan [--json]`` changes nothing: it reads
what every node runs (one list of Nodes for the kubelet versions, one list of the
``kube-apiserver`` static pods for the apiserver versions, one list of ResourceSlices for
the GPU devices, the ``kubeadm-config`` and ``kubelet-config`` ConfigMaps for the DRA
settings in force; ``kubeadm version`` and module ``dra_gate_audit_facts`` on each host
through Ansible) and prints the plan of ``plugins/module_utils/upgrade_plan.py``: the
path, per step the packages, the repository, the kubeadm command, the DRA gate and
runtime-config changes, what the target refuses to start with, and the order of the
nodes (waves). An entry that a step's target refuses to start with and the upgrade does
not change itself (a ConfigMap's, a host's file or process) blocks: a table names host,
file or ConfigMap, component, gate, reason and fix; the command exits 1 and, without
``--plan``, runs nothing.

Without ``--plan`` it runs ``playbooks/upgrade.yml`` once per step of the path
(``upgrade_kubernetes_version`` = the step's release, ``upgrade_kubeconfig`` = the
kubeconfig it planned with, plus ``-e`` variables), and ``playbooks/validate.yml`` before
(not when resuming a failed run, whose cordoned node validate would refuse) and after,
unless ``--no-validate``. ``--snapshot FILE`` plans from a saved cluster snapshot
(``--save-snapshot FILE`` writes one), for review away from the cluster.

Resume: the upgrade report (``upgrade_report_path``, default
``~/.cache/gpufleet/upgrade-report.json``; on the lab's inventory
``labs/<name>/upgrade-report.json`` beside its kubeconfig, one per lab; the command passes
the path it uses to the playbook) of an earlier run to the same release names
the nodes it drained and left cordoned (``cordoned_by_upgrade``); the plan resumes them
(their kubelet part again, then uncordon) even when they already run the target. A host
that went unreachable during a run (its entry still ``in-progress``) is recorded as
failed there, with the phase it had reached (read from the run's events) and Ansible's
message. After each step the report's timings are printed per node: drain, restart to
Ready, DRA plugin and ResourceSlices, the node's total and the rest (the toolkit's own
work), and the step's wall-clock time.

On the lab's inventory (it carries ``lab_kubeconfig``; the lab is air-gapped) the
kubeadm, kubelet and kubectl packages of every release involved are built into the local
repository in the pkgs.k8s.io layout (``gpufleet.lab.packages``) and the control-plane
images of each step (``gpufleet.lab.images``) before the run, and passed as
``upgrade_local_repo_dir`` and ``upgrade_image_archives``; ``-e`` overrides them.

Input is judged before any host or the cluster is read: ``--to`` and ``--via`` are exact
releases (MAJOR.MINOR.PATCH; packages exist only for releases, not pre-releases), one per
minor; batch size and GPU floor; the type of each variable the planner reads. Variables
are read as the run reads them (``-e`` over the inventory's ``localhost`` variables over
the role's defaults, templated by Ansible); an option wins over both and is passed to the
run as its variable. What needs the cluster (downgrade, skipped minor, floor against the
devices) is judged after reading it. Errors name the option or variable, the value and the
fix.

Exit codes: 0 planned or upgraded; 1 a host or a step failed, or the plan is blocked;
2 the plan is refused
(downgrade, skipped minor, target outside the model, bad batch/floor values) or the
cluster or inventory could not be read.
"""

from __future__ import annotations

import fcntl
import json
import os
import subprocess
import sys
import time
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import click
from ansible_collections.gpufleet.cluster.plugins.module_utils import dra_versions as dv
from ansible_collections.gpufleet.cluster.plugins.module_utils import input_guard as ig
from ansible_collections.gpufleet.cluster.plugins.module_utils import upgrade_cluster as uc
from ansible_collections.gpufleet.cluster.plugins.module_utils import upgrade_plan as up
from ansible_collections.gpufleet.cluster.plugins.module_utils import validate_kube as vk
from rich.console import Console

from gpufleet.commands._options import extra_vars_flag
from gpufleet.commands.upgrade_render import render, render_timings, timing_rows

__all__ = ["render", "render_timings", "timing_rows", "upgrade"]  # moved, still reached here

EXIT_OK, EXIT_FAILED, EXIT_CANNOT_RUN = 0, 1, 2
SNAPSHOT_SCHEMA = uc.SNAPSHOT_SCHEMA
#: Bytes and values (mapping entries and list items) of one --snapshot file: the trimmed
#: listing of 1,000 GPU nodes with their pods, slices and claims is about 70 MB of JSON.
SNAPSHOT_MAX_BYTES = 256 * 1024 * 1024
SNAPSHOT_MAX_VALUES = 100_000_000
#: The role's default upgrade_report_path (roles/upgrade/defaults/main.yml).
DEFAULT_REPORT = Path("~/.cache/gpufleet/upgrade-report.json")


class InputError(Exception):
    """The input, the inventory or the cluster could not be read or is refused (exit 2).

    ``reason`` names the option or variable and the value, ``fix`` says what to do."""

    def __init__(self, reason: str, fix: str = "") -> None:
        super().__init__(reason if not fix else f"{reason} Fix: {fix}")
        self.reason = reason
        self.fix = fix


# ------------------------------------------------------------------------- inventory


def read_inventory(inventory: Sequence[str]) -> dict[str, Any]:
    """``ansible-inventory --list`` of ``inventory`` as a dict. Raises InputError when a
    source is missing or cannot be parsed (``INVENTORY_ANY_UNPARSED_IS_FAILED``: Ansible's
    own parse error is shown, not an empty inventory)."""
    exe = Path(sys.executable).parent / "ansible-inventory"
    argv = [str(exe) if exe.exists() else "ansible-inventory"]
    for inv in inventory:
        if not Path(inv).exists():
            raise InputError(
                f"-i {inv!r}: the inventory does not exist.", "pass -i with an inventory path."
            )
        argv += ["-i", inv]
    argv.append("--list")
    env = {**os.environ, "ANSIBLE_INVENTORY_ANY_UNPARSED_IS_FAILED": "True"}
    proc = subprocess.run(argv, capture_output=True, text=True, check=False, timeout=120, env=env)
    if proc.returncode != 0:
        raise InputError(
            f"-i {' '.join(inventory)}: ansible-inventory cannot parse the inventory: "
            f"{_parse_failure(proc.stderr)}",
            f"correct the inventory (ansible-inventory -i {' '.join(inventory)} --list "
            "shows the whole error).",
        )
    try:
        data = json.loads(proc.stdout)
    except ValueError as exc:
        raise InputError(
            f"-i {' '.join(inventory)}: ansible-inventory printed no JSON ({exc}).",
            "run ansible-inventory -i INVENTORY --list to see what it prints.",
        ) from None
    return data if isinstance(data, dict) else {}


def _parse_failure(stderr: str) -> str:
    """The useful part of ansible-inventory's parse failure: the first plugin's reason,
    where it was found, and the final error. Reads both ansible-core 2.19's layout
    (``[WARNING]: Failed to parse``, ``Origin:``, ``[ERROR]:``) and 2.17's (``[WARNING]:  *
    Failed to parse`` wrapped over several lines, ``ERROR!``)."""
    messages: list[str] = []
    for line in stderr.splitlines():
        text = line.strip()
        if not text:
            continue
        if text.startswith(("[WARNING]", "[ERROR]", "ERROR!", "Origin:")) or not messages:
            messages.append(text)
        else:
            messages[-1] += " " + text
    keep: list[str] = []
    for text in messages:
        body = text.removeprefix("[WARNING]:").strip().removeprefix("* ").strip()
        if body.startswith("Failed to parse") and not keep:
            keep.append(body if len(body) <= 600 else body[:600] + " ...")
        elif text.startswith("Origin:") and len(keep) == 1:
            keep.append(text)
        elif text.startswith(("[ERROR]", "ERROR!")):
            keep.append(text.removeprefix("[ERROR]: ").removeprefix("ERROR! "))
    return "; ".join(keep) if keep else " ".join(stderr.split())[:400]


def _group_hosts(inv: Mapping[str, Any], group: str) -> list[str]:
    entry = inv.get(group) or {}
    hosts = list(entry.get("hosts") or [])
    for child in entry.get("children") or []:
        for h in _group_hosts(inv, child):
            if h not in hosts:
                hosts.append(h)
    return hosts


def inventory_hosts(inv: Mapping[str, Any]) -> list[dict[str, Any]]:
    """``[{host, name, control_plane}]``: control-plane hosts first, then the other
    ``kube_node`` hosts, each in inventory order (raises InputError when empty)."""
    cps = _group_hosts(inv, "kube_control_plane")
    workers = [h for h in _group_hosts(inv, "kube_node") if h not in cps]
    hostvars = (inv.get("_meta") or {}).get("hostvars") or {}
    out = []
    for h in cps + workers:
        name = (hostvars.get(h) or {}).get("kubernetes_node_name") or h
        out.append({"host": h, "name": str(name), "control_plane": h in cps})
    if not cps:
        raise InputError(
            "the inventory has no host in group kube_control_plane; fix: add the "
            "control-plane nodes to kube_control_plane"
        )
    return out


def inventory_var(inv: Mapping[str, Any], hosts: Sequence[str], *names: str) -> Any:
    """The first of ``names`` set on the first host that has it (group vars land in
    hostvars), untemplated: for the lab's host variables (``kubeadm_etcd_image_tag``)."""
    hostvars = (inv.get("_meta") or {}).get("hostvars") or {}
    for name in names:
        for h in hosts:
            value = (hostvars.get(h) or {}).get(name)
            if value is None or (isinstance(value, str) and "{{" in value):
                continue
            return value
    return None


#: Variables that the upgrade role's planning play (``hosts: localhost``,
#: roles/upgrade/tasks/plan.yml) reads, and the CLI reads the same way.
PLANNER_VARS = (
    "upgrade_via",
    "upgrade_batch_size",
    "upgrade_min_gpu_available_percent",
    "upgrade_dra_features",
    "dra_feature_gates_features",
    "upgrade_dra_gates",
    "dra_feature_gates_extra",
    "upgrade_gpu_driver",
    "upgrade_package_revision",
    "upgrade_repo_url",
    "upgrade_local_repo_dir",
    "upgrade_kubeconfig",
    "lab_kubeconfig",
    "dra_feature_gates_kubeconfig",
    "upgrade_report_path",
)


class Variables:
    """Variables as the upgrade playbook sees them: ``-e`` extra variables over the
    inventory's variables of ``localhost`` (the planning play's host: group ``all`` and
    ``host_vars/localhost``), templated by Ansible itself (``ansible.template.Templar``,
    with every variable of the inventory in scope) as the run templates them. The
    ``PLANNER_VARS`` are read for ``localhost`` only, as the run reads them (a value set
    only for a group of nodes does not reach the planning play); another name that
    ``localhost`` lacks is looked up on the inventory hosts in order (the lab's host
    variables, e.g. ``kubeadm_etcd_image_tag``). Role defaults are not applied here:
    ``planner_inputs`` applies those of roles/upgrade/defaults/main.yml.

    ``get(name)``: the templated value, or None when not set; ``is_set(name)``;
    ``source(name)``: ``"-e"``, ``"inventory"`` or None. ``get`` raises InputError
    naming the variable and its raw value when the template cannot be rendered."""

    def __init__(
        self,
        inventory: Sequence[str],
        hosts: Sequence[str],
        extra_vars: Mapping[str, Any],
    ) -> None:
        from ansible.inventory.manager import InventoryManager
        from ansible.parsing.dataloader import DataLoader
        from ansible.vars.manager import VariableManager

        self._loader = DataLoader()
        self._inventory = InventoryManager(
            loader=self._loader, sources=[str(Path(i).resolve()) for i in inventory]
        )
        self._manager = VariableManager(loader=self._loader, inventory=self._inventory)
        self._extra = {k: _trusted(v) for k, v in extra_vars.items()}
        self._hosts = list(hosts)
        self._scopes: dict[str, dict[str, Any]] = {}
        self._cache: dict[str, Any] = {}

    def _scope(self, host: str) -> dict[str, Any]:
        if host not in self._scopes:
            h = self._inventory.get_host(host)
            found = dict(self._manager.get_vars(host=h)) if h is not None else {}
            self._scopes[host] = {**found, **self._extra}
        return self._scopes[host]

    def _where(self, name: str) -> str | None:
        hosts = () if name in PLANNER_VARS else tuple(self._hosts)
        for host in ("localhost", *hosts):
            if name in self._scope(host):
                return host
        return None

    def source(self, name: str) -> str | None:
        if name in self._extra:
            return "-e"
        return "inventory" if self._where(name) else None

    def is_set(self, name: str) -> bool:
        return self.source(name) is not None

    def get(self, name: str, default: Any = None) -> Any:
        host = self._where(name)
        if host is None:
            return default
        if name not in self._cache:
            from ansible.errors import AnsibleError
            from ansible.template import Templar

            scope = self._scope(host)
            raw = scope[name]
            try:
                value = Templar(loader=self._loader, variables=scope).template(raw)
            except AnsibleError as exc:
                msg = " ".join(str(exc).split())[:300]
                raise InputError(
                    f"{name}={_raw(raw)!r} ({self.source(name)}) cannot be templated: {msg}",
                    f"define what the template uses, or give {name} a plain value.",
                ) from None
            self._cache[name] = _untagged(value)
        return self._cache[name]

    __call__ = get


def _trusted(value: Any) -> Any:
    """``-e`` values as the run receives them: ansible-runner writes them to a file the
    playbook loads, so their templates are rendered; mark them trusted for Templar
    (ansible-core 2.19 and later; before 2.19 Templar renders every string)."""
    try:
        from ansible.template import trust_as_template
    except ImportError:  # ansible-core < 2.19: no data tagging
        return value

    if isinstance(value, str):
        return trust_as_template(value)
    if isinstance(value, list):
        return [_trusted(v) for v in value]
    if isinstance(value, dict):
        return {k: _trusted(v) for k, v in value.items()}
    return value


def _untagged(value: Any) -> Any:
    """Plain Python types (Ansible returns tagged subclasses of str, list, dict)."""
    if isinstance(value, bool) or value is None:
        return value
    if isinstance(value, str):
        return str.__str__(value)
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        return float(value)
    if isinstance(value, Mapping):
        return {_untagged(k): _untagged(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_untagged(v) for v in value]
    return value


def _raw(value: Any) -> Any:
    return _untagged(value)


def read_kubeadm_versions(inventory: Sequence[str], hosts: Sequence[str]) -> dict[str, str | None]:
    """``kubeadm version -o short`` on every host, through Ansible (host -> version, None
    when the host could not answer)."""
    import ansible_runner

    out: dict[str, str | None] = dict.fromkeys(hosts)

    def handle(event: Mapping[str, Any]) -> bool:
        data = event.get("event_data") or {}
        if event.get("event") == "runner_on_ok" and data.get("host") in out:
            out[data["host"]] = str((data.get("res") or {}).get("stdout", "")).strip() or None
        return True

    bin_dir = str(Path(sys.executable).parent)
    ansible_runner.run(
        host_pattern=",".join(hosts),
        inventory=[str(Path(i).resolve()) for i in inventory],
        module="ansible.builtin.command",
        module_args="kubeadm version -o short",
        quiet=True,
        event_handler=handle,
        envvars={
            "ANSIBLE_COLLECTIONS_SCAN_SYS_PATH": "True",
            "PATH": os.pathsep.join([bin_dir, os.environ.get("PATH", "")]),
        },
    )
    return out


def read_gate_facts(inventory: Sequence[str], hosts: Sequence[str]) -> dict[str, Any]:
    """What module ``gpufleet.cluster.dra_gate_audit_facts`` reads on every host (with
    become, as the upgrade's audit_facts.yml: manifests and the kubelet configuration are
    root's), through Ansible: host -> its ``facts``, None when the host could not answer."""
    import ansible_runner

    out: dict[str, Any] = dict.fromkeys(hosts)

    def handle(event: Mapping[str, Any]) -> bool:
        data = event.get("event_data") or {}
        facts = (data.get("res") or {}).get("facts")
        if event.get("event") == "runner_on_ok" and data.get("host") in out and facts:
            out[data["host"]] = facts
        return True

    ansible_runner.run(
        host_pattern=",".join(hosts),
        inventory=[str(Path(i).resolve()) for i in inventory],
        module="gpufleet.cluster.dra_gate_audit_facts",
        module_args="host={{ inventory_hostname }}",
        cmdline="--become",
        quiet=True,
        event_handler=handle,
        envvars={
            "ANSIBLE_COLLECTIONS_SCAN_SYS_PATH": "True",
            "PATH": os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")]),
        },
    )
    return out


# ------------------------------------------------------------------------- input


def _list_var(variables: Variables, name: str) -> list[str]:
    """A list-of-strings variable (``upgrade_via``, ``upgrade_dra_features``); a single
    string is read as Ansible's ``list`` type reads it (split at commas: ``"1.36.3"`` is
    ``["1.36.3"]``). [] when not set. Raises InputError naming the variable, the value
    and the expected type."""
    value = variables.get(name)
    if value is None and not variables.is_set(name):
        return []
    if isinstance(value, str):
        return [part.strip() for part in value.split(",") if part.strip()]
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise InputError(
            f"{name}={value!r} ({variables.source(name)}) is not a list of strings.",
            f"give a YAML list, e.g. -e '{name}=[{_list_example(name)}]'.",
        )
    return list(value)


def _list_example(name: str) -> str:
    return "1.36.3" if name == "upgrade_via" else "partitionable-devices"


def _mapping_var(variables: Variables, name: str) -> dict[str, Any]:
    """A mapping variable (``upgrade_dra_gates``: gate name -> true/false). {} when not
    set. Raises InputError naming the variable, the value and the expected type."""
    value = variables.get(name)
    if value is None and not variables.is_set(name):
        return {}
    if not isinstance(value, Mapping) or not all(isinstance(k, str) for k in value):
        raise InputError(
            f"{name}={value!r} ({variables.source(name)}) is not a mapping of feature gate "
            "names to true/false.",
            f"give a YAML mapping, e.g. -e '{name}={{DRAPartitionableDevices: true}}'.",
        )
    return dict(value)


def _str_var(variables: Variables, name: str, default: str, *, empty_ok: bool = False) -> str:
    """A string variable (a number is written as text, as the module's ``str`` type does);
    ``default`` when not set. Raises InputError for a list, a mapping, a boolean, or an
    empty value unless ``empty_ok``."""
    if not variables.is_set(name):
        return default
    value = variables.get(name)
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        value = str(value)
    if not isinstance(value, str) or (not value.strip() and not empty_ok):
        raise InputError(
            f"{name}={value!r} ({variables.source(name)}) is not a non-empty string.",
            f"give {name} a text value (role default: {default!r}).",
        )
    return value


def planner_inputs(
    to_version: str,
    via: Sequence[str],
    batch_size: str | None,
    min_gpu_available_percent: str | None,
    variables: Variables,
    workers: int,
) -> dict[str, Any]:
    """Check everything the plan takes that does not need the cluster, before it is read,
    and return ``plan_from_snapshot``'s keyword arguments.

    Precedence as in the run (roles/upgrade/defaults/main.yml, tasks/plan.yml): an option
    over ``-e`` over the inventory over the role default; ``upgrade_dra_features``, else
    ``dra_feature_gates_features``, else []; ``upgrade_dra_gates``, else
    ``dra_feature_gates_extra``, else {}; ``upgrade_gpu_driver`` (gpu.nvidia.com),
    ``upgrade_package_revision`` (1.1), ``upgrade_batch_size`` (1),
    ``upgrade_min_gpu_available_percent`` (0). A variable that is set is judged, never
    replaced by the default. Checked: the target and each ``--via`` release (exact
    releases, no pre-release, in the model, one per minor, below the target), batch size
    (``workers``: inventory hosts outside kube_control_plane) and GPU floor, the variable
    types, the DRA wishes at each release, the repository template. Messages name the
    option when the value came from one, else the variable. Raises UpgradePlanError or
    InputError."""
    names = {"target": "--to", "via": "--via"}
    target = up.parse_target(to_version, "--to")
    if via:
        via_values = list(via)
    else:
        names["via"] = "upgrade_via"
        via_values = _list_var(variables, "upgrade_via")
    via_versions = up.parse_via(via_values, target, names["via"])

    def option_or_var(option: Any, flag: str, name: str, default: Any) -> tuple[Any, str]:
        if option is not None:
            return option, flag
        return (variables.get(name) if variables.is_set(name) else default), name

    size, names["batch_size"] = option_or_var(batch_size, "--batch-size", "upgrade_batch_size", 1)
    up.parse_batch_size(size, max(1, workers), names["batch_size"])
    floor, names["min_gpu_available_percent"] = option_or_var(
        min_gpu_available_percent,
        "--min-gpu-available-percent",
        "upgrade_min_gpu_available_percent",
        0,
    )
    up.parse_min_gpu_percent(floor, names["min_gpu_available_percent"])
    features_name = next(
        (n for n in ("upgrade_dra_features", "dra_feature_gates_features") if variables.is_set(n)),
        "upgrade_dra_features",
    )
    features = _list_var(variables, features_name)
    gates_name = next(
        (n for n in ("upgrade_dra_gates", "dra_feature_gates_extra") if variables.is_set(n)),
        "upgrade_dra_gates",
    )
    gates = _mapping_var(variables, gates_name)
    for release in [*via_versions.values(), target]:
        try:
            dv.plan_components(str(release), features, gates)
        except dv.VersionModelError as exc:
            given = [f"{features_name}={features!r}"] if features else []
            given += [f"{gates_name}={gates!r}"] if gates else []
            raise up.UpgradePlanError(
                f"{', '.join(given) or 'the DRA settings'} at {release}: {exc.reason}", exc.fix
            ) from None
    gpu_driver = _str_var(variables, "upgrade_gpu_driver", up.DEFAULT_GPU_DRIVER)
    revision = _str_var(variables, "upgrade_package_revision", up.DEFAULT_PACKAGE_REVISION)
    for name in ("upgrade_repo_url", "upgrade_local_repo_dir", "upgrade_report_path"):
        _str_var(variables, name, "", empty_ok=True)
    template = repo_template(variables)
    up.repo_url(str(target), template)
    return {
        "target": str(target),
        "via": via_values,
        "batch_size": size,
        "min_gpu_available_percent": floor,
        "features": features,
        "gates": gates,
        "gpu_driver": gpu_driver,
        "package_revision": revision,
        "repo_url_template": template,
        "input_names": names,
    }


def resolve_kubeconfig(option: str | None, variables: Variables) -> tuple[str, str]:
    """``(path, what named it)``: --kubeconfig, else ``upgrade_kubeconfig`` when set, else
    the role default's chain (``lab_kubeconfig``, ``dra_feature_gates_kubeconfig``,
    ``$KUBECONFIG``, ``~/.kube/config``). Raises InputError when the file does not exist
    or is not a file, naming the option or variable and the fix."""
    if option is not None:
        path, name = option, "--kubeconfig"
    elif variables.is_set("upgrade_kubeconfig"):
        path, name = _str_var(variables, "upgrade_kubeconfig", ""), "upgrade_kubeconfig"
    else:
        path, name = "~/.kube/config", "the default ~/.kube/config"
        for var in ("lab_kubeconfig", "dra_feature_gates_kubeconfig"):
            value = _str_var(variables, var, "", empty_ok=True)
            if value.strip():
                path, name = value, var
                break
        else:
            if os.environ.get("KUBECONFIG"):
                path, name = os.environ["KUBECONFIG"].split(os.pathsep)[0], "$KUBECONFIG"
    full = Path(os.path.expanduser(str(path)))
    fix = (
        "give the cluster's admin kubeconfig (a copy of /etc/kubernetes/admin.conf) with "
        "--kubeconfig FILE or -e upgrade_kubeconfig=FILE, or plan from a saved cluster "
        "with --snapshot FILE."
    )
    if not str(path).strip():
        raise InputError(f"{name}={path!r} is empty.", fix)
    if not full.exists():
        raise InputError(f"{name} {str(path)!r}: the kubeconfig file does not exist.", fix)
    if not full.is_file():
        raise InputError(f"{name} {str(path)!r} is not a file.", fix)
    return str(path), name


def check_save_snapshot(path: str) -> Path:
    """The ``--save-snapshot`` path, checked before anything is read: its directory exists
    and is writable, the path is not a directory. Raises InputError."""
    target = Path(os.path.expanduser(path))
    parent = target.parent
    fix = "give a file in an existing, writable directory, e.g. --save-snapshot ./snapshot.json."
    if target.is_dir():
        raise InputError(f"--save-snapshot {path!r} is a directory.", fix)
    if not parent.is_dir():
        raise InputError(
            f"--save-snapshot {path!r}: directory {str(parent)!r} does not exist.", fix
        )
    if not os.access(parent, os.W_OK) or (target.exists() and not os.access(target, os.W_OK)):
        raise InputError(f"--save-snapshot {path!r}: no permission to write it.", fix)
    return target


def load_snapshot(path: str, hosts: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """A snapshot written by ``--save-snapshot`` (``{schema, hosts, nodes, pods,
    resourceslices, kubeadm_versions, cluster_configuration, kubelet_configuration}``, and
    ``gate_facts``: host -> the facts of ``dra_gate_audit_facts`` or null, absent in older
    snapshots); ``hosts`` from the inventory when it has none. Raises InputError naming
    --snapshot when the file is not JSON or not of that shape."""
    fix = "give a file written by gpufleet upgrade --save-snapshot FILE."
    what = f"--snapshot {path!r}"
    try:  # bounded (/dev/zero), a named pipe read without hanging
        text = ig.read_text(path, what, limit=SNAPSHOT_MAX_BYTES) or ""
    except ig.InputError as exc:
        raise InputError(str(exc).split("; fix: ")[0] + ".", fix) from None
    try:
        data = ig.check_shape(json.loads(text), what, max_nodes=SNAPSHOT_MAX_VALUES)
    except RecursionError:
        raise InputError(f"{what} nests too deep to be a snapshot.", fix) from None
    except ig.InputError as exc:
        raise InputError(str(exc).split("; fix: ")[0] + ".", fix) from None
    except ValueError as exc:
        raise InputError(f"{what} is not JSON: {exc}.", fix) from None
    if not isinstance(data, dict):
        raise InputError(
            f"--snapshot {path!r} holds a JSON {type(data).__name__}, not the object of a "
            "cluster snapshot.",
            fix,
        )
    if data.get("schema", SNAPSHOT_SCHEMA) != SNAPSHOT_SCHEMA:
        raise InputError(
            f"--snapshot {path!r} has schema {data.get('schema')!r}; this version reads "
            f"schema {SNAPSHOT_SCHEMA}.",
            "save the snapshot again with this version.",
        )
    for key in ("hosts", "nodes", "pods", "resourceslices"):
        value = data.get(key)
        if value is not None and not (
            isinstance(value, list) and all(isinstance(v, dict) for v in value)
        ):
            raise InputError(f"--snapshot {path!r}: {key!r} is not a list of objects.", fix)
    for key in ("kubeadm_versions", "cluster_configuration", "kubelet_configuration", "gate_facts"):
        value = data.get(key)
        if value is not None and not isinstance(value, dict):
            raise InputError(f"--snapshot {path!r}: {key!r} is not an object.", fix)
    for host, facts in (data.get("gate_facts") or {}).items():
        if facts is not None and not isinstance(facts, dict):
            raise InputError(f"--snapshot {path!r}: gate_facts[{host!r}] is not an object.", fix)
    if any(not isinstance(h.get("host"), str) for h in data.get("hosts") or []):
        raise InputError(f"--snapshot {path!r}: an entry of 'hosts' has no 'host' name.", fix)
    data.setdefault("hosts", list(hosts))
    for h in data["hosts"]:
        h.setdefault("name", h["host"])
    return data


def lab_release_warnings(versions: Iterable[str], variables: Any) -> list[str]:
    """On the lab's inventory (``lab_kubeconfig`` set): a warning per release of
    ``versions`` that gpufleet/lab/releases.yaml does not pin (the lab is air-gapped and
    builds packages and images only of pinned releases). [] for another inventory."""
    if not variables("lab_kubeconfig"):
        return []
    from gpufleet.lab import binaries

    pinned = [r.version for r in binaries.load_releases().releases]
    return [
        f"{v} is not pinned in gpufleet/lab/releases.yaml: the lab cannot build its packages "
        "and images, so a run stops before changing anything; pin it under "
        f"kubernetes.releases there or use one of {', '.join(pinned)}"
        for v in versions
        if v not in pinned
    ]


# ------------------------------------------------------------------------- cluster


def read_cluster(kubeconfig: str, name: str = "--kubeconfig") -> dict[str, Any]:
    """The cluster as the plan reads it (:func:`upgrade_cluster.read_cluster`). Raises
    InputError naming ``name`` (what gave the kubeconfig) when it cannot be loaded or the
    API server does not answer (within the client's timeouts)."""
    try:
        return uc.read_cluster(os.path.expanduser(kubeconfig))
    except vk.KubeError as exc:
        raise InputError(
            f"{name} {kubeconfig!r}: {' '.join(exc.message.split())[:600]}",
            f"check that the API server is up and reachable from here (kubectl --kubeconfig "
            f"{kubeconfig} get nodes), that {name} names this cluster's admin kubeconfig (a "
            "copy of /etc/kubernetes/admin.conf), or plan from a saved cluster with "
            "--snapshot FILE.",
        ) from None


# ------------------------------------------------------------------------- plan


def plan_from_snapshot(
    snapshot: Mapping[str, Any],
    target: str,
    *,
    batch_size: int | str,
    min_gpu_available_percent: float | str,
    via: Sequence[str] = (),
    features: Sequence[str] = (),
    gates: Mapping[str, bool] | None = None,
    package_revision: str = up.DEFAULT_PACKAGE_REVISION,
    repo_url_template: str = up.DEFAULT_REPO_URL,
    gpu_driver: str = up.DEFAULT_GPU_DRIVER,
    resume_hosts: Sequence[str] = (),
    input_names: Mapping[str, str] | None = None,
) -> up.UpgradePlan:
    """The plan for a snapshot (``{hosts, nodes, pods, resourceslices, kubeadm_versions,
    cluster_configuration, kubelet_configuration, gate_facts}``); ``resume_hosts`` and
    ``input_names`` as for ``upgrade_plan.build_plan``. Raises UpgradePlanError, or
    VersionModelError for gate facts it cannot use."""
    states = up.nodes_from_objects(
        snapshot["hosts"],
        snapshot.get("nodes") or [],
        snapshot.get("pods") or [],
        snapshot.get("resourceslices") or [],
        snapshot.get("kubeadm_versions") or {},
        gpu_driver,
    )
    current = up.settings_from_configmaps(
        snapshot.get("cluster_configuration"), snapshot.get("kubelet_configuration")
    )
    return up.build_plan(
        target,
        states,
        batch_size=batch_size,
        min_gpu_available_percent=min_gpu_available_percent,
        via=via,
        features=features,
        gates=gates,
        current_settings=current,
        package_revision=package_revision,
        repo_url_template=repo_url_template,
        resume_hosts=resume_hosts,
        input_names=input_names,
        host_facts=snapshot.get("gate_facts") or {},
    )


# ------------------------------------------------------------------------- report


def read_report(path: Path) -> dict[str, Any]:
    """The upgrade report at ``path`` (module ``upgrade_report``: ``{target, nodes: {host:
    {node, state, phase, cause, cordoned, cordoned_by_upgrade, timings_s}}}``), or {}
    when it is missing or not JSON."""
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return doc if isinstance(doc, dict) else {}


def foreign_report(report: Mapping[str, Any], cluster_uid: str | None) -> bool:
    """True when ``report`` was written for another cluster: its ``cluster_uid`` (the UID of
    that cluster's kube-system Namespace, stamped by :func:`own_report`) differs from
    ``cluster_uid``. A report without one, or a cluster whose UID is unknown (a
    snapshot), counts as this cluster's. The default report path is shared by every
    cluster upgraded from this machine, and host names (cp-1, gpu-1) repeat between a
    staging and a production inventory."""
    theirs = report.get("cluster_uid")
    return bool(theirs and cluster_uid and theirs != cluster_uid)


def own_report(path: Path, cluster_uid: str | None) -> str:
    """Before a run: move a report of another cluster aside (``<name>.cluster-<uid>.json``
    beside it) and stamp the report with ``cluster_uid``, under the lock file the module
    ``upgrade_report`` takes. Returns a line saying what was moved, or ""."""
    if not cluster_uid:
        return ""
    with open(str(path) + ".lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        report = read_report(path)
        note = ""
        if foreign_report(report, cluster_uid):
            aside = path.with_name(f"{path.stem}.cluster-{str(report['cluster_uid'])[:8]}.json")
            path.replace(aside)
            note = (
                f"the upgrade report {path} is another cluster's; moved to {aside}, this run "
                "starts afresh"
            )
            report = {}
        if report.get("cluster_uid") != cluster_uid:
            report["cluster_uid"] = cluster_uid
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_name(f".{path.name}.tmp")
            tmp.write_text(json.dumps(report, indent=2, sort_keys=True) + "\n", encoding="utf-8")
            tmp.replace(path)
    return note


def resume_hosts(report: Mapping[str, Any], versions: Sequence[str]) -> list[str]:
    """Hosts that a run to one of ``versions`` (the report's ``target``) drained and left
    cordoned: ``cordoned_by_upgrade`` set in their entry."""
    if str(report.get("target") or "") not in {str(v) for v in versions}:
        return []
    nodes = report.get("nodes") or {}
    return [h for h, e in nodes.items() if isinstance(e, Mapping) and e.get("cordoned_by_upgrade")]


def unfinished_hosts(report: Mapping[str, Any], versions: Sequence[str]) -> list[str]:
    """Hosts a run to one of ``versions`` left ``failed`` or ``in-progress``."""
    if str(report.get("target") or "") not in {str(v) for v in versions}:
        return []
    nodes = report.get("nodes") or {}
    return [
        h
        for h, e in nodes.items()
        if isinstance(e, Mapping) and e.get("state") in ("failed", "in-progress")
    ]


class PhaseTracker:
    """Follows an upgrade run's ansible-runner events: per host, the last
    ``upgrade_phase`` the role set (``set_fact`` results) and whether and why the host was
    unreachable. Rescue blocks do not run for an unreachable host, so the run cannot
    record such a failure itself; :meth:`record` does it afterwards."""

    def __init__(self) -> None:
        self.phase: dict[str, str] = {}
        self.drained: dict[str, bool] = {}
        self.unreachable: dict[str, str] = {}

    def feed(self, event: Mapping[str, Any]) -> None:
        data = event.get("event_data") or {}
        host = data.get("host")
        if not host:
            return
        res = data.get("res") or {}
        if event.get("event") == "runner_on_ok":
            facts = res.get("ansible_facts") or {}
            if "upgrade_phase" in facts:
                self.phase[host] = str(facts["upgrade_phase"])
            if "upgrade_drained" in facts:
                self.drained[host] = bool(facts["upgrade_drained"])
        elif event.get("event") == "runner_on_unreachable" and not data.get("ignore_errors"):
            msg = str(res.get("msg") or "unreachable").strip()
            self.unreachable[host] = " ".join(msg.split())[:500]

    def record(self, path: Path, target: str) -> list[str]:
        """Mark in the report at ``path`` every unreachable host whose entry is still
        ``in-progress`` as ``failed``, with its phase and Ansible's message. Returns the
        hosts marked."""
        from ansible_collections.gpufleet.cluster.plugins.modules import upgrade_report as ur

        report = read_report(path)
        marked = []
        for host, msg in self.unreachable.items():
            entry = (report.get("nodes") or {}).get(host)
            if not entry or entry.get("state") != "in-progress" or report.get("target") != target:
                continue
            drained = self.drained.get(host, False)
            ur.merge(
                report,
                {
                    "target": target,
                    "host": host,
                    "node": entry.get("node") or host,
                    "state": "failed",
                    "phase": self.phase.get(host) or entry.get("phase") or "",
                    "cause": f"host unreachable: {msg}",
                    "cordoned": True if drained else None,
                    "cordoned_by_upgrade": True if drained else None,
                    "timings": {},
                },
                ur.now(),
            )
            marked.append(host)
        if marked:
            tmp = path.with_name(f".{path.name}.cli")
            tmp.write_text(json.dumps(report, indent=2, sort_keys=True) + "\n")
            os.replace(tmp, path)
        return marked


# ------------------------------------------------------------------------- lab


def lab_report_path(var: Any) -> Path | None:
    """The lab's upgrade report, beside its kubeconfig (``labs/<name>/upgrade-report.json``
    under the cache), so that each lab keeps its own; None for another inventory."""
    kubeconfig = var("lab_kubeconfig")
    return Path(str(kubeconfig)).expanduser().parent / "upgrade-report.json" if kubeconfig else None


def repo_template(var: Any) -> str:
    """The package repository the plan names, with ``{minor}``: a local tree in the
    pkgs.k8s.io layout when there is one (``upgrade_local_repo_dir``; on the lab's
    inventory the one ``lab_upgrade_vars`` builds), else ``upgrade_repo_url``, else
    pkgs.k8s.io."""
    local = var("upgrade_local_repo_dir")
    if not local and var("lab_kubeconfig") and not var("upgrade_repo_url"):
        from gpufleet.lab import packages

        local = str(packages.default_root())
    if local:
        return f"file:{local}/core:/stable:/v{{minor}}/deb/"
    return str(var("upgrade_repo_url") or up.DEFAULT_REPO_URL)


def lab_upgrade_vars(
    running: Iterable[str],
    steps: Sequence[str],
    var: Any,
    log: Any = print,
) -> dict[str, dict[str, Any]]:
    """For the lab's inventory (``var("lab_kubeconfig")`` set; ``var(name)`` reads an
    inventory variable): per release of ``steps``, the extra variables that make the
    air-gapped upgrade work - the package repository in the pkgs.k8s.io layout, built from
    the cached binaries for every release in ``running`` (what the nodes run now, for the
    conversion of plain binaries to packages) and in ``steps``, and the control-plane
    images of the step (etcd keeps the lab's tag, ``kubeadm_etcd_image_tag``). When the
    lab's nodes mount the cache (``kubeadm_binaries_remote_src``), paths inside the nodes
    are given and nothing is copied. {} for any other inventory. Raises
    ``gpufleet.lab.packages.PackageError`` when a release is not built."""
    if not var("lab_kubeconfig"):
        return {}
    from gpufleet.lab import binaries, images, packages
    from gpufleet.lab.cluster import NODE_CACHE

    versions = sorted({str(v) for v in running if v} | {str(v) for v in steps})
    root = packages.default_root()
    packages.build_repository(versions, root, log=log)
    host_cache = str(binaries.cache_root())
    in_node = bool(var("kubeadm_binaries_remote_src"))

    def node_path(path: Path) -> str:
        text = str(path)
        if in_node and text.startswith(host_cache):
            return NODE_CACHE + text[len(host_cache) :]
        return text

    out: dict[str, dict[str, Any]] = {}
    for version in steps:
        specs = images.control_plane_images(version, etcd=var("kubeadm_etcd_image_tag"))
        archives = [{"ref": sp.ref, "path": node_path(images.build_archive(sp))} for sp in specs]
        out[str(version)] = {
            "upgrade_local_repo_dir": node_path(root),
            "upgrade_local_repo_remote_src": in_node,
            "upgrade_image_archives": archives,
        }
    return out


# ------------------------------------------------------------------------- command


@click.command("upgrade")
@click.option(
    "-i",
    "--inventory",
    "inventory",
    multiple=True,
    required=True,
    metavar="INVENTORY",
    help="Ansible inventory (repeat for several).",
)
@click.option("--to", "to_version", required=True, metavar="VERSION", help="Target release.")
@click.option("--plan", "plan_only", is_flag=True, help="Print the plan; change nothing.")
@click.option("--json", "as_json", is_flag=True, help="Print the plan as JSON (with --plan only).")
@click.option(
    "--via",
    multiple=True,
    metavar="VERSION",
    help="Release to pass through for each minor between the cluster's and --to (repeat).",
)
@click.option(
    "--batch-size",
    default=None,
    help="Workers per batch: a number or a percentage (default: upgrade_batch_size, else 1).",
)
@click.option(
    "--min-gpu-available-percent",
    default=None,
    help="Floor on GPU devices left schedulable while a batch is drained "
    "(default: upgrade_min_gpu_available_percent, else 0).",
)
@click.option("--kubeconfig", default=None, help="Admin kubeconfig on this machine.")
@click.option(
    "--snapshot",
    type=click.Path(exists=True, dir_okay=False),
    default=None,
    help="Plan from a saved cluster snapshot instead of reading the cluster.",
)
@click.option(
    "--save-snapshot",
    type=click.Path(dir_okay=False),
    default=None,
    help="Write what was read from the cluster and the hosts to this file.",
)
@extra_vars_flag("Extra variable for the upgrade playbook (repeat); the value is read as YAML.")
@click.option(
    "--no-validate", is_flag=True, help="Do not run playbooks/validate.yml before and after."
)
@click.option(
    "--accept-warnings",
    is_flag=True,
    help="Upgrade although validate before, or the gate audit, warns "
    "(sets upgrade_accept_warnings=true).",
)
def upgrade(
    inventory: tuple[str, ...],
    to_version: str,
    plan_only: bool,
    as_json: bool,
    via: tuple[str, ...],
    batch_size: str | None,
    min_gpu_available_percent: str | None,
    kubeconfig: str | None,
    snapshot: str | None,
    save_snapshot: str | None,
    extra_vars: dict[str, Any],
    no_validate: bool,
    accept_warnings: bool,
) -> None:
    """Upgrade kubeadm, the control plane and the kubelets to --to, one minor at a time."""
    kc = None
    if as_json and not plan_only:
        # a run prints its progress on stdout: JSON there would be followed by the upgrade
        click.echo("Error: --json prints the plan only; the upgrade would run too.", err=True)
        click.echo(
            "Fix: add --plan (gpufleet upgrade -i INVENTORY --to VERSION --plan --json), "
            "then run without --json to upgrade.",
            err=True,
        )
        sys.exit(EXIT_CANNOT_RUN)
    try:
        inv = read_inventory(inventory)
        hosts = inventory_hosts(inv)
        names = [h["host"] for h in hosts]
        var = Variables(inventory, names, extra_vars)
        # Everything that does not need the cluster is judged before it is read.
        inputs = planner_inputs(
            to_version,
            via,
            batch_size,
            min_gpu_available_percent,
            var,
            sum(1 for h in hosts if not h["control_plane"]),
        )
        report_file = Path(
            os.path.expanduser(
                str(var("upgrade_report_path") or lab_report_path(var) or DEFAULT_REPORT)
            )
        )
        save_path = check_save_snapshot(save_snapshot) if save_snapshot else None
        if snapshot:
            data = load_snapshot(snapshot, hosts)
        else:
            kc, kc_name = resolve_kubeconfig(kubeconfig, var)
            data = read_cluster(kc, kc_name)
            data["hosts"] = hosts
            data["kubeadm_versions"] = read_kubeadm_versions(inventory, names)
            data["gate_facts"] = read_gate_facts(inventory, names)
        if save_path is not None:
            try:
                save_path.write_text(json.dumps(data, indent=1, default=str) + "\n")
            except OSError as exc:
                raise InputError(
                    f"--save-snapshot {save_snapshot!r} cannot be written: {exc.strerror}.",
                    "give a file in an existing, writable directory.",
                ) from None
        report = read_report(report_file)
        if foreign_report(report, data.get("cluster_uid")):
            click.echo(
                f"note: the upgrade report {report_file} is another cluster's (kube-system "
                f"{report.get('cluster_uid')}): nothing in it is resumed",
                err=True,
            )
            report = {}
        target = inputs.pop("target")
        plan = plan_from_snapshot(
            data, target, resume_hosts=resume_hosts(report, [target]), **inputs
        )
        plan.warnings.extend(lab_release_warnings([s.version for s in plan.steps], var))
    except (InputError, dv.VersionModelError) as exc:
        click.echo(f"Error: {exc.reason}", err=True)
        if exc.fix:
            click.echo(f"Fix: {exc.fix}", err=True)
        sys.exit(EXIT_CANNOT_RUN)
    via_all = list(inputs["via"])
    if as_json:
        click.echo(json.dumps(plan.to_dict(), indent=2, sort_keys=True))
    else:
        render(plan, Console(width=max(140, Console().width), soft_wrap=False))
    if plan.blocking:  # refused before any host is changed, with or without --plan
        if as_json:
            n = len(plan.blocking)
            click.echo(f"blocked: {n} entr{'y' if n == 1 else 'ies'} (see 'blocking')", err=True)
        sys.exit(EXIT_FAILED)
    if plan_only or plan.up_to_date:
        return
    console = Console()
    extra = run_extra_vars(extra_vars, report_file, batch_size, min_gpu_available_percent, kc)
    if accept_warnings:
        extra["upgrade_accept_warnings"] = True
    try:
        per_step = lab_upgrade_vars(
            [v for n in plan.nodes for v in (n.kubelet, n.kubeadm) if v],
            [s.version for s in plan.steps],
            var,
            lambda m: console.print(f"  {m}"),
        )
    except Exception as exc:  # PackageError, an image that cannot be built: nothing ran
        console.print(f"[red]building the lab's packages and images failed: {exc}[/red]")
        sys.exit(EXIT_CANNOT_RUN)
    moved = own_report(report_file, data.get("cluster_uid"))
    if moved:
        console.print(moved)
    resuming = unfinished_hosts(report, [s.version for s in plan.steps])
    sys.exit(
        run_steps(
            plan,
            list(inventory),
            via_all,
            extra=extra,
            per_step=per_step,
            report_file=report_file,
            validate=not no_validate,
            accept_warnings=accept_warnings or _truthy(var("upgrade_accept_warnings")),
            resuming=resuming,
            console=console,
        )
    )


def _truthy(value: Any) -> bool:
    """A variable's boolean as Ansible reads it (``ansible.module_utils.parsing.
    convert_bool.boolean``, not strict: anything it does not know is false)."""
    from ansible.module_utils.parsing.convert_bool import boolean

    return bool(value) and boolean(value, strict=False)


def run_extra_vars(
    extra_vars: Mapping[str, Any],
    report_file: Path,
    batch_size: str | None = None,
    min_gpu_available_percent: str | None = None,
    kubeconfig: str | None = None,
) -> dict[str, Any]:
    """The variables every step's run gets: ``-e``, the report path, and what the plan was
    made with (``--batch-size`` and ``--min-gpu-available-percent`` as
    ``upgrade_batch_size`` and ``upgrade_min_gpu_available_percent``, since the role plans
    again with them; the kubeconfig read unless ``-e`` names one)."""
    extra = {**extra_vars, "upgrade_report_path": str(report_file)}
    if batch_size is not None:
        extra["upgrade_batch_size"] = batch_size
    if min_gpu_available_percent is not None:
        extra["upgrade_min_gpu_available_percent"] = min_gpu_available_percent
    if kubeconfig is not None:
        extra.setdefault("upgrade_kubeconfig", kubeconfig)
    return extra


def warned_checks(doc: Mapping[str, Any]) -> list[str]:
    """Ids of the checks of a validate report (``{checks: [{id, status}]}``) that
    warned."""
    return [
        str(c.get("id"))
        for c in doc.get("checks") or []
        if isinstance(c, Mapping) and c.get("status") == "warn"
    ]


def run_validate(
    inventory: list[str], when: str, console: Console, *, refuse_warnings: bool = False
) -> int:
    """``playbooks/validate.yml`` with its report written to
    ``$GPUFLEET_CACHE/reports/validate-upgrade-<when>.json`` and shown as ``gpufleet up``
    shows it. Returns 0 when the run and every check passed, else 1; with
    ``refuse_warnings`` (the validation before an upgrade, unless the warnings are
    accepted explicitly: ``--accept-warnings``, ``upgrade_accept_warnings``) a check that
    warned counts as failed too."""
    from ansible_collections.gpufleet.cluster.plugins.module_utils import validate_report as vr

    from gpufleet.commands import report_view
    from gpufleet.commands import up as up_cmd
    from gpufleet.runner import run_playbook

    path = up_cmd.report_path().with_name(f"validate-upgrade-{when}.json")
    path.parent.mkdir(parents=True, exist_ok=True)  # a fresh machine has no reports/ yet
    started = time.time()
    console.rule(f"validate {when} the upgrade")
    status = run_playbook(
        "validate", inventory, extravars={"validate_report_file": str(path)}, console=console
    ).status
    doc = report_view.read_report(path, float(int(started)))
    if doc is not None:
        report_view.render_report(console, doc, str(path))
        status = max(status, EXIT_FAILED if vr.exit_code(doc) else EXIT_OK)
        warned = warned_checks(doc)
        if refuse_warnings and warned and not status:
            console.print(
                f"[red]validate warned before the upgrade ({', '.join(warned)}): fix the "
                "cause, or accept the warnings explicitly with --accept-warnings "
                "(-e upgrade_accept_warnings=true)[/red]"
            )
            status = EXIT_FAILED
    return EXIT_FAILED if status else EXIT_OK


def run_steps(
    plan: up.UpgradePlan,
    inventory: list[str],
    via: list[str],
    *,
    extra: Mapping[str, Any] | None = None,
    per_step: Mapping[str, Mapping[str, Any]] | None = None,
    report_file: Path = DEFAULT_REPORT,
    validate: bool = True,
    accept_warnings: bool = False,
    resuming: Sequence[str] = (),
    console: Console | None = None,
) -> int:
    """Run ``playbooks/upgrade.yml`` per step (validate before and after when present and
    ``validate``; not before when ``resuming`` names hosts an earlier run left failed);
    stop at the first failed step. ``extra``: variables for every step, ``per_step``:
    release -> variables for that step (``extra`` wins). Prints each step's timings from
    the report. Returns the exit status."""
    from gpufleet.runner import RunError, collection_root, run_playbook

    console = console or Console()
    names = [n.host for n in plan.nodes]
    try:
        has_validate = validate and (collection_root() / "playbooks" / "validate.yml").is_file()
        if has_validate and resuming:
            console.print(
                f"resuming the run that stopped on {', '.join(resuming)}: validate runs after "
                "the upgrade only"
            )
        elif (
            has_validate
            and run_validate(inventory, "before", console, refuse_warnings=not accept_warnings) != 0
        ):
            console.print("[red]validate failed before the upgrade: nothing was changed[/red]")
            return EXIT_FAILED
        for step in plan.steps:
            console.rule(f"upgrade to {step.version}")
            tracker = PhaseTracker()
            extravars = {
                **dict((per_step or {}).get(step.version) or {}),
                **dict(extra or {}),
                "upgrade_kubernetes_version": step.version,
                "upgrade_via": via,
            }
            t0, since = time.monotonic(), time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
            result = run_playbook(
                "upgrade", inventory, extravars=extravars, console=console, on_event=tracker.feed
            )
            wall = time.monotonic() - t0
            marked = tracker.record(report_file, step.version)
            report = read_report(report_file)
            render_timings(timing_rows(report, names, since), wall, console)
            if result.status != 0:
                for host, entry in sorted((report.get("nodes") or {}).items()):
                    if entry.get("state") == "failed":
                        console.print(
                            f"[red]{entry.get('node') or host}: failed in phase "
                            f"{entry.get('phase')}"
                            f"{' (left cordoned)' if entry.get('cordoned') else ''}: "
                            f"{entry.get('cause')}[/red]"
                        )
                if marked:
                    console.print(f"recorded as unreachable: {', '.join(marked)}")
                console.print(
                    f"[red]step to {step.version} failed; report: {report_file}; fix the "
                    "cause and run the same command again to resume[/red]"
                )
                return result.status
        if has_validate and run_validate(inventory, "after", console) != 0:
            console.print("[red]validate failed after the upgrade: see the report above[/red]")
            return EXIT_FAILED
    except RunError as exc:
        console.print(f"[red]{exc}[/red]")
        return EXIT_CANNOT_RUN
    return EXIT_OK
