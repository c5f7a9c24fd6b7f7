"""``nvidia-smi`` of the GPU simulator: argv in, text and exit code out.

Messages and exit codes come from real output (``tests/unit/data/gpu/``); where a
message has no capture the comment at its use says which source it follows. Exit codes
follow the nvidia-smi manual page ("RETURN VALUE"), whose numbers are NVML's return
codes: 2 invalid argument, 3 not supported, 6 not found, 9 no driver, 19 in use,
23 insufficient resources, 255 other error (the captured ``--gpu-reset`` refusal).
Everything goes to stdout, as nvidia-smi does (its refusals in ``h200-single-cli/`` all
left stderr empty); only what the simulator does not simulate is said on stderr, as the
simulator's. Exit statuses of refusals as read on a real H200 (``h200-single-cli/``): an
unknown option, a missing value 255; ``-i``/``-q`` with ``-L``, an unknown ``mig``,
``topo`` or ``nvlink`` option, an unknown query field or format modifier 2.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from pathlib import Path

from gpufleet.lab.gpusim import hardware, mig, render
from gpufleet.lab.gpusim.state import (
    SIMULATOR,
    Gpu,
    State,
    StateError,
    load,
    state_path,
    transaction,
)

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

# No capture of it under tests/unit/data/gpu/ or the shared fixtures: nvidia-smi's
# well-known answer with no NVIDIA kernel module loaded (the text that
# plugins/module_utils/host/gpu_facts.py recognises), exit 9 (NVML_ERROR_DRIVER_NOT_LOADED).
NO_DRIVER = (
    "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. "
    "Make sure that the latest NVIDIA driver is installed and running.\n"
)


class _NoDriver(Exception):
    """The simulated module is not loaded (``gpusim driver unload``): nvidia-smi answers
    ``NO_DRIVER`` and the state is left as it is."""


class UsageError(Exception):
    """Bad command line; ``str()`` is what nvidia-smi prints (stdout), ``rc`` its exit
    status, ``err`` a line on stderr (only for what the simulator does not simulate)."""

    def __init__(self, message: str, rc: int = RC_INVALID, err: str = "") -> None:
        super().__init__(message)
        self.rc = rc
        self.err = err


# Refusals of the real nvidia-smi 580.159.04, stdout and exit status as read on an H200
# (tests/unit/data/gpu/h200-single-cli/, its README lists the command lines).
def _not_recognized(token: str) -> UsageError:
    # smi-unknown-long-option.txt, -short-option.txt, -word.txt, smi-format-alone.txt
    return UsageError(
        f"ERROR: Option {token} is not recognized. Please run 'nvidia-smi -h'.\n\n", RC_OTHER
    )


def _missing_value(token: str) -> UsageError:
    # smi-i-missing-value.txt (captured for -i; the simulator says it for every option
    # that takes a value)
    return UsageError(
        f"ERROR: Option {token} is missing its value. Please run 'nvidia-smi -h' for help.\n\n",
        RC_OTHER,
    )


def _not_valid(token: str) -> UsageError:
    # smi-i0-L-refused.txt, smi-L-i0-refused.txt, smi-id0-list-gpus-refused.txt,
    # smi-L-q-refused.txt: the option as written (``--id=0`` with its value, ``-i`` without)
    return UsageError(
        f"ERROR: Option {token} is not valid for this command. Please run 'nvidia-smi -h' "
        "for help.\n\n",
        RC_INVALID,
    )


def _sub_not_recognized(token: str) -> UsageError:
    # smi-mig-unknown-option.txt, smi-topo-unknown-option.txt, smi-nvlink-unknown-option.txt
    return UsageError(f'Option "{token}" is not recognized.\n', RC_INVALID)


def _not_simulated(words: str) -> UsageError:
    """An option the real nvidia-smi has (its ``-h``) that the simulator does not answer:
    said on stderr as the simulator's, exit 2 (no real message applies)."""
    return UsageError("", RC_INVALID, f"{SIMULATOR}: 'nvidia-smi {words}' is not simulated\n")


@dataclass
class Args:
    """Parsed nvidia-smi command line. ``sub`` is the subcommand (``mig``, ``topo``,
    ``nvlink``) or "" for the main command; ``tokens`` the options as written, in order
    (for the refusals that name one)."""

    sub: str = ""
    flags: set[str] = field(default_factory=set)
    tokens: list[tuple[str, str]] = field(default_factory=list)
    ids: str | None = None
    query_gpu: str | None = None
    query_apps: str | None = None
    fmt: str | None = None
    mig_mode: str | None = None
    cgi: str | None = None
    cci: str | None = None
    gi: str | None = None
    ci: str | None = None
    p2p: str | None = None
    link: str | None = None

    @property
    def mig_sub(self) -> bool:
        return self.sub == "mig"


