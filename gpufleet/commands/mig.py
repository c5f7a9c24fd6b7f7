"""``gpufleet mig``: MIG layouts.

``gpufleet mig plan (--gpu-model MODEL | --lgip FILE [--lgipp FILE]) --layout
JSON_OR_@FILE [--config-name NAME] [--gpus N] [--json]`` answers offline from the MIG profile data
(``plugins/module_utils/mig/profiles.py``) and the planner
(``plugins/module_utils/mig/planner.py``, configs read by ``mig/config.py``): the
GPU-instance placements (profile, GI profile ID, start:size in memory slices) for each
GPU, or why the layout does not fit and what would.

``--lgip FILE [--lgipp FILE] [--gpu-index N]`` plans on what the node itself reports
(the output of ``nvidia-smi mig -lgip`` and ``-lgipp``) instead of a built-in table: for a
GPU the tables lack (``--gpu-model`` is then only the name shown), or to check a table.
Facts of a built-in table that no cited source states are listed with the plan
(``derived``; see ``mig.tables``).

``--layout`` is a JSON object of profile -> count (``'{"1g.18gb": 7}'``), or a file
(``@path`` or a path): a JSON/YAML layout object, or a mig-parted config
(``version: v1`` / ``mig-configs``) of which ``--config-name`` picks one config.

Exit codes: 0 every GPU's layout fits; 1 a layout does not fit (the reason and the fix go
to stderr); 2 bad input (unknown GPU model or profile, a profile the GPU lacks even with
count 0, invalid JSON/YAML, an invalid mig-parted config, a missing file).

With ``--json`` every outcome is one JSON document on stdout, bad input included:
``{"fits": false, "exit_code": 2, "error": {"kind": "bad-input", "option": "--layout",
"message": ...}}`` (the message also goes to stderr). In file mode, GPUs that no entry of
the config applies to are listed (``unmatched``: index and why; mig-parted leaves them as
they are) rather than left out.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import click
from ansible_collections.gpufleet.cluster.plugins.module_utils.common import limits as ig
from ansible_collections.gpufleet.cluster.plugins.module_utils.mig import config as mcfg
from ansible_collections.gpufleet.cluster.plugins.module_utils.mig import placement as mpla
from ansible_collections.gpufleet.cluster.plugins.module_utils.mig import planner as mpl
from ansible_collections.gpufleet.cluster.plugins.module_utils.mig import profiles as mpr
from rich.console import Console
from rich.table import Table

from gpufleet.commands._options import LAYOUT_EXAMPLE, path_exists, shown
from gpufleet.exit import EXIT_FAILED, exit_with


class _JsonErrorsCommand(click.Command):
    """A command whose usage and input errors become a JSON document on stdout when
    ``--json`` is among its arguments (exit code 2 as without ``--json``)."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        ctx.meta["gpufleet_json"] = "--json" in args
        try:
            return super().parse_args(ctx, args)
        except click.UsageError as exc:
            _json_error_exit(ctx, exc)
            raise

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except click.UsageError as exc:
            _json_error_exit(ctx, exc)
            raise


def _json_error_exit(ctx: click.Context, exc: click.UsageError) -> None:
    """With ``--json``: print the error as JSON on stdout (and as text on stderr), exit 2."""
    if not ctx.meta.get("gpufleet_json"):
        return
    option = None
    if isinstance(exc, click.BadParameter):
        hint = exc.param_hint or (exc.param.opts[0] if exc.param is not None else None)
        if isinstance(hint, (list, tuple)):
            hint = hint[0] if hint else None
        option = str(hint).strip("'\"") if hint else None
    doc = {
        "fits": False,
        "exit_code": exc.exit_code,
        "error": {"kind": "bad-input", "option": option, "message": exc.format_message()},
    }
    click.echo(json.dumps(doc, indent=2, sort_keys=True))
    click.echo(f"Error: {exc.format_message()}", err=True)
    ctx.exit(exc.exit_code)


