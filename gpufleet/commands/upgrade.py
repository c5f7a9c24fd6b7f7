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
(``upgrade_kubernetes_version`` = the step's release), and ``playbooks/validate.yml``
before and after when the collection has it. ``--snapshot FILE`` plans from a saved
cluster snapshot (``--save-snapshot FILE`` writes one), for review away from the cluster.

Exit codes: 0 planned or upgraded; 1 a host or a step failed; 2 the plan is refused
(downgrade, skipped minor, target outside the model, bad batch/floor values) or the
cluster or inventory could not be read.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import click
import yaml
from ansible_collections.gpufleet.cluster.plugins.module_utils import dra_versions as dv
from ansible_collections.gpufleet.cluster.plugins.module_utils import upgrade_plan as up
from rich.console import Console
from rich.table import Table

EXIT_OK, EXIT_FAILED, EXIT_CANNOT_RUN = 0, 1, 2
SNAPSHOT_SCHEMA = 1


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
) -> up.UpgradePlan:
    """The plan for a snapshot (``{hosts, nodes, pods, resourceslices, kubeadm_versions,
    cluster_configuration, kubelet_configuration}``). Raises UpgradePlanError."""
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
) -> None:
    """Upgrade kubeadm, the control plane and the kubelets to --to, one minor at a time."""
    try:
        inv = read_inventory(inventory)
        hosts = inventory_hosts(inv)
        names = [h["host"] for h in hosts]
        var = lambda *n: inventory_var(inv, names, *n)  # noqa: E731
        if snapshot:
            data = json.loads(Path(snapshot).read_text())
            data.setdefault("hosts", hosts)
        else:
            kc = (
                kubeconfig
                or var("upgrade_kubeconfig", "dra_feature_gates_kubeconfig")
                or os.environ.get("KUBECONFIG")
                or "~/.kube/config"
            )
            data = read_cluster(str(kc))
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
            repo_url_template=str(var("upgrade_repo_url") or up.DEFAULT_REPO_URL),
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
    sys.exit(run_steps(plan, list(inventory), via_all))


def run_steps(plan: up.UpgradePlan, inventory: list[str], via: list[str]) -> int:
    """Run ``playbooks/upgrade.yml`` per step (validate before and after when present);
    stop at the first failed step. Returns the exit status."""
    from gpufleet.runner import RunError, collection_root, run_playbook

    console = Console()
    try:
        has_validate = (collection_root() / "playbooks" / "validate.yml").is_file()
        if has_validate and run_playbook("validate", inventory).status != 0:
            console.print("[red]validate failed before the upgrade: nothing was changed[/red]")
            return EXIT_FAILED
        for step in plan.steps:
            console.rule(f"upgrade to {step.version}")
            result = run_playbook(
                "upgrade",
                inventory,
                extravars={"upgrade_kubernetes_version": step.version, "upgrade_via": via},
            )
            if result.status != 0:
                console.print(
                    f"[red]step to {step.version} failed; see the report named by "
                    "upgrade_report_path; run the same command again to resume[/red]"
                )
                return result.status
        if has_validate and run_playbook("validate", inventory).status != 0:
            return EXIT_FAILED
    except RunError as exc:
        console.print(f"[red]{exc}[/red]")
        return EXIT_CANNOT_RUN
    return EXIT_OK
