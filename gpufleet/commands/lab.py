"""``gpufleet lab up|down|status``: the local lab cluster with simulated GPUs."""

from __future__ import annotations

import json

import click
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from gpufleet.exit import EXIT_CANNOT_RUN, EXIT_FAILED, exit_with, status_of


def _default_release() -> str:
    from gpufleet.build import release_pins

    try:
        return release_pins.load_releases().default
    except Exception as err:  # the help text must render even with a bad releases file
        return f"unreadable: {err}"


class _ReleaseOption(click.Option):
    """``--kubernetes-version``, whose help names the default pinned release: read when the
    help is shown, so that registering the command reads no releases file."""

    def get_help_record(self, ctx: click.Context) -> tuple[str, str] | None:
        self.help = (
            "A release pinned in gpufleet/build/releases.yaml (default: its default release, "
            f"{_default_release()})."
        )
        return super().get_help_record(ctx)


HEADERS = [
    "node", "role", "address", "container", "status", "kubelet", "GPU (simulator)", "GPU path"
]  # fmt: skip


def _table(st: dict) -> Table:
    from gpufleet.lab import cluster

    table = Table(title=f"gpufleet lab (Kubernetes {st.get('kubernetes_version', '?')})")
    for h in HEADERS:
        table.add_column(h)
    for row in cluster.summary_rows(st):
        table.add_row(*row)
    return table


@click.group("lab")
def lab() -> None:
    """The local lab: a real kubeadm cluster on podman nodes whose GPUs are simulated."""
    from gpufleet.lab import cluster

    try:  # the environment that names the lab, judged before any command touches podman
        cluster.lab_name()
        cluster.lab_subnet()
    except cluster.LabError as e:
        Console(stderr=True).print(f"[red]error:[/red] {escape(str(e))}", highlight=False)
        exit_with(EXIT_CANNOT_RUN)


@lab.command("up")
@click.option(
    "--kubernetes-version",
    cls=_ReleaseOption,
    default="",
)
@click.option("--workers", default=2, show_default=True, type=int, help="GPU worker nodes.")
@click.option(
    "--gpu-model", default="NVIDIA H200", show_default=True, help="Simulated GPU model (NVML name)."
)
@click.option(
    "--gpus-per-node", default=1, show_default=True, type=int, help="Simulated GPUs per worker."
)
@click.option(
    "--device-plugin-workers",
    default=0,
    show_default=True,
    type=int,
    help="How many of the GPU workers (the last ones) form a pool on NVIDIA's device plugin "
    "path (the simulator stands in for the plugin); the others are on DRA.",
)
@click.option(
    "--dynamic-mig",
    is_flag=True,
    help="The simulator's DRA plugin publishes partitionable devices as NVIDIA's DynamicMIG "
    "gate does and creates each MIG device when a claim is prepared (releases with "
    "DRAPartitionableDevices on by default).",
)
def up(
    kubernetes_version: str,
    workers: int,
    gpu_model: str,
    gpus_per_node: int,
    device_plugin_workers: int,
    dynamic_mig: bool,
) -> None:
    """Build (once, cached) and start the lab; ends when every node is Ready.

    Exit status: 0 the lab is up, 1 it could not be brought up, 2 bad options.
    """
    from gpufleet.lab import cluster

    console = Console(stderr=True)
    spec = cluster.LabSpec(
        kubernetes_version, workers, gpu_model, gpus_per_node, device_plugin_workers, dynamic_mig
    )
    try:
        spec = spec.validated()
    except cluster.LabError as e:
        console.print(f"[red]error:[/red] {escape(str(e))}")
        exit_with(EXIT_CANNOT_RUN)
    try:
        state = cluster.up(spec, log=lambda m: console.print(f"[dim]{m}[/dim]"))
        st = cluster.wait_ready()
    except cluster.LabError as e:
        console.print(f"[red]error:[/red] {escape(str(e))}")
        exit_with(EXIT_FAILED)
    Console().print(_table(st))
    console.print(
        "times: "
        + ", ".join(f"{k} {v}" for k, v in state.timings.items())
        + f"\nkubeconfig: {cluster.kubeconfig_path()}\ninventory: {cluster.INVENTORY}"
    )


@lab.command("down")
def down() -> None:
    """Remove the lab: containers, volumes, network, state. Exit 1 if anything is left."""
    from gpufleet.lab import cluster

    console = Console(stderr=True)
    try:
        left = cluster.down(log=lambda m: console.print(f"[dim]{m}[/dim]"))
    except cluster.LabError as e:
        console.print(f"[red]error:[/red] {escape(str(e))}")
        exit_with(EXIT_CANNOT_RUN)
    rest = {k: v for k, v in left.items() if v}
    if rest:
        console.print(f"[red]left behind:[/red] {json.dumps(rest)}")
        exit_with(EXIT_FAILED)
    console.print("lab removed; nothing left behind")


@lab.command("status")
@click.option("--json", "as_json", is_flag=True, help="Print the status as JSON.")
def status(as_json: bool) -> None:
    """Nodes, versions and readiness. Exit 0 when every node is Ready, 1 otherwise."""
    from gpufleet.lab import cluster

    try:
        st = cluster.status()
    except cluster.LabError as e:
        Console(stderr=True).print(f"[red]error:[/red] {escape(str(e))}")
        exit_with(EXIT_CANNOT_RUN)
    if as_json:
        click.echo(json.dumps(st, indent=2))
    elif not st["exists"]:
        click.echo("no lab: run `gpufleet lab up`")
    else:
        Console().print(_table(st))
    exit_with(status_of(not st.get("ready")))


@lab.command("prepare-upgrade")
@click.option("--to", "to_version", required=True, metavar="VERSION", help="Target release.")
@click.option(
    "--via",
    multiple=True,
    metavar="VERSION",
    help="Release to pass through for a minor between the lab's and --to (repeat; default: "
    "the one gpufleet/build/releases.yaml pins).",
)
def prepare_upgrade(to_version: str, via: tuple[str, ...]) -> None:
    """Build the package repository and control-plane images an upgrade of the lab to --to
    needs (the lab is air-gapped) and record them in the lab's state, where inventory/lab
    hands them to `gpufleet upgrade -i inventory/lab`. Exit 0 built, 2 it cannot (no lab,
    a release not pinned, a build failed)."""
    from gpufleet.build import release_pins
    from gpufleet.lab import cluster, upgrade

    console = Console(stderr=True)
    try:
        state = cluster.load_state()
        if state is None:
            raise cluster.LabError(
                f"lab {cluster.lab_name()!r} does not exist; fix: `gpufleet lab up`"
            )
        pinned = [r.version for r in release_pins.load_releases().releases]
        values = upgrade.prepare_upgrade(
            state.get("vars") or {}, to_version, via, pinned, lambda m: console.print(f"  {m}")
        )
        path = cluster.update_state_vars(values)
    # LabError, PackageError and an image that cannot be built are RuntimeErrors;
    # PrepareError and ReleaseFileError ValueErrors; a missing binary an OSError
    except (RuntimeError, ValueError, OSError) as e:
        console.print(f"[red]error:[/red] {escape(str(e))}")
        exit_with(EXIT_CANNOT_RUN)
    releases = ", ".join(sorted(values["lab_upgrade_image_archives"]))
    console.print(f"prepared {releases}: {values['lab_upgrade_repo_dir']} (recorded in {path})")