@click.group("mig")
def mig() -> None:
    """MIG layouts: plan GPU-instance placements per GPU model (offline), propose
    re-carving for pending claims (advise), apply them to the GPU nodes of an inventory."""


def _resolve_model(
    name: str | None, lgip: str | None, lgipp: str | None, gpu_index: int | None
) -> mpr.GpuModel:
    """The GPU model to plan on: parsed from the node's ``nvidia-smi mig -lgip`` (and
    ``-lgipp``) captures when given, else the built-in table of ``name``. Raises
    ``click.BadParameter`` (exit 2) for an unknown name, a missing or unreadable file and
    a capture that does not parse."""
    if lgip is None:
        if lgipp is not None:
            raise click.BadParameter(
                "--lgipp gives placements only; pass the profiles too with --lgip FILE "
                "(the output of 'nvidia-smi mig -lgip')",
                param_hint="'--lgipp'",
            )
        if not name:
            raise click.BadParameter(
                "give --gpu-model NAME (a built-in table) or --lgip FILE [--lgipp FILE] "
                "(the node's 'nvidia-smi mig -lgip' and '-lgipp' output)",
                param_hint="'--gpu-model'",
            )
        try:
            return mpr.model(name)
        except mpr.UnknownGpuModel as exc:
            raise click.BadParameter(
                f"{exc}; pass one of them as --gpu-model, or plan from the node's answer "
                "with --lgip FILE --lgipp FILE",
                param_hint="'--gpu-model'",
            ) from None
    texts = {}
    for option, path in (("--lgip", lgip), ("--lgipp", lgipp)):
        if path is None:
            continue
        try:
            texts[option] = ig.read_text(Path(path), f"{option} file {path}") or ""
        except ig.InputError as exc:
            raise click.BadParameter(str(exc), param_hint=f"'{option}'") from None
    known = None
    if name:
        try:
            known = mpr.model(name)
        except mpr.UnknownGpuModel:
            known = None
    label = known.name if known else (name or "GPU from nvidia-smi mig -lgip")
    try:
        return mpr.model_from_nvidia_smi(
            label,
            known.memory_mib if known else 0,
            texts["--lgip"],
            texts.get("--lgipp"),
            gpu_index,
        )
    except mpr.LgipParseError as exc:
        hint = "'--lgipp'" if "-lgipp" in str(exc) else "'--lgip'"
        raise click.BadParameter(
            f"{exc}; give the unedited output of 'nvidia-smi mig -lgip' (and '-lgipp')",
            param_hint=hint,
        ) from None


def _read_layout_source(value: str) -> tuple[str, Any]:
    """Return (what, data): a JSON layout given inline, or the parsed content of a file
    (at most ``common.limits.MAX_TEXT_BYTES``, UTF-8, nested at most ``MAX_DEPTH`` levels)."""
    text = value.strip()
    if text.startswith("@") or not text.startswith("{"):
        path = Path(text[1:] if text.startswith("@") else text)
        if not path_exists(path):
            raise click.BadParameter(
                f"{shown(value)} is neither a JSON object nor a readable file; write a layout as "
                "'{\"1g.18gb\": 7}' or give a mig-parted config file as @path",
                param_hint="'--layout'",
            )
        what = f"file {path}"
        try:
            return what, ig.load_yaml(ig.read_text(path, what) or "", what)
        except ig.InputError as exc:
            raise click.BadParameter(str(exc), param_hint="'--layout'") from None
    try:
        return "JSON", ig.load_json(text, f"--layout {shown(text)}", LAYOUT_EXAMPLE)
    except ig.InputError as exc:
        raise click.BadParameter(str(exc), param_hint="'--layout'") from None


