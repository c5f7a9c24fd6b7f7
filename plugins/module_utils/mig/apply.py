# Copyright: gpufleet contributors
# Apache License 2.0 (see LICENSE)
"""Apply a MIG layout to the GPUs of one host with ``nvidia-smi``.

Standard library only: Ansible ships this file to managed hosts (module ``nvidia_mig``),
and role ``mig`` copies it with the module_utils it imports (``mig/request.py``,
``mig/gpu_state.py``, ``mig/clients.py``, ``mig/planner.py``, ``nvidia/gpu.py``...; the
list is ``mig__code_files`` in ``roles/mig/vars/main.yml``) to
``/usr/local/lib/gpufleet-mig`` where ``gpufleet-mig.service`` runs it at boot as
``python3 -m ansible_collections.gpufleet.cluster.plugins.module_utils.mig.apply
--layout-file /etc/gpufleet/mig/layout.yaml`` (see :func:`main`).

Steps of :func:`apply` (mig-parted's apply logic, NVIDIA/mig-parted ``cmd/nvidia-mig-parted/
apply``, and the NVIDIA MIG user guide, "Getting started with MIG"):

1. read every GPU (``mig.gpu_state``): ``nvidia-smi -q -x`` (identity, PCI device ID,
   MIG mode current and pending), ``nvidia-smi --query-compute-apps`` (processes),
   ``nvidia-smi mig -lgi`` and ``-lci`` (GPU and compute instances) and, per MIG-capable
   GPU, ``mig -lgip`` and ``-lgipp`` (profiles and placements as the driver reports
   them; they win over the built-in tables of ``mig.profiles``);
2. plan every selected GPU with ``mig.planner.plan`` (keeping the instances that already
   match) before anything changes: a layout that does not fit stops the run here;
3. when a MIG mode must change, find the GPU's clients (``mig.clients``: processes,
   systemd units ``nvidia-persistenced``, ``nvidia-dcgm``, ``dcgm-exporter``,
   ``nvidia-fabricmanager``, kernel module ``nvidia_drm``, the DRA kubelet plugin and
   device plugin containers) and stop the allowed ones; refuse, naming each client and
   the variable that allows it, otherwise (NVIDIA/gpu-operator#118, NVIDIA/mig-parted#181);
4. destroy compute instances then GPU instances not in the plan (NVML refuses to destroy
   a GI that still has CIs); set the MIG mode (``nvidia-smi -i N -mig 0|1``); a mode left
   pending is reset (``nvidia-smi -i N -r``) when allowed, else reported as needing a
   reboot when allowed, else refused naming what holds the GPU;
5. create the planned GIs at their placements with a default CI each (``nvidia-smi mig
   -i N -cgi <profile ID>:<start>,... -C``: "a profile tuple consists of a profile name or
   ID and an optional placement specifier, which consists of a colon and a placement
   start index", ``nvidia-smi mig -h``);
6. read the GPUs again and verify the layout; restart what was stopped, also on failure.

MIG mode is never left on with zero instances: such a request is refused, and a GPU
whose creation failed right after this run enabled MIG is switched back off
(NVIDIA/gpu-operator#2833: MIG on with no instances is a wedged node;
kubernetes-sigs/dra-driver-nvidia-gpu#149).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from dataclasses import dataclass, field
from typing import Any

from ansible_collections.gpufleet.cluster.plugins.module_utils.common import limits as ig
from ansible_collections.gpufleet.cluster.plugins.module_utils.mig import placement as mpla
from ansible_collections.gpufleet.cluster.plugins.module_utils.mig import planner as mpl
from ansible_collections.gpufleet.cluster.plugins.module_utils.mig import profiles as mpr
from ansible_collections.gpufleet.cluster.plugins.module_utils.mig.clients import (
    Client,
    find_clients,
    refuse_message,
    restart_client,
    stop_client,
)
from ansible_collections.gpufleet.cluster.plugins.module_utils.mig.gpu_state import (
    GpuState,
    MigApplyError,
    ReadFile,
    RunCommand,
    gpu_model,
    read_gpus,
    run_program,
)
from ansible_collections.gpufleet.cluster.plugins.module_utils.mig.request import (
    Request,
    Target,
    check_request,
    request_from_file,
    targets,
)


@dataclass
class GpuPlan:
    """What to do to one GPU."""

    gpu: GpuState
    target: Target
    plan: mpla.Plan | None = None
    destroy: list[mpla.GpuInstance] = field(default_factory=list)
    create: list[mpla.Placement] = field(default_factory=list)
    ci_create: list[int] = field(default_factory=list)  # kept GI IDs that lack a CI
    mode_change: str | None = None  # "1" enable / "0" disable

    @property
    def changed(self) -> bool:
        return bool(self.destroy or self.create or self.ci_create or self.mode_change)

    def after(self) -> dict[str, Any]:
        if not self.target.mig_enabled:
            mode = "Disabled" if self.gpu.mig_capable else "N/A"
            return {"mig_mode_current": mode, "mig_mode_pending": mode, "instances": []}
        if self.plan is None:
            raise AssertionError("a GPU with MIG enabled has no plan")
        return {
            "mig_mode_current": "Enabled",
            "mig_mode_pending": "Enabled",
            "instances": [{**p.to_dict(), "compute_instances": 1} for p in self.plan.placements],
        }


def _narrower(ci_profile: str) -> bool:
    """True for a compute instance narrower than its GPU instance (``1c.3g.71gb``)."""
    slices = mpr.compute_instance_slices(ci_profile)
    return slices is not None and slices[0] < slices[1]


def plan_gpu(gpu: GpuState, target: Target, model: mpr.GpuModel | None, req: Request) -> GpuPlan:
    """Pure: the actions that turn ``gpu`` into ``target``.

    Raises ``MigApplyError`` for a layout on a GPU without MIG, an unknown profile or a
    layout that does not fit (the planner's reason and fix).
    """
    out = GpuPlan(gpu, target)
    if not gpu.mig_capable:
        if target.mig_enabled:
            raise MigApplyError(
                f"GPU {gpu.index} ({gpu.name}) does not support MIG (nvidia-smi answers 'Not "
                f"Supported') but the layout asks for {target.layout}; fix: leave this GPU out "
                f"with {req.name('devices')}, or apply the layout only to MIG GPU nodes"
            )
        return out
    if not target.mig_enabled:
        out.destroy = list(gpu.gis)
        if gpu.mode_current != "Disabled" or gpu.mode_pending != "Disabled":
            out.mode_change = "0"
        return out
    if model is None:
        raise AssertionError("a GPU with MIG enabled has no MIG model")
    try:
        out.plan = mpl.plan(model, target.layout, current=gpu.gis if gpu.mig_on else None)
    except mpr.UnknownProfile as exc:
        raise MigApplyError(f"GPU {gpu.index}: {exc}; fix {req.name('layout')}") from None
    except mpla.LayoutDoesNotFit as exc:
        raise MigApplyError(f"GPU {gpu.index}: {exc.reason}") from None
    guessed = sorted(
        {
            p.profile
            for p in out.plan.placements
            if {"id", "placements"} & set(model.profile(p.profile_id).derived)
        }
    )
    if guessed:
        # -cgi with a GI profile ID or start no source gives could carve something else
        raise MigApplyError(
            f"GPU {gpu.index} ({gpu.name}): the GI profile ID or placements of "
            f"{', '.join(guessed)} in the built-in table are derived, not sourced, and "
            "the GPU did not answer 'nvidia-smi mig -lgip'/'-lgipp'; fix: make those "
            "commands answer on the node (run as root), then apply again"
        )
    current = gpu.gis if gpu.mig_on else []
    # a GI sub-divided into several CIs, or holding a CI narrower than itself, is not what
    # the layout describes (one full compute instance per GI): recreate it
    split = [
        g
        for g in current
        if len(gpu.cis.get(g.instance_id or -1, [])) > 1
        or any(_narrower(c) for c in gpu.ci_profiles.get(g.instance_id or -1, []))
    ]
    whole = [g for g in current if g not in split]
    d = mpla.diff(whole, out.plan)
    out.destroy = split + list(d.destroy)
    out.create = list(d.create)
    out.ci_create = [
        g.instance_id
        for g in d.keep
        if g.instance_id is not None and not gpu.cis.get(g.instance_id)
    ]
    if gpu.mode_current != "Enabled" or gpu.mode_pending != "Enabled":
        out.mode_change = "1"
    return out


@dataclass
class Outcome:
    """Per-GPU result, as returned to the caller."""

    index: int
    name: str
    mig_capable: bool
    before: dict[str, Any]
    after: dict[str, Any]
    changed: bool = False
    created: list[dict[str, Any]] = field(default_factory=list)
    destroyed: list[dict[str, Any]] = field(default_factory=list)
    stopped_clients: list[str] = field(default_factory=list)
    reset: bool = False
    reboot_required: bool = False
    commands: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


@dataclass
class ApplyResult:
    changed: bool
    gpus: list[dict[str, Any]]
    stopped_clients: list[str]
    restarted_clients: list[str]
    reboot_required: bool
    mig_devices: int
    diff: dict[str, str]
    messages: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


def layout_text(gpus: list[tuple[int, str, dict[str, Any]]]) -> str:
    """Diff text: one line per GPU and per instance (``1g.18gb (ID 19) at 0:1``)."""
    lines = []
    for index, name, lay in gpus:
        lines.append(
            f"GPU {index} ({name}): MIG {lay['mig_mode_current']}"
            + (
                f" (pending {lay['mig_mode_pending']})"
                if lay["mig_mode_pending"] != lay["mig_mode_current"]
                else ""
            )
        )
        for inst in lay["instances"]:
            lines.append(
                f"  {inst['profile']} (ID {inst['profile_id']}) at {inst['start']}:{inst['size']}"
            )
    return "\n".join(lines) + "\n"


def _smi(run: RunCommand, out: Outcome, argv: list[str]) -> tuple[int, str]:
    rc, so, se = run_program(run, argv)
    out.commands.append(" ".join(argv[1:]) + f" -> {rc}")
    return rc, (so + se)


def apply(
    req: Request,
    run: RunCommand,
    read_file: ReadFile | None = None,
    check_mode: bool = False,
) -> ApplyResult:
    """Bring the host's GPUs to the requested layout (see the module docstring).

    Returns ``ApplyResult``; raises ``MigApplyError`` (with the per-GPU results so far)
    when the layout cannot be applied. In ``check_mode`` nothing is changed and the result
    says what would be.
    """
    read_file = read_file or _read_text
    check_request(req)
    smi = req.nvidia_smi
    gpus = read_gpus(run, smi)
    if not gpus:
        raise MigApplyError(f"{smi} lists no GPU on this host")
    plans = _plan_gpus(req, run, gpus)
    outcomes = _outcomes(plans)
    changing = [p for p in plans if p.changed]
    before_text = layout_text([(p.gpu.index, p.gpu.name, p.gpu.layout()) for p in plans])
    after_text = layout_text([(p.gpu.index, p.gpu.name, p.after()) for p in plans])
    untouched = sum(len(g.gis) for g in gpus if g.index not in outcomes and g.mig_on)

    def result(changed: bool, stopped: list[str], restarted: list[str]) -> ApplyResult:
        return ApplyResult(
            changed=changed,
            gpus=[outcomes[i].to_dict() for i in sorted(outcomes)],
            stopped_clients=stopped,
            restarted_clients=restarted,
            reboot_required=any(o.reboot_required for o in outcomes.values()),
            mig_devices=untouched + _mig_devices(outcomes),
            diff={"before": before_text, "after": after_text},
        )

    if not changing:
        return result(False, [], [])
    to_stop, reboot_gpus = _clients_to_stop(req, run, read_file, changing, outcomes)
    if check_mode:
        res = result(True, [c.describe() for c in to_stop], [])
        for i in reboot_gpus:
            outcomes[i].reboot_required = True
        res.gpus = [outcomes[i].to_dict() for i in sorted(outcomes)]
        res.reboot_required = bool(reboot_gpus)
        return res
    stopped, restarted = _change(req, run, changing, outcomes, to_stop, reboot_gpus)
    return result(True, [c.describe() for c in stopped], restarted)


def _plan_gpus(req: Request, run: RunCommand, gpus: list[GpuState]) -> list[GpuPlan]:
    """The plan of every selected GPU, made before anything changes (``plan_gpu``; the MIG
    profiles from ``gpu_model`` for a GPU that is to have MIG on)."""
    wanted = targets(req, gpus)
    plans: list[GpuPlan] = []
    for gpu in gpus:
        if gpu.index not in wanted:
            continue
        target = wanted[gpu.index]
        model = (
            gpu_model(run, req.nvidia_smi, gpu) if gpu.mig_capable and target.mig_enabled else None
        )
        plans.append(plan_gpu(gpu, target, model, req))
    return plans


def _outcomes(plans: list[GpuPlan]) -> dict[int, Outcome]:
    """GPU index -> its ``Outcome`` as planned: layout before and after, the instances to
    create and to destroy."""
    outcomes = {
        p.gpu.index: Outcome(
            p.gpu.index, p.gpu.name, p.gpu.mig_capable, p.gpu.layout(), p.after(), p.changed
        )
        for p in plans
    }
    for p in plans:
        o = outcomes[p.gpu.index]
        o.created = [c.to_dict() for c in p.create]
        o.destroyed = [d.to_dict() for d in p.destroy]
    return outcomes


def _mig_devices(outcomes: dict[int, Outcome]) -> int:
    """MIG devices (GPU instances) the planned GPUs have after the apply."""
    return sum(
        len(o.after["instances"])
        for o in outcomes.values()
        if o.after["mig_mode_current"] == "Enabled"
    )


def _clients_to_stop(
    req: Request,
    run: RunCommand,
    read_file: ReadFile,
    changing: list[GpuPlan],
    outcomes: dict[int, Outcome],
) -> tuple[list[Client], set[int]]:
    """Who holds the GPUs, decided before any change: ``(clients to stop, GPU indices
    whose mode change waits for the reboot)``. A MIG mode change looks at every client of
    the host, a destroy only at the GPU's processes. Raises ``MigApplyError`` naming each
    client that ``allow_stop`` (or ``allow_reboot``, for processes) does not allow."""
    mode_plans = [p for p in changing if p.mode_change]
    destroy_plans = [p for p in changing if p.destroy and not p.mode_change]
    if not (mode_plans or destroy_plans):
        return [], set()
    procs = [pr for p in mode_plans + destroy_plans for pr in p.gpu.processes]
    clients = (
        find_clients(run, read_file, procs)
        if mode_plans
        else [Client("process", pr.name, str(pr.pid)) for pr in procs]
    )
    blocking = [c for c in clients if c.kind not in req.allow_stop]
    to_stop = [c for c in clients if c.kind in req.allow_stop]
    if not blocking:
        return to_stop, set()
    only_procs = all(c.kind == "process" for c in blocking)
    held = {p.gpu.index for p in mode_plans + destroy_plans if p.gpu.processes}
    if only_procs and req.allow_reboot and mode_plans:
        return to_stop, {p.gpu.index for p in mode_plans if p.gpu.index in held}
    first = (mode_plans + destroy_plans)[0]
    why = (
        "changing the MIG mode needs the GPU free"
        if mode_plans
        else "destroying GPU instances needs them free"
    )
    raise MigApplyError(
        refuse_message(blocking, req.name, first.gpu.index, why),
        [o.to_dict() for o in outcomes.values()],
    )


def _change(
    req: Request,
    run: RunCommand,
    changing: list[GpuPlan],
    outcomes: dict[int, Outcome],
    to_stop: list[Client],
    reboot_gpus: set[int],
) -> tuple[list[Client], list[str]]:
    """Stop ``to_stop``, change every GPU of ``changing``, read the GPUs again and verify
    them; restart what was stopped, also on failure. Returns ``(stopped clients, what
    each restart did)``; raises ``MigApplyError`` from the first failing step."""
    stopped: list[Client] = []
    restarted: list[str] = []
    try:
        for c in to_stop:
            stop_client(run, c)
            stopped.append(c)
        for p in changing:
            o = outcomes[p.gpu.index]
            o.stopped_clients = [c.describe() for c in stopped]
            _apply_gpu(req, run, p, o, p.gpu.index in reboot_gpus)
        final = {g.index: g for g in read_gpus(run, req.nvidia_smi)}
        for p in changing:
            o = outcomes[p.gpu.index]
            if o.reboot_required:
                o.after = final[p.gpu.index].layout()
                continue
            _verify(p, final[p.gpu.index], o, req)
    finally:
        for c in reversed(stopped):
            restarted.append(restart_client(run, c))
    return stopped, restarted


def _apply_gpu(req: Request, run: RunCommand, p: GpuPlan, o: Outcome, reboot: bool) -> None:
    smi, i = req.nvidia_smi, str(p.gpu.index)
    for gi in p.destroy:
        gid = str(gi.instance_id)
        if p.gpu.cis.get(gi.instance_id or -1):
            rc, text = _smi(run, o, [smi, "mig", "-i", i, "-dci", "-gi", gid])
            if rc != 0:
                raise MigApplyError(
                    f"GPU {i}: destroying the compute instances of GI {gid}: {text}"
                )
        rc, text = _smi(run, o, [smi, "mig", "-i", i, "-dgi", "-gi", gid])
        if rc != 0:
            raise MigApplyError(f"GPU {i}: destroying GPU instance {gid} ({gi.profile}): {text}")
    enabled_now = False
    if p.mode_change:
        rc, text = _smi(run, o, [smi, "-i", i, "-mig", p.mode_change])
        if rc != 0:
            raise MigApplyError(f"GPU {i}: nvidia-smi -mig {p.mode_change} failed: {text}")
        state = _one(run, smi, p.gpu.index)
        if state.mode_pending != state.mode_current:
            if req.allow_gpu_reset and not reboot:
                rc, text = _smi(run, o, [smi, "-i", i, "-r"])
                o.reset = rc == 0
                state = _one(run, smi, p.gpu.index)
            if state.mode_pending != state.mode_current:
                if req.allow_reboot:
                    o.reboot_required = True
                    return
                holders = (
                    ", ".join(f"process {pr.name} (pid {pr.pid})" for pr in state.processes)
                    or "a client nvidia-smi does not list (see fuser -v /dev/nvidia*)"
                )
                raise MigApplyError(
                    f"GPU {i}: MIG mode is pending {state.mode_pending} (current "
                    f"{state.mode_current}) after nvidia-smi -mig {p.mode_change}"
                    + (" and a GPU reset" if req.allow_gpu_reset else "")
                    + f"; held by {holders}; fix: stop it, set {req.name('allow_gpu_reset')}="
                    f"true, or set {req.name('allow_reboot')}=true to apply it at reboot"
                )
        enabled_now = p.mode_change == "1" and p.gpu.mode_current != "Enabled"
    if not p.target.mig_enabled:
        return
    try:
        if p.create:
            tuples = ",".join(f"{c.profile_id}:{c.start}" for c in p.create)
            rc, text = _smi(run, o, [smi, "mig", "-i", i, "-cgi", tuples, "-C"])
            if rc != 0:
                raise MigApplyError(f"GPU {i}: creating GPU instances {tuples} failed: {text}")
        for gid in p.ci_create:
            rc, text = _smi(run, o, [smi, "mig", "-i", i, "-cci", "-gi", str(gid)])
            if rc != 0:
                raise MigApplyError(f"GPU {i}: creating the compute instance of GI {gid}: {text}")
    except MigApplyError as exc:
        if enabled_now and not _one(run, smi, p.gpu.index).gis:
            _smi(run, o, [smi, "-i", i, "-mig", "0"])
            raise MigApplyError(f"{exc}; MIG mode was switched back off (no instances)") from None
        raise


def _one(run: RunCommand, smi: str, index: int) -> GpuState:
    for g in read_gpus(run, smi):
        if g.index == index:
            return g
    raise MigApplyError(f"GPU {index} disappeared from nvidia-smi")


def _verify(p: GpuPlan, now: GpuState, o: Outcome, req: Request) -> None:
    o.after = now.layout()
    if not p.target.mig_enabled:
        if now.mig_capable and (now.mode_current != "Disabled" or now.gis):
            raise MigApplyError(
                f"GPU {now.index}: MIG is still {now.mode_current} after the change"
            )
        return
    if p.plan is None:
        raise AssertionError("a GPU with MIG enabled has no plan")
    d = mpla.diff(now.gis, p.plan)
    lacking = [g.instance_id for g in now.gis if len(now.cis.get(g.instance_id or -1, [])) != 1]
    # no instance at all is the plan only where the DRA driver makes them per claim
    if not now.mig_on or d.changed or lacking or (not now.gis and not req.dynamic_mig):
        shown = layout_text([(now.index, now.name, now.layout())]).strip()
        raise MigApplyError(
            f"GPU {now.index}: after the change the GPU shows {shown!r}, not the planned "
            f"{[str(x) for x in p.plan.placements]}; re-run to converge"
        )


def _read_text(path: str) -> str:
    with open(path, encoding="utf-8") as fh:
        return fh.read()


def subprocess_runner(argv: list[str]) -> tuple[int, str, str]:
    """Run ``argv`` (no shell); ``FileNotFoundError`` when the program is missing."""
    import subprocess

    proc = subprocess.run(argv, capture_output=True, text=True, check=False)
    return proc.returncode, proc.stdout, proc.stderr


def main(argv: list[str] | None = None) -> int:
    """``python3 -m ...mig_apply --layout-file PATH [--check]``: apply the layout file at
    boot (``gpufleet-mig.service``). Prints the result as JSON; exit 0 applied or nothing
    to do, 1 refused or failed (the reason on stderr), 2 unreadable layout file."""
    ap = argparse.ArgumentParser(prog="gpufleet-mig-apply")
    ap.add_argument("--layout-file", default="/etc/gpufleet/mig/layout.yaml")
    ap.add_argument("--check", action="store_true")
    args = ap.parse_args(argv)
    try:
        data = ig.load_json(ig.read_text(args.layout_file) or "", args.layout_file)
        if not isinstance(data, dict):
            raise ig.InputError(f"{args.layout_file} is not a JSON object; fix: rerun role mig")
    except ig.InputError as exc:
        sys.stderr.write(f"gpufleet-mig: cannot read {args.layout_file}: {exc}\n")
        return 2
    try:
        res = apply(request_from_file(data), subprocess_runner, check_mode=args.check)
    except (MigApplyError, ValueError, TypeError) as exc:
        sys.stderr.write(f"gpufleet-mig: {exc}\n")
        return 1
    sys.stdout.write(json.dumps(res.to_dict(), indent=2, sort_keys=True) + "\n")
    return 0


if __name__ == "__main__":  # pragma: no cover - run by gpufleet-mig.service
    os.environ.setdefault("LC_ALL", "C")
    sys.exit(main())  # pylint: disable=ansible-bad-function  # a program, not a module
