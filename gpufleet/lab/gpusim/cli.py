"""``nvidia-smi`` of the GPU simulator: argv in, text and exit code out.

Messages and exit codes come from real output (``tests/unit/data/gpu/``); where a
message has no capture the comment at its use says which source it follows. Exit codes
follow the nvidia-smi manual page ("RETURN VALUE"), whose numbers are NVML's return
codes: 2 invalid argument, 3 not supported, 6 not found, 9 no driver, 19 in use,
23 insufficient resources, 255 other error (the captured ``--gpu-reset`` refusal).
Everything goes to stdout, as nvidia-smi does (a captured unknown-field error had an
empty stderr).
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from gpufleet.lab.gpusim import hardware, mig, render
from gpufleet.lab.gpusim.state import Gpu, State, StateError, load, state_path, transaction

RC_INVALID = 2
RC_NOT_SUPPORTED = 3
RC_NOT_FOUND = 6
RC_NO_DRIVER = 9
RC_IN_USE = 19
RC_INSUFFICIENT = 23
RC_OTHER = 255

_RC_BY_REASON = {
    "Invalid Argument": RC_INVALID,
    "Not Supported": RC_NOT_SUPPORTED,
    "Not Found": RC_NOT_FOUND,
    "In use by another client": RC_IN_USE,
    "Insufficient Resources": RC_INSUFFICIENT,
}

NO_DRIVER = (
    "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. "
    "Make sure that the latest NVIDIA driver is installed and running.\n"
)


class UsageError(Exception):
    """Bad command line; the message is what nvidia-smi prints."""


@dataclass
class Args:
    """Parsed nvidia-smi command line."""

    mig_sub: bool = False
    flags: set[str] = field(default_factory=set)
    ids: str | None = None
    query_gpu: str | None = None
    query_apps: str | None = None
    fmt: str | None = None
    mig_mode: str | None = None
    cgi: str | None = None
    cci: str | None = None
    gi: str | None = None
    ci: str | None = None


_SHORT = {
    "-L": "list",
    "--list-gpus": "list",
    "-q": "query",
    "--query": "query",
    "-x": "xml",
    "--xml-format": "xml",
    "-r": "reset",
    "--gpu-reset": "reset",
    "--version": "version",
    "-h": "help",
    "--help": "help",
    "-lgip": "lgip",
    "--list-gpu-instance-profiles": "lgip",
    "-lgipp": "lgipp",
    "--list-gpu-instance-possible-placements": "lgipp",
    "-lgi": "lgi",
    "--list-gpu-instances": "lgi",
    "-lci": "lci",
    "--list-compute-instances": "lci",
    "-lcip": "lcip",
    "--list-compute-instance-profiles": "lcip",
    "-C": "default_ci",
    "--default-compute-instance": "default_ci",
    "-dgi": "dgi",
    "--destroy-gpu-instance": "dgi",
    "-dci": "dci",
    "--destroy-compute-instance": "dci",
}

# option -> (Args attribute, value optional)
_VALUED = {
    "-i": ("ids", False),
    "--id": ("ids", False),
    "--query-gpu": ("query_gpu", False),
    "--query-compute-apps": ("query_apps", False),
    "--format": ("fmt", False),
    "-mig": ("mig_mode", False),
    "--multi-instance-gpu": ("mig_mode", False),
    "-cgi": ("cgi", False),
    "--create-gpu-instance": ("cgi", False),
    "-cci": ("cci", True),
    "--create-compute-instance": ("cci", True),
    "-gi": ("gi", False),
    "--gpu-instance-id": ("gi", False),
    "-ci": ("ci", False),
    "--compute-instance-id": ("ci", False),
}


def parse(argv: list[str]) -> Args:
    """Parse nvidia-smi argv (``-i 0``, ``--id=0``, ``--query-gpu=a,b``, ``mig -cgi 19``).

    Raises ``UsageError`` for an option nvidia-smi would not accept.
    """
    args = Args()
    i = 0
    if argv and argv[0] == "mig":
        args.mig_sub = True
        i = 1
    while i < len(argv):
        tok = argv[i]
        name, eq, inline = tok.partition("=")
        if tok in _SHORT:
            args.flags.add(_SHORT[tok])
        elif name in _VALUED:
            attr, optional = _VALUED[name]
            if eq:
                value = inline
            elif i + 1 < len(argv) and not (
                optional and argv[i + 1].startswith("-") and not argv[i + 1][1:].isdigit()
            ):
                i += 1
                value = argv[i]
            elif optional:
                value = ""
            else:
                raise UsageError(
                    f"ERROR: Option {tok} requires a value. Please run 'nvidia-smi -h'.\n"
                )
            setattr(args, attr, value)
        else:
            raise UsageError(
                f"ERROR: Option {tok} is not recognized. Please run 'nvidia-smi -h'.\n"
            )
        i += 1
    return args


def select(state: State, ids: str | None) -> list[Gpu]:
    """GPUs named by ``-i`` (indexes, UUIDs or PCI bus IDs, comma separated); all by default.

    Raises ``LookupError`` when one does not exist (nvidia-smi: "No devices were found").
    """
    if ids is None:
        return list(state.gpus)
    chosen: list[Gpu] = []
    for token in (t.strip() for t in ids.split(",") if t.strip()):
        # A bare number is an index only: "0" must not match every bus ID ending in 0.
        match = [
            g
            for g in state.gpus
            if (g.index == int(token) if token.isdigit() else (
                g.uuid.lower() == token.lower()
                or g.pci_bus_id.lower().endswith(token.lower())
            ))
        ]  # fmt: skip
        if not match:
            raise LookupError(token)
        chosen.extend(g for g in match if g not in chosen)
    return chosen


@dataclass
class Result:
    """What one invocation prints (stdout, stderr) and its exit code."""

    out: str
    rc: int = 0
    err: str = ""


def _help() -> Result:
    return Result(
        "NVIDIA System Management Interface -- gpufleet GPU simulator\n\n"
        "Supported: -L, -q [-x], --query-gpu=... --format=csv[,noheader][,nounits],\n"
        "--query-compute-apps=..., -i ID, -mig 0|1, -r, --version, and\n"
        "mig -lgip|-lgipp|-lgi|-lci|-lcip|-cgi ID[:START],... [-C]|-cci [IDS] -gi ID|-dci|-dgi\n"
    )


# --- read-only commands ---------------------------------------------------------------


def _readings(path: Path, state: State) -> hardware.Readings:
    return hardware.load_readings(path, [(g.index, g.uuid) for g in state.gpus])


def _mig_list(args: Args, gpus: list[Gpu]) -> Result:
    capable = [g for g in gpus if g.mig_capable]
    if args.flags & {"lgip", "lgipp"}:
        if not capable:
            # No capture: wording of the MIG-enabled case below, for MIG support.
            return Result("No MIG-supported devices found.\n")
        text = render.render_lgip(capable) if "lgip" in args.flags else render.render_lgipp(capable)
        return Result(text)
    enabled = [g for g in capable if g.mig_mode_current == "Enabled"]
    if not enabled:
        return Result("No MIG-enabled devices found.\n")  # smi-mig-lgi.txt, smi-mig-lci.txt
    if "lgi" in args.flags:
        if not any(g.gpu_instances for g in enabled):
            return Result("No GPU instances found: Not Found\n", RC_NOT_FOUND)
        return Result(render.render_lgi(enabled))
    gi_filter = _int_list(args.gi) if args.gi else None
    # -lci/-lcip list GIs in -lgi order (public/a100-pcie-40gb/lci-i0-4ci-truncated.txt).
    rows = [
        (g, gi)
        for g in enabled
        for gi in mig.ordered_gis(mig.gpu_model(g), g)
        if gi_filter is None or gi.id in gi_filter
    ]
    if "lcip" in args.flags:
        if not rows:
            return Result("No GPU instances found: Not Found\n", RC_NOT_FOUND)
        return Result(render.render_lcip(rows))
    rows = [(g, gi) for g, gi in rows if gi.compute_instances]
    if not rows:
        # public/a100-pcie-40gb/lci-gi12-not-found.txt
        return Result("No compute instances found: Not Found\n", RC_NOT_FOUND)
    return Result(render.render_lci(rows))


def _int_list(text: str) -> list[int]:
    try:
        return [int(t) for t in text.split(",") if t.strip()]
    except ValueError:
        raise UsageError(
            f"ERROR: Invalid ID list '{text}'. Please run 'nvidia-smi -h'.\n"
        ) from None


# --- state-changing commands ----------------------------------------------------------


def _cgi(args: Args, gpus: list[Gpu]) -> Result:
    """``mig -cgi`` (+``-C``): messages of ``nvdocs-cgi-*.txt`` and
    ``nvdocs-cgi-insufficient-resources.txt`` (the first failure stops the list)."""
    lines: list[str] = []
    for gpu in gpus:
        model = mig.gpu_model(gpu)
        for token in (t.strip() for t in (args.cgi or "").split(",") if t.strip()):
            try:
                name, start = _profile_tuple(token)
                profile = mig.resolve_profile(model, name)
                gi = mig.create_gi(gpu, profile, start)
            except mig.MigError as exc:
                lines.append(
                    f"Unable to create a GPU instance on GPU {gpu.index:>2} using profile "
                    f"{token}: {exc.reason}"
                )
                lines.append(f"Failed to create GPU instances: {exc.reason}")
                return Result(_join(lines), _RC_BY_REASON.get(exc.reason, RC_OTHER))
            lines.append(
                f"Successfully created GPU instance ID {gi.id:>2} on GPU {gpu.index:>2} "
                f"using profile MIG {profile.name} (ID {profile.profile_id:>2})"
            )
            if "default_ci" in args.flags:
                ci = mig.create_ci(gpu, gi, None)
                lines.append(_ci_created(gpu, gi, ci))
    return Result(_join(lines))


def _profile_tuple(token: str) -> tuple[str, int | None]:
    """A ``-cgi`` profile tuple: a profile name or ID and an optional placement
    specifier, a colon and the placement start index (nvidia-smi ``mig -h``:
    ``19:3``, ``1g.18gb:3``). Raises ``MigError("Invalid Argument")`` for a start that is
    not a number."""
    name, colon, start = token.partition(":")
    if not colon:
        return name, None
    if not start.strip().isdigit():
        raise mig.MigError("Invalid Argument")
    return name, int(start)


def _ci_created(gpu: Gpu, gi: mig.GpuInstance, ci: mig.ComputeInstance) -> str:
    # public/a100-pcie-40gb/cci-gi11.txt, nvdocs-cgi-9-3g20gb-C.txt
    return (
        f"Successfully created compute instance ID {ci.id:>2} on GPU {gpu.index:>2} "
        f"GPU instance ID {gi.id:>2} using profile MIG {ci.profile} (ID {ci.profile_id:>2})"
    )


def _target_gis(args: Args, gpu: Gpu) -> list[mig.GpuInstance]:
    gis = sorted(gpu.gpu_instances, key=lambda g: g.id)
    if args.gi:
        wanted = _int_list(args.gi)
        found = [g for g in gis if g.id in wanted]
        if len(found) != len(set(wanted)):
            raise mig.MigError("Not Found")
        return found
    return gis


def _cci(args: Args, gpus: list[Gpu]) -> Result:
    """``mig -cci [ids] [-gi N]``; no ids means the default (full-size) CI profile."""
    lines: list[str] = []
    tokens = [t.strip() for t in (args.cci or "").split(",") if t.strip()] or [""]
    for gpu in gpus:
        try:
            gis = _target_gis(args, gpu)
        except mig.MigError as exc:
            lines.append(f"Unable to find GPU instance ID {args.gi}: {exc.reason}")
            return Result(_join(lines), RC_NOT_FOUND)
        for gi in gis:
            for token in tokens:
                try:
                    if token and not token.isdigit():
                        raise mig.MigError("Invalid Argument")
                    ci = mig.create_ci(gpu, gi, int(token) if token else None)
                except mig.MigError as exc:
                    # No capture: wording parallel to the -cgi failure lines.
                    lines.append(
                        f"Unable to create a compute instance on GPU {gpu.index:>2} GPU "
                        f"instance ID {gi.id:>2} using profile {token or 'default'}: {exc.reason}"
                    )
                    lines.append(f"Failed to create compute instances: {exc.reason}")
                    return Result(_join(lines), _RC_BY_REASON.get(exc.reason, RC_OTHER))
                lines.append(_ci_created(gpu, gi, ci))
    if not lines:
        return Result("No GPU instances found: Not Found\n", RC_NOT_FOUND)
    return Result(_join(lines))


def _dci(args: Args, gpus: list[Gpu]) -> Result:
    """``mig -dci [-ci ..] [-gi ..]``: messages of ``nvdocs-dci.txt`` and
    ``public/h100-80gb/dci-in-use.txt`` (capitalised as nvidia-smi prints them)."""
    lines: list[str] = []
    wanted = _int_list(args.ci) if args.ci else None
    for gpu in gpus:
        try:
            gis = _target_gis(args, gpu)
        except mig.MigError:
            return Result("No compute instances found: Not Found\n", RC_NOT_FOUND)
        for gi in gis:
            ids = sorted(c.id for c in gi.compute_instances)
            targets = ids if wanted is None else wanted
            for ci_id in targets:
                try:
                    mig.destroy_ci(gpu, gi, ci_id)
                except mig.MigError as exc:
                    if exc.reason == "Not Found" and wanted is None:
                        continue
                    lines.append(
                        f"Unable to destroy compute instance ID {ci_id:>2} from GPU "
                        f"{gpu.index:>2} GPU instance ID {gi.id:>2}: {exc.reason}"
                    )
                    lines.append(f"Failed to destroy compute instances: {exc.reason}")
                    return Result(_join(lines), _RC_BY_REASON.get(exc.reason, RC_OTHER))
                lines.append(
                    f"Successfully destroyed compute instance ID {ci_id:>2} from GPU "
                    f"{gpu.index:>2} GPU instance ID {gi.id:>2}"
                )
    if not lines:
        return Result("No compute instances found: Not Found\n", RC_NOT_FOUND)
    return Result(_join(lines))


def _dgi(args: Args, gpus: list[Gpu]) -> Result:
    """``mig -dgi [-gi ..]``: ``nvdocs-dgi.txt``; a GI that still has CIs is refused
    "In use by another client" (NVML ``nvmlGpuInstanceDestroy``), worded as the
    captured ``-dci`` refusal."""
    lines: list[str] = []
    wanted = _int_list(args.gi) if args.gi else None
    for gpu in gpus:
        ids = sorted(g.id for g in gpu.gpu_instances) if wanted is None else wanted
        for gi_id in ids:
            try:
                mig.destroy_gi(gpu, gi_id)
            except mig.MigError as exc:
                lines.append(
                    f"Unable to destroy GPU instance ID {gi_id:>2} from GPU {gpu.index:>2}: "
                    f"{exc.reason}"
                )
                lines.append(f"Failed to destroy GPU instances: {exc.reason}")
                return Result(_join(lines), _RC_BY_REASON.get(exc.reason, RC_OTHER))
            lines.append(
                f"Successfully destroyed GPU instance ID {gi_id:>2} from GPU {gpu.index:>2}"
            )
    if not lines:
        return Result("No GPU instances found: Not Found\n", RC_NOT_FOUND)
    return Result(_join(lines))


def _mig_mode(value: str, gpus: list[Gpu]) -> Result:
    """``-mig 0|1``.

    Success: ``nvdocs-mig-enable.txt``. Pending while a process holds the GPU (or, for
    disable, while MIG instances exist): the warning of ``a100-variant-unknown/
    mig-enable-pending-in-use.txt`` completed from NVIDIA/gpu-operator#118. Not MIG
    capable: NVML "Not Supported" with nvidia-smi's "Treating as warning" tail (as its
    other per-GPU settings print it). Without a process the change applies at once: the
    command resets the GPU itself (NVIDIA MIG user guide, "Enable MIG Mode").
    """
    if value not in ("0", "1", "ENABLED", "DISABLED", "Enabled", "Disabled"):
        raise UsageError(f"ERROR: Invalid value '{value}' for -mig. Please run 'nvidia-smi -h'.\n")
    enable = value in ("1", "ENABLED", "Enabled")
    mode = "Enabled" if enable else "Disabled"
    verb = "enable" if enable else "disable"
    lines: list[str] = []
    rc = 0
    for gpu in gpus:
        bus = gpu.pci_bus_id
        if not gpu.mig_capable:
            lines.append(f"Unable to {verb} MIG Mode for GPU {bus}: Not Supported")
            lines.append("Treating as warning and moving on.")
            rc = RC_NOT_SUPPORTED
            continue
        busy = gpu.in_use or (not enable and bool(gpu.gpu_instances))
        if gpu.mig_mode_current != mode and busy:
            gpu.mig_mode_pending = mode
            lines.append(
                f"Warning: MIG mode is in pending {verb} state for GPU {bus}:"
                "In use by another client"
            )
            lines.append(
                f"{bus} is currently being used by one or more other processes (e.g. CUDA "
                "application or a monitoring application such as another instance of "
                "nvidia-smi). Please first kill all processes using the device and retry the "
                "command or reboot the system to make MIG mode effective."
            )
            continue
        gpu.mig_mode_pending = mode
        if gpu.mig_mode_current != mode:
            mig.apply_pending(gpu)
        lines.append(f"{mode} MIG Mode for GPU {bus}")
    lines.append("All done.")
    return Result(_join(lines), rc)


def _reset(gpus: list[Gpu]) -> Result:
    """``-r``/``--gpu-reset``: refusal text of NVIDIA/mig-parted#181 (exit 255 as in
    NVIDIA/NVSentinel#1690), success line of NVIDIA/gpu-operator#118. A reset makes the
    pending MIG mode current and drops the MIG instances."""
    busy = [g for g in gpus if g.in_use]
    if busy:
        lines = ["", "The following GPUs could not be reset:"]
        lines += [f"  GPU {g.pci_bus_id}: In use by another client" for g in busy]
        lines.append("")
        n = len(busy)
        devices = "1 device is" if n == 1 else f"{n} devices are"
        these = "this device" if n == 1 else "these devices"
        lines.append(
            f"{devices} currently being used by one or more other processes (e.g., Fabric "
            "Manager, CUDA application, graphics application such as an X server, or a "
            "monitoring application such as another instance of nvidia-smi). Please first "
            f"kill all processes using {these} and all compute applications running in the "
            "system."
        )
        return Result(_join(lines), RC_OTHER)
    lines = []
    for gpu in gpus:
        mig.apply_pending(gpu)
        lines.append(f"GPU {gpu.pci_bus_id} was successfully reset.")
    return Result(_join(lines))


def _join(lines: list[str]) -> str:
    return "".join(line + "\n" for line in lines)


# --- dispatch -------------------------------------------------------------------------


def _mutating(args: Args) -> bool:
    if args.mig_sub:
        return bool(args.flags & {"dgi", "dci"}) or args.cgi is not None or args.cci is not None
    return args.mig_mode is not None or "reset" in args.flags


def _run_mutation(args: Args, gpus: list[Gpu]) -> Result:
    if not args.mig_sub:
        if args.mig_mode is not None:
            return _mig_mode(args.mig_mode, gpus)
        return _reset(gpus)
    capable = [g for g in gpus if g.mig_capable]
    enabled = [g for g in capable if g.mig_mode_current == "Enabled"]
    if not enabled:
        # No capture: the wording of the captured -lgi/-lci answer for the same state.
        return Result("No MIG-enabled devices found.\n", RC_NOT_FOUND)
    if args.cgi is not None:
        return _cgi(args, enabled)
    if args.cci is not None:
        return _cci(args, enabled)
    if "dci" in args.flags:
        return _dci(args, enabled)
    return _dgi(args, enabled)


def run(argv: list[str], path: Path) -> Result:
    """Answer one nvidia-smi command line against the state file at ``path``."""
    try:
        args = parse(argv)
    except UsageError as exc:
        return Result(str(exc), RC_INVALID)
    if "help" in args.flags:
        return _help()
    try:
        if _mutating(args):
            with transaction(path) as state:
                try:
                    gpus = select(state, args.ids)
                except LookupError:
                    return Result("No devices were found\n", RC_NOT_FOUND)
                return _run_mutation(args, gpus)
        state = load(path)
    except StateError as exc:
        return Result(NO_DRIVER, RC_NO_DRIVER, err=f"GPU simulator: {exc}\n")
    except UsageError as exc:
        return Result(str(exc), RC_INVALID)
    except mig.MigError as exc:
        return Result(f"Unable to run the MIG operation: {exc.reason}\n", RC_NOT_SUPPORTED)
    try:
        gpus = select(state, args.ids)
    except LookupError:
        return Result("No devices were found\n", RC_NOT_FOUND)
    try:
        return _read_only(args, state, gpus, path)
    except render.QueryError as exc:
        return Result(str(exc), RC_INVALID)
    except UsageError as exc:
        return Result(str(exc), RC_INVALID)
    except mig.MigError as exc:
        return Result(f"Unable to run the MIG operation: {exc.reason}\n", RC_NOT_SUPPORTED)


def _read_only(args: Args, state: State, gpus: list[Gpu], path: Path) -> Result:
    handlers: dict[str, Callable[[], Result]] = {
        "version": lambda: Result(render.render_version(state)),
        "list": lambda: Result(render.render_list(gpus)),
    }
    if args.mig_sub:
        if args.flags & {"lgip", "lgipp", "lgi", "lci", "lcip"}:
            return _mig_list(args, gpus)
        raise UsageError(
            "ERROR: Option mig requires an operation. Please run 'nvidia-smi mig -h'.\n"
        )
    if args.query_gpu is not None or args.query_apps is not None:
        if args.fmt is None:
            raise render.QueryError(
                "CSV format is required for --query-gpu and --query-compute-apps.\n"
            )
        if args.query_gpu is not None:
            fields = [f.strip() for f in args.query_gpu.split(",") if f.strip()]
            return Result(render.render_query_gpu(state, gpus, fields, args.fmt))
        fields = [f.strip() for f in (args.query_apps or "").split(",") if f.strip()]
        return Result(render.render_query_apps(gpus, fields, args.fmt))
    for flag in ("version", "list"):
        if flag in args.flags:
            return handlers[flag]()
    readings = _readings(path, state)
    if "query" in args.flags:
        if "xml" in args.flags:
            return Result(render.render_q_xml(state, gpus, readings))
        return Result(render.render_q(state, gpus, readings))
    return Result(render.render_table(state, gpus, readings))


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``/usr/bin/nvidia-smi`` on a lab node; returns the exit code."""
    result = run(list(sys.argv[1:] if argv is None else argv), state_path())
    sys.stdout.write(result.out)
    sys.stdout.flush()
    if result.err:
        sys.stderr.write(result.err)
    return result.rc
