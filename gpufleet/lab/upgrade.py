"""What an upgrade of the lab needs (the lab is air-gapped): the package repository and
control-plane images of each release on the path, built before ``gpufleet upgrade -i
inventory/lab`` by ``gpufleet lab prepare-upgrade --to VERSION`` and recorded in the lab's
state file (``lab_upgrade_repo_dir``, ``lab_upgrade_repo_remote_src``,
``lab_upgrade_image_archives``), which inventory/lab/group_vars/all.yml hands to role
``upgrade`` as ``upgrade_local_repo_dir``, ``upgrade_local_repo_remote_src`` and
``upgrade_image_archives``.

The plan itself is the upgrade role's (module ``upgrade_plan``); nothing here judges it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any


class PrepareError(ValueError):
    """A release the lab cannot prepare (not pinned in gpufleet/build/releases.yaml)."""


def _minor(version: str) -> tuple[int, int]:
    major, minor = version.removeprefix("v").split(".")[:2]
    return int(major), int(minor)


def releases_to_prepare(
    running: str, target: str, via: Sequence[str], pinned: Sequence[str]
) -> list[str]:
    """The releases an upgrade from ``running`` (``1.35.4``) to ``target`` passes through,
    one per minor after ``running``'s up to ``target``'s: ``target`` for its own minor, a
    release of ``via`` for its minor, else the one ``pinned`` (gpufleet/build/releases.yaml)
    holds; the path role ``upgrade`` plans. A patch upgrade within a minor is ``[target]``.
    Raises PrepareError naming a release that is not pinned or a minor no release is pinned
    for (the lab builds packages and images of pinned releases only)."""
    steps: list[str] = []
    chosen = {_minor(v): v for v in [*pinned, *via]}
    for minor in range(_minor(running)[1] + 1, _minor(target)[1]):
        step = chosen.get((_minor(target)[0], minor))
        if step is None:
            raise PrepareError(
                f"no release of minor 1.{minor} is pinned in gpufleet/build/releases.yaml"
            )
        steps.append(step)
    steps.append(target)
    missing = [v for v in steps if v not in pinned]
    if missing:
        raise PrepareError(
            f"{', '.join(missing)} not pinned in gpufleet/build/releases.yaml: the lab builds "
            f"packages and images of pinned releases only; pin it under kubernetes.releases "
            f"there or use one of {', '.join(pinned)}"
        )
    return steps


def _node_path(var: Mapping[str, Any]) -> Callable[[Path], str]:
    """Paths as the lab's nodes see them: the cache is mounted at ``NODE_CACHE`` there when
    ``kubeadm_binaries_remote_src`` is set; else the path on this machine."""
    from gpufleet.build import binaries
    from gpufleet.lab.cluster import NODE_CACHE

    host_cache = str(binaries.cache_root())
    in_node = bool(var.get("kubeadm_binaries_remote_src"))

    def node_path(path: Path) -> str:
        text = str(path)
        if in_node and text.startswith(host_cache):
            return NODE_CACHE + text[len(host_cache) :]
        return text

    return node_path


def lab_upgrade_vars(
    running: Iterable[str],
    steps: Sequence[str],
    var: Mapping[str, Any] | None,
    log: Callable[[str], Any] = print,
) -> dict[str, dict[str, Any]]:
    """On the lab (``var``: the lab's state variables, with ``lab_kubeconfig``): per
    release of ``steps``, the extra
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


def prepare_upgrade(
    state_vars: Mapping[str, Any],
    target: str,
    via: Sequence[str],
    pinned: Sequence[str],
    log: Callable[[str], Any] = print,
) -> dict[str, Any]:
    """Build what an upgrade of the lab to ``target`` needs (:func:`releases_to_prepare`
    from the release the lab was brought up with, ``kubeadm_kubernetes_version``, and every
    release prepared before) and return the state variables that name it:
    ``lab_upgrade_repo_dir``, ``lab_upgrade_repo_remote_src`` and
    ``lab_upgrade_image_archives`` (release -> ``[{ref, path}]``, those prepared before
    kept). Raises PrepareError, or ``gpufleet.lab.packages.PackageError`` when a release is
    not built."""
    bootstrap = str(state_vars.get("kubeadm_kubernetes_version") or "")
    archives = dict(state_vars.get("lab_upgrade_image_archives") or {})
    running = sorted({v for v in (bootstrap, *archives) if v}, key=_minor)
    if not running:
        raise PrepareError("the lab's state names no release (kubeadm_kubernetes_version)")
    steps = releases_to_prepare(running[-1], target, via, pinned)
    per_step = lab_upgrade_vars(running, steps, dict(state_vars), log)
    for version, values in per_step.items():
        archives[version] = values["upgrade_image_archives"]
    last = per_step[steps[-1]]
    return {
        "lab_upgrade_repo_dir": last["upgrade_local_repo_dir"],
        "lab_upgrade_repo_remote_src": last["upgrade_local_repo_remote_src"],
        "lab_upgrade_image_archives": archives,
    }