# Per command: flag options (name -> flag) and options with a value (name -> (Args
# attribute, value optional)). Names and long forms from the real ``-h``, ``mig -h``,
# ``topo -h`` and ``nvlink -h`` of 580.159.04.
_FLAGS: dict[str, dict[str, str]] = {
    "": {
        "-L": "list", "--list-gpus": "list",
        "-q": "query", "--query": "query",
        "-x": "xml", "--xml-format": "xml",
        "-r": "reset", "--gpu-reset": "reset",
        "--version": "version",
        "-h": "help", "--help": "help",
    },
    "mig": {
        "-h": "help", "--help": "help",
        "-lgip": "lgip", "--list-gpu-instance-profiles": "lgip",
        "-lgipp": "lgipp", "--list-gpu-instance-possible-placements": "lgipp",
        "-lgi": "lgi", "--list-gpu-instances": "lgi",
        "-lci": "lci", "--list-compute-instances": "lci",
        "-lcip": "lcip", "--list-compute-instance-profiles": "lcip",
        "-C": "default_ci", "--default-compute-instance": "default_ci",
        "-dgi": "dgi", "--destroy-gpu-instance": "dgi",
        "-dci": "dci", "--destroy-compute-instance": "dci",
    },
    "topo": {"-h": "help", "--help": "help", "-m": "matrix", "--matrix": "matrix"},
    "nvlink": {"-h": "help", "--help": "help", "-s": "status", "--status": "status"},
}  # fmt: skip
_VALUED: dict[str, dict[str, tuple[str, bool]]] = {
    "": {
        "-i": ("ids", False), "--id": ("ids", False),
        "--query-gpu": ("query_gpu", False),
        "--query-compute-apps": ("query_apps", False),
        "--format": ("fmt", False),
        "-mig": ("mig_mode", False), "--multi-instance-gpu": ("mig_mode", False),
    },
    "mig": {
        "-i": ("ids", False), "--id": ("ids", False),
        "-cgi": ("cgi", False), "--create-gpu-instance": ("cgi", False),
        "-cci": ("cci", True), "--create-compute-instance": ("cci", True),
        "-gi": ("gi", False), "--gpu-instance-id": ("gi", False),
        "-ci": ("ci", False), "--compute-instance-id": ("ci", False),
    },
    "topo": {
        "-i": ("ids", False), "--id": ("ids", False),
        "-p2p": ("p2p", False), "--p2pstatus": ("p2p", False),
    },
    "nvlink": {
        "-i": ("ids", False), "--id": ("ids", False),
        "-l": ("link", False), "--link": ("link", False),
    },
}  # fmt: skip


def _words(text: str) -> frozenset[str]:
    return frozenset(text.split())


#: Options the real nvidia-smi 580.159.04 lists in its ``-h`` (main command and the
#: subcommands answered here) that the simulator does not answer.
_REAL_ONLY: dict[str, frozenset[str]] = {
    "": _words(
        "-B --list-excluded-gpus -col --columns -f --filename -l --loop -lms --loop-ms "
        "-u --unit --dtd -d --display --query-supported-clocks --query-accounted-apps "
        "--query-retired-pages --query-remapped-rows -pm --persistence-mode -e --ecc-config "
        "-p --reset-ecc-errors -c --compute-mode --gom -vm --virt-mode -lgc "
        "--lock-gpu-clocks -m --mode -rgc --reset-gpu-clocks -lmc --lock-memory-clocks "
        "-rmc --reset-memory-clocks -lmcd --lock-memory-clocks-deferred -rmcd "
        "--reset-memory-clocks-deferred -ac --applications-clocks -rac "
        "--reset-applications-clocks -pl --power-limit -sc --scope -cc --cuda-clocks "
        "-am --accounting-mode -caa --clear-accounted-apps --auto-boost-default "
        "--auto-boost-permission -gtt --gpu-target-temp -den --dram-encryption "
        "--set-hostname --get-hostname -eow --error-on-warning -t --toggle-led --debug "
        "dmon daemon replay pmon drain c2c clocks encodersessions fbcsessions vgpu "
        "compute-policy boost-slider power-hint base-clocks conf-compute gpm pci "
        "power-smoothing power-profiles prm"
    ),
    "mig": _words("-lcipp --list-compute-instance-possible-placements"),
    "topo": _words(
        "-mp --matrix_pci -c --cpu -n --nearest_gpus -p --gpu_path -C "
        "--get-numa-id-of-nearby-cpu -M --get-numa-id-of-nearby-mem -gnid --gpu-numa-id "
        "-nvme --matrix_nvme"
    ),
    "nvlink": _words(
        "-c --capabilities -p --pcibusid -R --remotelinkinfo -sc --setcontrol -gc "
        "--getcontrol -g --getcounters -r --resetcounters -e --errorcounters -ec "
        "--crcerrorcounters -re --reseterrorcounters -gt --getthroughput -sLowPwrThres "
        "--setLowPowerThreshold -gLowPwrInfo --getLowPowerInfo -sBwMode --setBandwidthMode "
        "-gBwMode --getBandwidthMode -cBridge --checkBridge -sLWidth --setLinkWidth "
        "-gLWidth --getLinkWidth -info --info"
    ),
}