def _wanted_per_gpu(
    model: mpr.GpuModel, layout: str, config_name: str | None, gpus: int | None
) -> tuple[str | None, dict[int, dict[str, int] | None], dict[int, str]]:
    """(config name, GPU index -> wanted layout (None: MIG disabled by the config), GPU
    index -> why no entry of the config applies to it). Zero counts stay in the layouts:
    the planner refuses a profile the GPU lacks whatever its count."""
    what, data = _read_layout_source(layout)
    if isinstance(data, dict) and ("mig-configs" in data or "version" in data):
        try:
            config = mcfg.load_mig_config(data)
        except mcfg.MigConfigError as exc:
            raise click.BadParameter(f"{what}: {exc}", param_hint="'--layout'") from None
        if config_name is None:
            if len(config.names) != 1:
                raise click.BadParameter(
                    f"{what} holds {len(config.names)} configs; choose one with --config-name: "
                    + ", ".join(config.names),
                    param_hint="'--config-name'",
                )
            config_name = config.names[0]
        listed = [
            i for e in config.configs.get(config_name, ()) if e.devices != "all" for i in e.devices
        ]
        count = gpus if gpus is not None else (max(listed) + 1 if listed else 1)
        device_id = model.pci_device_ids[0] if model.pci_device_ids else None
        try:
            entries = mcfg.select_entries(config, config_name, range(count), device_id)
        except mcfg.MigConfigError as exc:
            hint = "'--config-name'" if exc.key == "config name" else "'--layout'"
            raise click.BadParameter(f"{what}: {exc}", param_hint=hint) from None
        out: dict[int, dict[str, int] | None] = {}
        for gpu, entry in sorted(entries.items()):
            out[gpu] = dict(entry.mig_devices) if entry.mig_enabled else None
        unmatched = {
            gpu: _why_unmatched(config.configs[config_name], config_name, gpu, model)
            for gpu in range(count)
            if gpu not in entries
        }
        return config_name, out, unmatched
    if config_name is not None:
        raise click.BadParameter(
            f"--config-name {config_name!r} needs a mig-parted config file as --layout; "
            f"got a plain layout ({what})",
            param_hint="'--config-name'",
        )
    try:
        wanted = mpl.parse_layout(data, name="--layout")
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="'--layout'") from None
    return None, {gpu: wanted for gpu in range(gpus or 1)}, {}


def _why_unmatched(
    entries: tuple[mcfg.MigConfigEntry, ...], config_name: str, gpu: int, model: mpr.GpuModel
) -> str:
    """Why no entry of ``config_name`` applies to GPU ``gpu`` (a sentence)."""
    device_id = model.pci_device_ids[0] if model.pci_device_ids else "unknown"
    reasons = []
    for i, entry in enumerate(entries):
        if entry.devices != "all" and gpu not in entry.devices:
            reasons.append(f"[{i}] lists devices {list(entry.devices)}")
        else:
            reasons.append(f"[{i}] has device-filter {', '.join(entry.device_filter)}")
    return (
        f"no entry of {config_name} applies to GPU {gpu} ({model.name}, PCI device ID "
        f"{device_id}): " + "; ".join(reasons) + "; mig-parted leaves this GPU as it is"
    )


def _derived(model: mpr.GpuModel, plan: mpla.Plan) -> dict[str, list[str]]:
    """Profile -> its fields that no cited source states, for the profiles of ``plan``."""
    out: dict[str, list[str]] = {}
    for p in plan.placements:
        prof = model.profile(p.profile_id)
        if prof.derived:
            out[prof.name] = list(prof.derived)
    return out


def _slices_bar(total: int, start: int, size: int) -> str:
    return "".join("■" if start <= i < start + size else "·" for i in range(total))


