"""What ``gpufleet upgrade`` adds on the lab's inventory (``inventory/lab``, air-gapped):
the lab's variables (its state file), the package repository and control-plane images of
each release on the path, and warnings for releases the lab cannot build.

The plan itself is the upgrade role's (module ``upgrade_plan``); nothing here judges it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

#: The lab's variables the upgrade needs here (from its state file, via inventory/lab).
LAB_VARS = ("lab_kubeconfig", "kubeadm_binaries_remote_src", "kubeadm_etcd_image_tag")


def lab_vars(inventory: Mapping[str, Any]) -> dict[str, Any] | None:
    """``{name: value}`` of :data:`LAB_VARS` from ``inventory`` (``ansible-inventory
    --list``'s answer; group variables land in hostvars) when it is a lab's (a host carries
    ``lab_kubeconfig``): the first host that sets a name, untemplated values skipped. None
    for another inventory."""
    hostvars = (inventory.get("_meta") or {}).get("hostvars") or {}
    out: dict[str, Any] = {}
    for name in LAB_VARS:
        for values in hostvars.values():
            value = (values or {}).get(name)
            if value is None or (isinstance(value, str) and "{{" in value):
                continue
            out[name] = value
            break
    return out if out.get("lab_kubeconfig") else None


def lab_release_warnings(versions: Iterable[str], var: Mapping[str, Any] | None) -> list[str]:
    """On the lab (``var``: :func:`lab_vars`, None elsewhere): a warning per release of
    ``versions`` that gpufleet/lab/releases.yaml does not pin (the lab builds packages and
    images only of pinned releases). [] for another inventory."""
    if not var:
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


def _node_path(var: Mapping[str, Any]) -> Callable[[Path], str]:
    """Paths as the lab's nodes see them: the cache is mounted at ``NODE_CACHE`` there when
    ``kubeadm_binaries_remote_src`` is set; else the path on this machine."""
    from gpufleet.lab import binaries
    from gpufleet.lab.cluster import NODE_CACHE

    host_cache = str(binaries.cache_root())
    in_node = bool(var.get("kubeadm_binaries_remote_src"))

    def node_path(path: Path) -> str:
        text = str(path)
        if in_node and text.startswith(host_cache):
            return NODE_CACHE + text[len(host_cache) :]
        return text

    return node_path


def lab_plan_vars(var: Mapping[str, Any] | None) -> dict[str, Any]:
    """On the lab: the package repository the plan names (``upgrade_local_repo_dir``, the
    tree ``gpufleet.lab.packages`` builds, as the nodes see it, and
    ``upgrade_local_repo_remote_src``), once that tree exists or the nodes mount it (the
    role checks a local tree's layout before planning). Builds nothing. {} for another
    inventory, or before the lab's repository is built on a lab that copies it."""
    if not var:
        return {}
    from gpufleet.lab import packages

    root = packages.default_root()
    in_node = bool(var.get("kubeadm_binaries_remote_src"))
    if not in_node and not (root / "core:" / "stable:").is_dir():
        return {}
    return {
        "upgrade_local_repo_dir": _node_path(var)(root),
        "upgrade_local_repo_remote_src": in_node,
    }


def lab_upgrade_vars(
    running: Iterable[str],
    steps: Sequence[str],
    var: Mapping[str, Any] | None,
    log: Callable[[str], Any] = print,
) -> dict[str, dict[str, Any]]:
    """On the lab (``var``: :func:`lab_vars`): per release of ``steps``, the extra
    variables that make the air-gapped upgrade work - the package repository in the
    pkgs.k8s.io layout, built from the cached binaries for every release in ``running``
    (what the nodes run now, for the conversion of plain binaries to packages) and in
    ``steps``, and the control-plane images of the step (etcd keeps the lab's tag,
    ``kubeadm_etcd_image_tag``). When the lab's nodes mount the cache
    (``kubeadm_binaries_remote_src``), paths inside the nodes are given and nothing is
    copied. {} for any other inventory. Raises ``gpufleet.lab.packages.PackageError`` when
    a release is not built."""
    if not var:
        return {}
    from gpufleet.lab import images, packages

    versions = sorted({str(v) for v in running if v} | {str(v) for v in steps})
    root = packages.default_root()
    packages.build_repository(versions, root, log=log)
    node_path = _node_path(var)
    out: dict[str, dict[str, Any]] = {}
    for version in steps:
        specs = images.control_plane_images(version, etcd=var.get("kubeadm_etcd_image_tag"))
        archives = [{"ref": sp.ref, "path": node_path(images.build_archive(sp))} for sp in specs]
        out[str(version)] = {
            "upgrade_local_repo_dir": node_path(root),
            "upgrade_local_repo_remote_src": bool(var.get("kubeadm_binaries_remote_src")),
            "upgrade_image_archives": archives,
        }
    return out