def parse(argv: list[str]) -> Args:
    """Parse nvidia-smi argv (``-i 0``, ``--id=0``, ``--query-gpu=a,b``, ``mig -cgi 19``,
    ``topo -m``, ``nvlink -s``).

    Raises ``UsageError`` with the real refusal: an unknown option (main command: exit
    255; ``mig``/``topo``/``nvlink``: exit 2), a missing value (exit 255), ``-i`` or ``-q``
    with ``-L`` (exit 2), ``--format`` without a query (exit 255, "not recognized"),
    ``topo -i`` without ``-n``/``-p`` (exit 255).
    """
    args = Args()
    i = 0
    if argv and argv[0] in ("mig", "topo", "nvlink"):
        args.sub = argv[0]
        i = 1
    flags, valued = _FLAGS[args.sub], _VALUED[args.sub]
    while i < len(argv):
        tok = argv[i]
        name, eq, inline = tok.partition("=")
        if tok in flags:
            args.flags.add(flags[tok])
            args.tokens.append((tok, flags[tok]))
        elif name in valued:
            attr, optional = valued[name]
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
                raise _missing_value(tok)
            setattr(args, attr, value)
            args.tokens.append((tok, attr))
        elif name in _REAL_ONLY[args.sub]:
            raise _not_simulated(" ".join(([args.sub] if args.sub else []) + [tok]))
        elif args.sub:
            raise _sub_not_recognized(tok)
        else:
            raise _not_recognized(tok)
        i += 1
    _check_combination(args)
    return args


def _check_combination(args: Args) -> None:
    """The combinations the real nvidia-smi refuses (captured in h200-single-cli/)."""
    if args.sub == "" and "list" in args.flags:
        # -L takes no other option: the first one that is not -L is named.
        other = next((tok for tok, kind in args.tokens if kind != "list"), None)
        if other is not None:
            raise _not_valid(other)
    if (
        args.sub == ""
        and args.fmt is not None
        and args.query_gpu is None
        and (args.query_apps is None)
    ):
        # smi-format-alone.txt names "--format=csv"; "--format csv" (two words) is not
        # captured: the simulator names the option as written, "--format".
        raise _not_recognized(next(tok for tok, kind in args.tokens if kind == "fmt"))
    if args.sub == "topo" and args.ids is not None:
        # smi-topo-i0-refused.txt; -n and -p (which take -i) are not simulated
        raise UsageError(
            "The -i command line argument must be used in conjunction with -n or -p.\n\n",
            RC_OTHER,
        )


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
        "Supported: -L, -q [-x], --query-gpu=... [--format=csv[,noheader][,nounits]],\n"
        "--query-compute-apps=..., -i ID, -mig 0|1, -r, --version,\n"
        "mig -lgip|-lgipp|-lgi|-lci|-lcip|-cgi ID[:START],... [-C]|-cci [IDS] -gi ID|-dci|-dgi,\n"
        "topo -m|-p2p n, nvlink -s [-i ID]\n"
    )


# --- read-only commands ---------------------------------------------------------------