def _print_plan(console: Console, model: mpr.GpuModel, gpu: int, plan: mpla.Plan) -> None:
    table = Table(
        title=f"GPU {gpu}: {model.name}, {model.total_slices} memory slices",
        title_justify="left",
        caption="ID: GI profile ID (nvidia-smi mig -cgi); CI ID: full compute instance "
        "profile ID; slices: memory slices taken",
        caption_justify="left",
    )
    table.add_column("GI", justify="right")
    table.add_column("profile", no_wrap=True)
    table.add_column("ID", justify="right")
    table.add_column("start:size", no_wrap=True)
    table.add_column("slices", no_wrap=True)
    table.add_column("GiB", justify="right")
    table.add_column("SMs", justify="right")
    table.add_column("CI ID", justify="right")
    for n, p in enumerate(plan.placements):
        prof = model.profile(p.profile_id)
        table.add_row(
            str(n),
            p.profile,
            str(p.profile_id),
            f"{p.start}:{p.size}",
            _slices_bar(model.total_slices, p.start, p.size),
            f"{prof.memory_mib / 1024:.2f}",
            str(prof.multiprocessors),
            str(prof.ci_profile_id),
        )
    console.print(table)
    derived = _derived(model, plan)
    if derived:
        console.print(
            "not in a cited source, derived (see mig_tables; the node's -lgip/-lgipp win): "
            + "; ".join(f"{name}: {', '.join(fields)}" for name, fields in derived.items())
        )
    n = len(plan.free_slots)
    free = ", ".join(str(s) for s in plan.free_slots)
    console.print(
        f"free memory slices: {n} (index {free})"
        if n == 1
        else f"free memory slices: {n} (indexes {free})"
        if n
        else "free memory slices: none"
    )


@mig.command("plan", cls=_JsonErrorsCommand)
@click.option(
    "--gpu-model",
    "gpu_model_name",
    default=None,
    metavar="MODEL",
    help="NVML name (e.g. 'NVIDIA H200', 'NVIDIA A100-SXM4-40GB') or short name (h200, a30); "
    "with --lgip only the name shown.",
)
@click.option(
    "--lgip",
    default=None,
    metavar="FILE",
    help="The node's 'nvidia-smi mig -lgip' output: plan on the profiles it lists (for a GPU "
    "the tables lack, or to check them).",
)
@click.option(
    "--lgipp",
    default=None,
    metavar="FILE",
    help="The node's 'nvidia-smi mig -lgipp' output: the placements of those profiles.",
)
@click.option(
    "--gpu-index",
    type=click.IntRange(min=0),
    default=None,
    metavar="N",
    help="Which GPU's rows of --lgip/--lgipp to use (default: the lowest index).",
)
@click.option(
    "--layout",
    required=True,
    metavar="JSON_OR_@FILE",
    help="Profile counts as JSON ('{\"1g.18gb\": 7}') or a layout / mig-parted config file.",
)
@click.option(
    "--config-name",
    default=None,
    metavar="NAME",
    help="The config of a mig-parted file to plan (needed when it holds several).",
)
@click.option(
    "--gpus",
    type=click.IntRange(min=1, max=64),
    default=None,
    metavar="N",
    help="GPUs on the node for 'devices: all' (default: 1, or the highest listed index + 1).",
)
@click.option("--json", "as_json", is_flag=True, help="Print stable JSON instead of tables.")
def plan(
    gpu_model_name: str | None,
    lgip: str | None,
    lgipp: str | None,
    gpu_index: int | None,
    layout: str,
    config_name: str | None,
    gpus: int | None,
    as_json: bool,
) -> None:
    """Place the MIG GPU instances of a layout; exit 1 with the reason if it does not fit."""
    gpu_model = _resolve_model(gpu_model_name, lgip, lgipp, gpu_index)
    config_name, per_gpu, unmatched = _wanted_per_gpu(gpu_model, layout, config_name, gpus)
    results: list[dict[str, Any]] = []
    plans: dict[int, mpla.Plan] = {}
    failures: dict[int, mpla.LayoutDoesNotFit] = {}
    for gpu, wanted in per_gpu.items():
        entry: dict[str, Any] = {"index": gpu, "mig_enabled": wanted is not None}
        if wanted is None:
            entry["fits"] = True
            results.append(entry)
            continue
        entry["wanted"] = wanted
        try:
            plans[gpu] = mpl.plan(gpu_model, wanted)
        except mpr.UnknownProfile as exc:
            raise click.BadParameter(
                f"{exc}; use those names in the layout", param_hint="'--layout'"
            ) from None
        except mpla.LayoutDoesNotFit as exc:
            failures[gpu] = exc
            entry.update(fits=False, error=exc.to_dict())
        else:
            entry.update(fits=True, **plans[gpu].to_dict())
            entry["derived"] = _derived(gpu_model, plans[gpu])
        results.append(entry)

    if as_json:
        doc = {
            "gpu_model": gpu_model.name,
            "model_source": gpu_model.source,
            "total_slices": gpu_model.total_slices,
            "config_name": config_name,
            "fits": not failures,
            "exit_code": 1 if failures else 0,
            "gpus": results,
            "unmatched": [{"index": g, "reason": why} for g, why in sorted(unmatched.items())],
        }
        click.echo(json.dumps(doc, indent=2, sort_keys=True))
    else:
        console = Console(soft_wrap=True)
        if config_name:
            console.print(f"mig-parted config: {config_name}")
        if not per_gpu:
            console.print(f"no entry of {config_name} applies to {gpu_model.name}")
        for gpu, why in sorted(unmatched.items()):
            console.print(f"GPU {gpu}: {why}")
        for gpu, wanted in per_gpu.items():
            if wanted is None:
                console.print(f"GPU {gpu}: MIG disabled")
            elif gpu in plans:
                _print_plan(console, gpu_model, gpu, plans[gpu])
    for gpu, exc in failures.items():
        click.echo(f"GPU {gpu}: {exc.reason}", err=True)
    if failures:
        exit_with(EXIT_FAILED)


