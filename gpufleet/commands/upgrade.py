"""``gpufleet upgrade``: roll kubeadm, the control plane and the kubelets to a release, one
minor at a time, in lockstep.

``gpufleet upgrade -i INVENTORY --to VERSION --plan [--json]`` changes nothing: it reads
what every node runs (one list of Nodes for the kubelet versions, one list of the
``kube-apiserver`` static pods for the apiserver versions, one list of ResourceSlices for
the GPU devices, the ``kubeadm-config`` and ``kubelet-config`` ConfigMaps for the DRA
settings in force; ``kubeadm version`` on each host through Ansible) and prints the plan
of ``plugins/module_utils/upgrade_plan.py``: the path, per step the packages, the
repository, the kubeadm command, the DRA gate and runtime-config changes, what the target
refuses to start with, and the order of the nodes (waves).

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

Exit codes: 0 planned or upgraded; 1 a host or a step failed; 2 the plan is refused
(downgrade, skipped minor, target outside the model, bad batch/floor values) or the
cluster or inventory could not be read.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import click
import yaml
from ansible_collections.gpufleet.cluster.plugins.module_utils import dra_versions as dv
from ansible_collections.gpufleet.cluster.plugins.module_utils import upgrade_plan as up
from rich.console import Console
from rich.table import Table

from gpufleet.commands._options import extra_vars_option

EXIT_OK, EXIT_FAILED, EXIT_CANNOT_RUN = 0, 1, 2
SNAPSHOT_SCHEMA = 1
#: The role's default upgrade_report_path (roles/upgrade/defaults/main.yml).
DEFAULT_REPORT = Path("~/.cache/gpufleet/upgrade-report.json")


class InputError(Exception):
    """The inventory or the cluster could not be read (exit 2)."""


# ------------------------------------------------------------------------- inventory


def read_inventory(inventory: Sequence[str]) -> dict[str, Any]:
    """``ansible-inventory --list`` of ``inventory`` as a dict (raises InputError)."""
    exe = Path(sys.executable).parent / "ansible-inventory"
    argv = [str(exe) if exe.exists() else "ansible-inventory"]
    for inv in inventory:
        if not Path(inv).exists():
            raise InputError(f"inventory {inv!r} does not exist; fix: pass -i with a path")
        argv += ["-i", inv]
    argv.append("--list")
    proc = subprocess.run(argv, capture_output=True, text=True, check=False, timeout=120)
    if proc.returncode != 0:
        raise InputError(f"ansible-inventory failed: {proc.stderr.strip()[-400:]}")
    return json.loads(proc.stdout)


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
    hostvars); templated values (``{{ ... }}``) are ignored."""
    hostvars = (inv.get("_meta") or {}).get("hostvars") or {}
    for name in names:
        for h in hosts:
            value = (hostvars.get(h) or {}).get(name)
            if value is None or (isinstance(value, str) and "{{" in value):
                continue
            return value
    return None


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


# ------------------------------------------------------------------------- cluster