def _readings(path: Path, state: State) -> hardware.Readings:
    nvlink = hardware.nvlinked([g.name for g in state.gpus])
    return hardware.load_readings(path, [(g.index, g.uuid) for g in state.gpus], nvlink)


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
    """Answer one nvidia-smi command line against the state file at ``path``.

    With the simulated module unloaded (or no state file) every command but ``-h`` and a
    bad command line answers ``NO_DRIVER``, exit 9, as the real one does with no driver."""
    try:
        args = parse(argv)
    except UsageError as exc:
        return Result(str(exc), exc.rc, exc.err)
    if "help" in args.flags or (args.sub and not args.tokens):
        # No capture of the real help text is reproduced; the real command answers
        # `mig`, `topo` and `nvlink` without an option with its usage text and exit 0
        # (read on the H200 of h200-single-cli/). The simulator prints its own.
        return _help()
    try:
        if _mutating(args):
            with transaction(path) as state:
                if not state.driver_loaded:
                    raise _NoDriver
                try:
                    gpus = select(state, args.ids)
                except LookupError:
                    return Result("No devices were found\n", RC_NOT_FOUND)
                return _run_mutation(args, gpus)
        state = load(path)
        if not state.driver_loaded:
            raise _NoDriver
    except _NoDriver:
        return Result(NO_DRIVER, RC_NO_DRIVER)
    except StateError as exc:
        return Result(NO_DRIVER, RC_NO_DRIVER, err=f"GPU simulator: {exc}\n")
    except UsageError as exc:
        return Result(str(exc), exc.rc, exc.err)
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
        return Result(str(exc), exc.rc, exc.err)
    except mig.MigError as exc:
        return Result(f"Unable to run the MIG operation: {exc.reason}\n", RC_NOT_SUPPORTED)


def _read_only(args: Args, state: State, gpus: list[Gpu], path: Path) -> Result:
    if args.sub == "topo":
        return _topo(args, state, path)
    if args.sub == "nvlink":
        return _nvlink(args, state, gpus)
    if args.mig_sub:
        if args.flags & {"lgip", "lgipp", "lgi", "lci", "lcip"}:
            return _mig_list(args, gpus)
        # No capture of `mig -i 0` (an -i and no operation); the simulator names what
        # it lacks rather than guess the real answer.
        raise UsageError("", RC_INVALID, f"{SIMULATOR}: 'nvidia-smi mig' needs an operation\n")
    if args.query_gpu is not None or args.query_apps is not None:
        # Without --format the real one prints CSV with header and units, exit 0
        # (h200-single-cli/smi-query-no-format.txt).
        fmt = "csv" if args.fmt is None else args.fmt
        if args.query_gpu is not None:
            fields = [f.strip() for f in args.query_gpu.split(",") if f.strip()]
            return Result(render.render_query_gpu(state, gpus, fields, fmt))
        fields = [f.strip() for f in (args.query_apps or "").split(",") if f.strip()]
        return Result(render.render_query_apps(gpus, fields, fmt))
    if "version" in args.flags:
        return Result(render.render_version(state))
    if "list" in args.flags:
        return Result(render.render_list(gpus))
    readings = _readings(path, state)
    if "query" in args.flags:
        if "xml" in args.flags:
            return Result(render.render_q_xml(state, gpus, readings))
        return Result(render.render_q(state, gpus, readings))
    return Result(render.render_table(state, gpus, readings))


def _topo(args: Args, state: State, path: Path) -> Result:
    """``topo -m`` and ``topo -p2p n`` over every GPU of the node (``topo`` refuses
    ``-i`` without ``-n``/``-p``: ``parse``)."""
    if "matrix" in args.flags and args.p2p is None:
        return Result(render.render_topo_matrix(state, _readings(path, state)))
    if args.p2p == "n" and "matrix" not in args.flags:
        return Result(render.render_topo_p2p_nvlink(state))
    # Other capabilities (r, w, a, p) and combinations have no capture.
    words = " ".join(tok if kind != "p2p" else f"{tok} {args.p2p}" for tok, kind in args.tokens)
    raise _not_simulated(f"topo {words}")


def _nvlink(args: Args, state: State, gpus: list[Gpu]) -> Result:
    """``nvlink -s [-i ID]``; ``-l`` and the other queries have no capture."""
    if args.flags == {"status"} and args.link is None:
        return Result(render.render_nvlink_status(state, gpus))
    raise _not_simulated("nvlink " + " ".join(tok for tok, _ in args.tokens))


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``/usr/bin/nvidia-smi`` on a lab node; returns the exit code."""
    result = run(list(sys.argv[1:] if argv is None else argv), state_path())
    sys.stdout.write(result.out)
    sys.stdout.flush()
    if result.err:
        sys.stderr.write(result.err)
    return result.rc
