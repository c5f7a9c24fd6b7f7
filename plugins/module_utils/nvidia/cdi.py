# Copyright: gpufleet contributors
# Apache License 2.0 (see LICENSE)
"""CDI specs against the GPUs a node has: which GPU has no CDI device.

Pure Python. A CDI spec (Container Device Interface, ``tags.cncf.io/container-device-
interface`` ``specs-go/config.go``) is YAML or JSON with ``cdiVersion``, ``kind``
(``vendor/class``, ``nvidia.com/gpu``) and ``devices`` (each with a ``name``); a container
asks for ``<kind>=<name>``. ``nvidia-ctk cdi generate`` names each full GPU by index
(``0``) and, with ``--device-name-strategy=uuid``, by UUID (``GPU-...``), plus ``all``
(NVIDIA container toolkit docs, cdi-support.md). Specs live in ``/etc/cdi`` (kept) and
``/var/run/cdi`` (cleared at boot). A spec written before the driver was loaded, or one
that holds only ``all``, makes containers fail with "unresolvable CDI devices".
"""

from __future__ import annotations

from dataclasses import dataclass

from ansible_collections.gpufleet.cluster.plugins.module_utils.nvidia.driver import SmiGpu

__all__ = ["CdiDevice", "devices_of", "missing_gpus", "missing_message"]


@dataclass(frozen=True)
class CdiDevice:
    """A device ``name`` of ``kind`` in spec file ``path``."""

    kind: str
    name: str
    path: str


def devices_of(spec: object, path: str) -> list[CdiDevice]:
    """Devices of one parsed spec; a document that is not a CDI spec gives none."""
    if not isinstance(spec, dict):
        return []
    kind = str(spec.get("kind", ""))
    devices = spec.get("devices") or []
    if not kind or not isinstance(devices, list):
        return []
    return [
        CdiDevice(kind, str(d["name"]), path)
        for d in devices
        if isinstance(d, dict) and d.get("name") is not None
    ]


def missing_gpus(
    devices: list[CdiDevice], gpus: list[SmiGpu], kind: str = "nvidia.com/gpu"
) -> list[SmiGpu]:
    """GPUs (``nvidia-smi -L``) without a device named by their UUID in a spec of ``kind``."""
    names = {d.name for d in devices if d.kind == kind}
    return [g for g in gpus if g.uuid not in names]


def missing_message(
    missing: list[SmiGpu], devices: list[CdiDevice], kind: str, dirs: list[str]
) -> str:
    """Failure text naming each missing GPU and what the specs hold instead."""
    held = sorted({f"{d.kind}={d.name}" for d in devices if d.kind == kind})
    gpus = "; ".join(f"GPU {g.index} {g.uuid} ({g.name})" for g in missing)
    return (
        f"no CDI device {kind}=<UUID> for {gpus} in the specs under {', '.join(dirs)} "
        f"(they hold {held or 'no ' + kind + ' device'}); containers asking for these GPUs fail "
        "with 'unresolvable CDI devices'; fix: regenerate the spec after the driver is loaded "
        "(nvidia-ctk cdi generate --device-name-strategy=index --device-name-strategy=uuid "
        "--output=/var/run/cdi/nvidia.yaml) and run again"
    )