def read_cluster(kubeconfig: str) -> dict[str, Any]:
    """One list each of Nodes, kube-apiserver Pods and ResourceSlices, and the two kubeadm
    ConfigMaps, as plain dicts (raises InputError when the API cannot be reached)."""
    from kubernetes import client, config
    from kubernetes.client.rest import ApiException

    try:
        api_client = config.new_client_from_config(config_file=os.path.expanduser(kubeconfig))
    except Exception as exc:
        raise InputError(f"kubeconfig {kubeconfig!r} cannot be loaded: {exc}") from None
    core = client.CoreV1Api(api_client)
    custom = client.CustomObjectsApi(api_client)
    plain = api_client.sanitize_for_serialization
    try:
        nodes = plain(core.list_node())["items"]
        pods = plain(
            core.list_namespaced_pod("kube-system", label_selector="component=kube-apiserver")
        )["items"]
    except Exception as exc:
        raise InputError(f"the API server behind {kubeconfig} did not answer: {exc}") from None
    slices: list[dict[str, Any]] = []
    for version in ("v1", "v1beta2", "v1beta1"):
        try:
            slices = custom.list_cluster_custom_object(
                "resource.k8s.io", version, "resourceslices"
            )["items"]
            break
        except ApiException as exc:
            if exc.status != 404:
                raise InputError(f"listing ResourceSlices failed: {exc.reason}") from None
    cms: dict[str, Any] = {}
    for name, key in (("kubeadm-config", "ClusterConfiguration"), ("kubelet-config", "kubelet")):
        try:
            cm = core.read_namespaced_config_map(name, "kube-system")
            cms[name] = yaml.safe_load((cm.data or {}).get(key) or "") or {}
        except ApiException:
            cms[name] = None
    return {
        "schema": SNAPSHOT_SCHEMA,
        "nodes": nodes,
        "pods": pods,
        "resourceslices": slices,
        "cluster_configuration": cms["kubeadm-config"],
        "kubelet_configuration": cms["kubelet-config"],
    }


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
) -> up.UpgradePlan:
    """The plan for a snapshot (``{hosts, nodes, pods, resourceslices, kubeadm_versions,
    cluster_configuration, kubelet_configuration}``); ``resume_hosts`` as for
    ``upgrade_plan.build_plan``. Raises UpgradePlanError."""
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
    )


def render(plan: up.UpgradePlan, console: Console) -> None:
    """Tables for humans: the nodes as found, then per step the waves and the changes."""
    nodes = Table(title=f"nodes now (target {plan.target})")
    for col in ("host", "node", "role", "kubelet", "apiserver", "kubeadm", "GPU devices", "state"):
        nodes.add_column(col)
    for n in plan.nodes:
        state = ("cordoned " if n.unschedulable else "") + ("Ready" if n.ready else "NotReady")
        nodes.add_row(
            n.host,
            n.name,
            "control-plane" if n.control_plane else "worker",
            n.kubelet or "?",
            n.apiserver or "-",
            n.kubeadm or "?",
            str(n.gpu_devices),
            state,
        )
    console.print(nodes)
    for w in plan.warnings:
        console.print(f"[yellow]warning:[/yellow] {w}")
    if plan.up_to_date:
        console.print(f"[green]every component runs {plan.target}: nothing to do[/green]")
        return
    console.print(
        "path: "
        + " -> ".join([str(plan.steps[0].source)] + [s.version for s in plan.steps])
        + f"  (batch size {plan.batch_size}, GPU floor {plan.min_gpu_available_percent:g}%)"
    )
    for i, step in enumerate(plan.steps, 1):
        d = step.to_dict()
        console.rule(f"step {i}: {step.source} -> {step.version}")
        console.print(f"repository: {step.repo_url}")
        console.print(
            "packages: " + ", ".join(f"{k}={v}" for k, v in sorted(step.packages.items()))
        )
        console.print(
            f"kubeadm config API: {step.kubeadm_api['from']} -> {step.kubeadm_api['to']}; "
            f"UpgradeConfiguration: {'yes' if step.upgrade_configuration else 'no (flags)'}"
        )
        console.print(
            f"on {step.apply_host or '(already applied)'}: {' '.join(step.apply_command)}"
        )
        waves = Table(title="order")
        for col in ("wave", "kind", "hosts", "GPU devices drained", "GPU available %"):
            waves.add_column(col)
        for w in step.waves:
            waves.add_row(
                str(w.index),
                w.kind,
                ", ".join(w.hosts),
                str(w.gpu_devices_drained),
                f"{w.gpu_available_percent:g}",
            )
        skipped = [n for n in step.nodes if n.skip]
        for n in skipped:
            waves.add_row("-", "skip", n.host, "0", n.reason)
        console.print(waves)
        for n in step.nodes:
            if n.resume:
                console.print(f"resume {n.host} (wave {n.wave}): {n.reason}")
        changes = Table(title="DRA settings (version model)")
        for col in ("component", "entry", "change", "reason"):
            changes.add_column(col, overflow="fold")
        tr = d["transition"]
        for c in tr["gate_changes"]:
            before = "-" if c["before"] is None else str(c["before"]).lower()
            after = "-" if c["after"] is None else str(c["after"]).lower()
            changes.add_row(
                c["component"], c["gate"], f"{c['action']} {before} -> {after}", c["reason"]
            )
        for c in tr["runtime_config_changes"]:
            changes.add_row(
                "kube-apiserver", f"runtime-config {c['entry']}", c["action"], c["reason"]
            )
        for component, rep in sorted(step.sanitize.items()):
            for f in rep["remove"]:
                changes.add_row(component, f["entry"], "remove (found now)", f["reason"])
            for f in rep["advice"]:
                changes.add_row(component, f["entry"], "advise remove", f["reason"])
            for entry in rep["not_checked"]:
                changes.add_row(component, entry, "kept", "not a DRA gate: not checked")
        if changes.row_count:
            console.print(changes)
        else:
            console.print("DRA settings: no change")
        for w in step.warnings:
            console.print(f"[yellow]warning:[/yellow] {w}")


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