def models_doc() -> list[dict[str, Any]]:
    """Every built-in GPU model as data: NVML name, layout key, PCI device IDs,
    architecture, memory slices, source and note, and per profile its GI profile ID,
    memory slices, MiB, SMs, max instances, placement starts and derived fields."""
    out = []
    for m in mpr.MODELS.values():
        out.append(
            {
                "name": m.name,
                "layout": m.layout,
                "pci_device_ids": list(m.pci_device_ids),
                "architecture": m.architecture,
                "compute_capability": m.compute_capability,
                "total_slices": m.total_slices,
                "source": m.source,
                "note": m.note,
                "profiles": [
                    {
                        "name": p.name,
                        "profile_id": p.profile_id,
                        "slices": p.slices,
                        "memory_mib": p.memory_mib,
                        "multiprocessors": p.multiprocessors,
                        "max_instances": p.max_instances,
                        "placements": list(p.placements),
                        "derived": list(p.derived),
                    }
                    for p in m.profiles
                ],
            }
        )
    return out


@mig.command("models")
@click.option("--json", "as_json", is_flag=True, help="Print stable JSON instead of tables.")
def models_command(as_json: bool) -> None:
    """List the built-in MIG tables: per GPU model its profiles, placements and sources."""
    doc = models_doc()
    if as_json:
        click.echo(json.dumps(doc, indent=2, sort_keys=True))
        return
    console = Console(soft_wrap=True)
    for m in doc:
        ids = ", ".join(m["pci_device_ids"]) or "not sourced"
        console.print(
            f"[bold]{m['name']}[/bold]  layout {m['layout']}, {m['total_slices']} memory "
            f"slices, PCI {ids}"
        )
        for p in m["profiles"]:
            starts = ",".join(str(s) for s in p["placements"])
            derived = f"  derived: {', '.join(p['derived'])}" if p["derived"] else ""
            console.print(
                f"  {p['name']:<16} ID {p['profile_id']:>3}  x{p['max_instances']}  "
                f"{{{starts}}}:{p['slices']}{derived}"
            )
        if not m["profiles"]:
            console.print("  no sourced profile table: plan with --lgip/--lgipp")
        console.print(f"  source: {m['source']}")
        console.print(f"  note: {m['note']}")
