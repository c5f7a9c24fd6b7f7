"""Reading the cluster for the commands that list it (``report``, ``mig advise``,
``mig apply --proposal``): one listing, or one line and exit 2."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NoReturn

import click
from ansible_collections.gpufleet.cluster.plugins.module_utils.cluster import (
    listing as cluster_listing,
)
from ansible_collections.gpufleet.cluster.plugins.module_utils.dra import resource_versions
from ansible_collections.gpufleet.cluster.plugins.module_utils.kube import client as vk
from ansible_collections.gpufleet.cluster.plugins.module_utils.report import fleet as fr
from rich.console import Console
from rich.markup import escape

from gpufleet.exit import EXIT_CANNOT_RUN, exit_with

#: The kinds the report reads; a failure to list any of them stops it (exit 2).
KINDS = ("nodes", "pods", "resourceslices", "resourceclaims")


def readable_kinds(kinds: tuple[str, ...]) -> dict[str, Callable[[Any], bool]]:
    """Kind -> the report's judgement of its objects (``report.fleet.readable``), for the
    listing to judge each page as it decodes it: the report, ``mig advise`` and ``mig
    apply`` then read the stored pages without judging them again."""
    return {kind: fr.readable(kind) for kind in kinds if kind in fr.OBJECT_SHAPES}


def _fail(message: str) -> NoReturn:
    Console(stderr=True).print(f"[red]error:[/red] {escape(message)}")
    exit_with(EXIT_CANNOT_RUN)


def check_kubeconfig(kubeconfig: str | None) -> None:
    """Refuse (click.BadParameter, exit 2) a ``--kubeconfig`` that cannot be loaded."""
    if kubeconfig:
        try:
            vk.check_kubeconfig(kubeconfig)
        except vk.KubeError as exc:
            raise click.BadParameter(exc.message, param_hint="'--kubeconfig'") from None


def read_cluster(
    kubeconfig: str | None, context: str | None, optional: tuple[str, ...] = ()
) -> tuple[vk.Kube, Any]:
    """The listing of ``KINDS`` and the ``optional`` kinds (``cluster.listing.Listing``;
    an optional kind that cannot be listed is left in ``errors``); exits 2 with one line
    when the kubeconfig cannot be loaded, the API server does not answer, resource.k8s.io
    is not served or a kind of ``KINDS`` cannot be listed."""
    try:
        kube = vk.Kube(kubeconfig, context)
        listing = cluster_listing.list_cluster(
            kube, kinds=KINDS + optional, keep=readable_kinds(KINDS + optional)
        )
    except vk.KubeError as err:
        _fail(err.message if err.status is None else f"{err.status}: {err.message}")
    if not listing.resource_version:
        _fail(
            f"the cluster {kube.server} serves no resource.k8s.io version this command reads "
            f"({', '.join(resource_versions.OBJECT_RESOURCE_VERSIONS)}); "
            "fix: enable DRA (gpufleet gates plan)"
        )
    failed = {k: v for k, v in listing.errors.items() if k in KINDS}
    if failed:
        _fail(
            "cannot list "
            + "; ".join(f"{k}: {v}" for k, v in failed.items())
            + "; fix: use a kubeconfig allowed to list nodes, pods, resourceslices and "
            "resourceclaims in all namespaces"
        )
    return kube, listing