#: Timings of a node in the report that are waiting on Kubernetes, not on the toolkit.
WAIT_KEYS = ("drain_s", "restart_ready_s", "dra_plugin_s")


def timing_rows(
    report: Mapping[str, Any], hosts: Sequence[str], since: str = ""
) -> list[dict[str, Any]]:
    """Per host of ``hosts`` that has timings in the report: ``{host, node, state,
    control_plane_s, drain_s, restart_ready_s, dra_plugin_s, node_total_s, waits_s,
    overhead_s}`` in seconds. ``node_total_s`` is the node's whole time (for a
    control-plane node its kubeadm part plus its kubelet part), ``waits_s`` the sum of
    drain, restart to Ready and plugin, ``overhead_s`` the rest (kubeadm, packages,
    checks, Ansible). ``since`` (``%Y-%m-%dT%H:%M:%SZ``, UTC): only entries upgraded or
    failed at or after it, i.e. by this run (a node skipped now keeps the timings of the
    run that upgraded it)."""
    rows = []
    nodes = report.get("nodes") or {}
    for host in hosts:
        e = nodes.get(host) or {}
        t = e.get("timings_s") or {}
        if not t or (since and (e.get("state") == "skipped" or str(e.get("updated")) < since)):
            continue
        waits = sum(float(t.get(k) or 0) for k in WAIT_KEYS)
        parts = [float(t[k]) for k in ("control_plane_s", "node_total_s") if t.get(k) is not None]
        total = round(sum(parts), 1) if parts else None
        rows.append(
            {
                "host": host,
                "node": e.get("node") or host,
                "state": e.get("state"),
                **{k: t.get(k) for k in (*WAIT_KEYS, "control_plane_s")},
                "node_total_s": total,
                "waits_s": round(waits, 1),
                "overhead_s": round(float(total) - waits, 1) if total is not None else None,
            }
        )
    return rows


def render_timings(rows: Sequence[Mapping[str, Any]], wall_s: float, console: Console) -> None:
    """The per-node timing table and the step's wall-clock time against the summed waits."""
    table = Table(title="timings (s)")
    cols = ("host", "state", "control plane", "drain", "restart->Ready", "plugin+slices",
            "node total", "waits", "overhead")  # fmt: skip
    for col in cols:
        table.add_column(col, justify="left" if col in ("host", "state") else "right")

    def f(v: Any) -> str:
        return "-" if v is None else f"{float(v):.1f}"

    for r in rows:
        table.add_row(
            r["host"], str(r["state"]), f(r["control_plane_s"]), f(r["drain_s"]),
            f(r["restart_ready_s"]), f(r["dra_plugin_s"]), f(r["node_total_s"]),
            f(r["waits_s"]), f(r["overhead_s"]),
        )  # fmt: skip
    console.print(table)
    waits = sum(r["waits_s"] for r in rows)
    console.print(
        f"step wall-clock {wall_s:.1f}s; drain + restart->Ready + plugin summed over the "
        f"nodes {waits:.1f}s; the rest {wall_s - waits:.1f}s (plan, preflight, backups, "
        "kubeadm, packages, checks, Ansible)"
    )


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
@click.option("--json", "as_json", is_flag=True, help="Print the plan as JSON.")
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
@click.option(
    "-e",
    "--extra-vars",
    "extra_vars",
    multiple=True,
    metavar="KEY=VALUE|@FILE",
    callback=extra_vars_option,
    help="Extra variable for the upgrade playbook (repeat); the value is read as YAML.",
)
@click.option(
    "--no-validate", is_flag=True, help="Do not run playbooks/validate.yml before and after."
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
) -> None:
    """Upgrade kubeadm, the control plane and the kubelets to --to, one minor at a time."""
    kc = None
    try:
        inv = read_inventory(inventory)
        hosts = inventory_hosts(inv)
        names = [h["host"] for h in hosts]

        def var(*keys: str) -> Any:
            for key in keys:
                if extra_vars.get(key) not in (None, ""):
                    return extra_vars[key]
            return inventory_var(inv, names, *keys)

        if snapshot:
            data = json.loads(Path(snapshot).read_text())
            data.setdefault("hosts", hosts)
        else:
            kc = str(
                kubeconfig
                or var("upgrade_kubeconfig", "lab_kubeconfig", "dra_feature_gates_kubeconfig")
                or os.environ.get("KUBECONFIG")
                or "~/.kube/config"
            )
            data = read_cluster(kc)
            data["hosts"] = hosts
            data["kubeadm_versions"] = read_kubeadm_versions(inventory, names)
        if save_snapshot:
            Path(save_snapshot).write_text(json.dumps(data, indent=1, default=str) + "\n")
    except InputError as exc:
        click.echo(f"Error: {exc}", err=True)
        sys.exit(EXIT_CANNOT_RUN)
    via_all = list(via) or list(var("upgrade_via") or [])
    features = var("dra_feature_gates_features") or []
    gates = var("dra_feature_gates_extra") or {}
    report_file = Path(
        os.path.expanduser(
            str(var("upgrade_report_path") or lab_report_path(var) or DEFAULT_REPORT)
        )
    )
    report = read_report(report_file)
    try:
        plan = plan_from_snapshot(
            data,
            to_version,
            batch_size=batch_size or var("upgrade_batch_size") or 1,
            min_gpu_available_percent=min_gpu_available_percent
            or var("upgrade_min_gpu_available_percent")
            or 0,
            via=via_all,
            features=features,
            gates=gates,
            package_revision=str(var("upgrade_package_revision") or up.DEFAULT_PACKAGE_REVISION),
            repo_url_template=repo_template(var),
            resume_hosts=resume_hosts(report, [to_version]),
        )
    except dv.VersionModelError as exc:
        click.echo(f"Error: {exc.reason}", err=True)
        if exc.fix:
            click.echo(f"Fix: {exc.fix}", err=True)
        sys.exit(EXIT_CANNOT_RUN)
    if as_json:
        click.echo(json.dumps(plan.to_dict(), indent=2, sort_keys=True))
    else:
        render(plan, Console(width=max(140, Console().width), soft_wrap=False))
    if plan_only or plan.up_to_date:
        return
    console = Console()
    extra = {**extra_vars, "upgrade_report_path": str(report_file)}
    if kc is not None:
        extra.setdefault("upgrade_kubeconfig", kc)
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
            resuming=resuming,
            console=console,
        )
    )


def run_validate(inventory: list[str], when: str, console: Console) -> int:
    """``playbooks/validate.yml`` with its report written to
    ``$GPUFLEET_CACHE/reports/validate-upgrade-<when>.json`` and shown as ``gpufleet up``
    shows it. Returns 0 when the run and every check passed, else 1."""
    from gpufleet.commands import up as up_cmd
    from gpufleet.runner import run_playbook

    path = up_cmd.report_path().with_name(f"validate-upgrade-{when}.json")
    started = time.time()
    console.rule(f"validate {when} the upgrade")
    status = run_playbook(
        "validate", inventory, extravars={"validate_report_file": str(path)}, console=console
    ).status
    doc = up_cmd.read_report(path, float(int(started)))
    if doc is not None:
        up_cmd.render_report(doc, console, path)
        status = max(status, up_cmd.report_status(doc))
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
        elif has_validate and run_validate(inventory, "before", console) != 0:
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
