# Copyright: gpufleet contributors
# Apache License 2.0 (see LICENSE)
"""NVIDIA mig-parted's config format (``api/spec/v1/spec.go``), read and checked:
``load_mig_config`` (raises ``MigConfigError`` naming the key, the value and the fix),
``select_entries``/``select_layout`` (the profile counts per GPU index for one config
name)::

      version: v1
      mig-configs:
        <name>:
          - devices: all            # or [0, 1]
            mig-enabled: true
            mig-devices: {"1g.18gb": 7}
            device-filter: "0x233510DE"   # optional, str or list (PCI device ID)

Standard library only (Ansible ships ``module_utils`` to managed hosts; the boot-time MIG
apply copies this file to the node).
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ansible_collections.gpufleet.cluster.plugins.module_utils.common import limits as ig
from ansible_collections.gpufleet.cluster.plugins.module_utils.mig.profiles import parse_profile

__all__ = [
    "MigConfig",
    "MigConfigEntry",
    "MigConfigError",
    "load_mig_config",
    "select_entries",
    "select_layout",
]


MAX_COUNT = 64  # the largest count of one profile in a layout (a GPU holds 7 instances at most)


# --- mig-parted config ------------------------------------------------------------------


class MigConfigError(ValueError):
    """A mig-parted config that does not follow the v1 format.

    ``key`` is the path of the offending key (``mig-configs.balanced[0].devices``),
    ``value`` the value found, ``fix`` what to write instead.
    """

    def __init__(self, key: str, value: Any, problem: str, fix: str) -> None:
        self.key = key
        self.value = value
        self.problem = problem
        self.fix = fix
        super().__init__(f"{key}: {problem} (found {value!r}); {fix}")


_TOP_KEYS = ("version", "mig-configs")


_ENTRY_KEYS = ("device-filter", "devices", "mig-enabled", "mig-devices")


_DEVICE_ID_RE = re.compile(r"^0x[0-9A-Fa-f]{8}\Z")


@dataclass(frozen=True)
class MigConfigEntry:
    """One entry of a mig-parted config: which GPUs, MIG mode, profile counts."""

    devices: str | tuple[int, ...]
    mig_enabled: bool
    mig_devices: dict[str, int] = field(default_factory=dict)
    device_filter: tuple[str, ...] = ()

    def matches(self, gpu_index: int, device_id: str | None = None) -> bool:
        """Does this entry apply to GPU ``gpu_index`` with PCI ``device_id``?

        Raises ``MigConfigError`` when the entry filters on device IDs and ``device_id``
        is unknown.
        """
        if self.devices != "all" and gpu_index not in self.devices:
            return False
        if not self.device_filter:
            return True
        if device_id is None:
            raise MigConfigError(
                "device-filter",
                list(self.device_filter),
                "this entry applies only to some PCI device IDs and the GPU's is unknown",
                "give the GPU model (its PCI device ID, e.g. 0x233510DE for NVIDIA H200)",
            )
        return device_id.lower() in {d.lower() for d in self.device_filter}

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "devices": self.devices if self.devices == "all" else list(self.devices),
            "mig-enabled": self.mig_enabled,
        }
        if self.mig_devices or self.mig_enabled:
            out["mig-devices"] = dict(self.mig_devices)
        if self.device_filter:
            out["device-filter"] = list(self.device_filter)
        return out


@dataclass(frozen=True)
class MigConfig:
    """A validated mig-parted config: ``version`` and ``configs`` (name -> entries)."""

    version: str
    configs: dict[str, tuple[MigConfigEntry, ...]]

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(self.configs)

    def to_dict(self) -> dict[str, Any]:
        return {
            "version": self.version,
            "mig-configs": {n: [e.to_dict() for e in es] for n, es in self.configs.items()},
        }


def _suggest_key(key: str, allowed: Sequence[str]) -> str:
    norm = str(key).replace("_", "-").lower()
    for a in allowed:
        if norm == a or norm.replace("-", "") == a.replace("-", ""):
            return f"write {a!r} instead"
    return "remove it; allowed keys: " + ", ".join(allowed)


def load_mig_config(data: Any) -> MigConfig:
    """Validate a mig-parted config (a mapping, or YAML/JSON text) and return ``MigConfig``.

    Rules (NVIDIA mig-parted ``api/spec/v1/spec.go``): top-level keys ``version`` (only
    ``v1``) and ``mig-configs`` (a non-empty mapping of name -> non-empty list of
    entries); entry keys ``devices`` (``all`` or a list of distinct GPU indices >= 0,
    required), ``mig-enabled`` (bool, required), ``mig-devices`` (profile -> count >= 0;
    empty or absent with ``mig-enabled: false``), ``device-filter`` (a PCI device ID such
    as ``0x233510DE`` or a list of them). Within one config no two entries may apply to the
    same GPU index unless their device filters are disjoint. Raises ``MigConfigError``
    naming the key, the value and the fix.
    """
    if isinstance(data, (str, bytes)):
        data = _load_text(data)
    if not isinstance(data, Mapping):
        raise MigConfigError(
            "(top level)",
            data,
            "a mig-parted config is a mapping",
            "write 'version: v1' and 'mig-configs:' at the top level",
        )
    for key in data:
        if key not in _TOP_KEYS:
            raise MigConfigError(str(key), data[key], "unknown key", _suggest_key(key, _TOP_KEYS))
    version = data.get("version")
    if version != "v1":
        raise MigConfigError(
            "version", version, "only version v1 of the format exists", "write 'version: v1'"
        )
    configs = data.get("mig-configs")
    if not isinstance(configs, Mapping) or not configs:
        raise MigConfigError(
            "mig-configs",
            configs,
            "must be a non-empty mapping of config name -> list of entries",
            "write e.g. 'mig-configs: {all-1g.18gb: [{devices: all, mig-enabled: true, "
            "mig-devices: {1g.18gb: 7}}]}'",
        )
    out: dict[str, tuple[MigConfigEntry, ...]] = {}
    for name, entries in configs.items():
        where = f"mig-configs.{name}"
        if not isinstance(name, str) or not name.strip():
            raise MigConfigError(where, name, "config names are non-empty strings", "rename it")
        if not isinstance(entries, list) or not entries:
            raise MigConfigError(
                where,
                entries,
                "must be a non-empty list of entries",
                "write a list: '- {devices: all, mig-enabled: false}'",
            )
        parsed = tuple(_entry(f"{where}[{i}]", e) for i, e in enumerate(entries))
        _check_overlap(where, parsed)
        out[name] = parsed
    return MigConfig(version="v1", configs=out)


def _load_text(text: str | bytes) -> Any:
    what = "the mig-parted config"
    try:
        text = ig.decode_text(text, what) if isinstance(text, bytes) else text
        try:
            return ig.load_json(text, what)
        except ig.ShapeError:
            raise
        except ig.InputError:
            return ig.load_yaml(text, what)  # YAML, or the reason it is neither
    except ig.InputError as exc:
        raise MigConfigError("(top level)", str(text)[:40], str(exc), "fix the file") from None


def _entry(where: str, raw: Any) -> MigConfigEntry:
    """One entry of a mig-parted config at ``where`` (its path in the file, for messages).
    Raises ``MigConfigError`` naming the key, the value, the rule and the fix."""
    if not isinstance(raw, Mapping):
        raise MigConfigError(
            where,
            raw,
            "an entry is a mapping",
            "write '{devices: all, mig-enabled: true, mig-devices: {...}}'",
        )
    for key in raw:
        if key not in _ENTRY_KEYS:
            raise MigConfigError(
                f"{where}.{key}", raw[key], "unknown key", _suggest_key(key, _ENTRY_KEYS)
            )
    if "devices" not in raw:
        raise MigConfigError(
            f"{where}.devices",
            None,
            "required key missing",
            "write 'devices: all' or 'devices: [0, 1]'",
        )
    devices = _entry_devices(where, raw["devices"])
    if "mig-enabled" not in raw:
        raise MigConfigError(
            f"{where}.mig-enabled",
            None,
            "required key missing",
            "write 'mig-enabled: true' or false",
        )
    enabled = raw["mig-enabled"]
    if not isinstance(enabled, bool):
        raise MigConfigError(
            f"{where}.mig-enabled",
            enabled,
            "must be a boolean",
            "write 'mig-enabled: true' or false",
        )
    mig_devices = _entry_mig_devices(where, raw.get("mig-devices", {}))
    if not enabled and any(mig_devices.values()):
        raise MigConfigError(
            f"{where}.mig-devices",
            mig_devices,
            "MIG devices cannot exist with mig-enabled: false",
            "set mig-enabled: true or remove mig-devices",
        )
    filt = _entry_device_filter(where, raw.get("device-filter"))
    return MigConfigEntry(devices, enabled, mig_devices, filt)


def _entry_devices(where: str, devices_raw: Any) -> str | tuple[int, ...]:
    """``devices`` of an entry: ``all`` or distinct GPU indices >= 0."""
    if devices_raw == "all":
        return "all"
    elif isinstance(devices_raw, list) and devices_raw:
        bad = [d for d in devices_raw if isinstance(d, bool) or not isinstance(d, int) or d < 0]
        if bad:
            raise MigConfigError(
                f"{where}.devices",
                devices_raw,
                f"GPU indices are integers >= 0, {bad[0]!r} is not",
                "write e.g. 'devices: [0, 1]' (nvidia-smi GPU indices) or 'devices: all'",
            )
        dups = sorted({d for d in devices_raw if devices_raw.count(d) > 1})
        if dups:
            raise MigConfigError(
                f"{where}.devices",
                devices_raw,
                f"GPU index {dups[0]} is listed twice",
                "list it once",
            )
        return tuple(devices_raw)
    else:
        raise MigConfigError(
            f"{where}.devices",
            devices_raw,
            "must be 'all' or a non-empty list of GPU indices",
            "write 'devices: all' or 'devices: [0, 1]'",
        )


def _entry_mig_devices(where: str, mig_devices_raw: Any) -> dict[str, int]:
    """``mig-devices`` of an entry: MIG profile -> count (0 to ``MAX_COUNT``); None is
    empty."""
    if mig_devices_raw is None:
        mig_devices_raw = {}
    if not isinstance(mig_devices_raw, Mapping):
        raise MigConfigError(
            f"{where}.mig-devices",
            mig_devices_raw,
            "must be a mapping of MIG profile -> count",
            "write e.g. 'mig-devices: {\"1g.18gb\": 7}'",
        )
    mig_devices: dict[str, int] = {}
    for prof, count in mig_devices_raw.items():
        key = f"{where}.mig-devices.{prof}"
        if not isinstance(prof, str) or parse_profile(prof.strip()) is None:
            raise MigConfigError(
                key,
                prof,
                "not a MIG profile name",
                "write a profile as nvidia-smi mig -lgip prints it without 'MIG ', e.g. "
                "1g.18gb, 1g.18gb+me, 3g.71gb",
            )
        if isinstance(count, bool) or not isinstance(count, int) or not 0 <= count <= MAX_COUNT:
            raise MigConfigError(
                key,
                count,
                f"the count must be an integer >= 0 and at most {MAX_COUNT}",
                f"write '{prof}: 1'",
            )
        mig_devices[prof.strip()] = count
    return mig_devices


def _entry_device_filter(where: str, filt_raw: Any) -> tuple[str, ...]:
    """``device-filter`` of an entry: PCI device IDs (``0x233510DE``); () when absent."""
    filt: tuple[str, ...] = ()
    if filt_raw is not None:
        items = [filt_raw] if isinstance(filt_raw, str) else filt_raw
        if not isinstance(items, list) or not items:
            raise MigConfigError(
                f"{where}.device-filter",
                filt_raw,
                "must be a PCI device ID or a non-empty list of them",
                "write e.g. 'device-filter: \"0x233510DE\"'",
            )
        for d in items:
            if not isinstance(d, str) or not _DEVICE_ID_RE.match(d):
                raise MigConfigError(
                    f"{where}.device-filter",
                    d,
                    "not a PCI device ID (device and vendor, 8 hex digits)",
                    "write it as nvidia-smi -q prints 'Device Id', e.g. 0x233510DE",
                )
        filt = tuple(items)
    return filt


def _check_overlap(where: str, entries: tuple[MigConfigEntry, ...]) -> None:
    for (i, a), (j, b) in itertools.combinations(enumerate(entries), 2):
        if a.devices == "all" or b.devices == "all":
            shared = a.devices if b.devices == "all" else b.devices
            shared_desc = "all GPUs" if shared == "all" else f"GPU(s) {list(shared)}"
        else:
            common = sorted(set(a.devices) & set(b.devices))
            if not common:
                continue
            shared_desc = f"GPU(s) {common}"
        fa = {d.lower() for d in a.device_filter}
        fb = {d.lower() for d in b.device_filter}
        if fa and fb and not (fa & fb):
            continue
        raise MigConfigError(
            f"{where}[{j}].devices",
            b.devices if b.devices == "all" else list(b.devices),
            f"entries {i} and {j} both apply to {shared_desc}",
            "give each GPU index to one entry, or give the entries disjoint device-filter lists",
        )


def select_entries(
    config: MigConfig,
    name: str,
    gpu_indices: Iterable[int],
    device_ids: Mapping[int, str] | str | None = None,
) -> dict[int, MigConfigEntry]:
    """The entry of config ``name`` that applies to each GPU index (GPUs no entry matches
    are absent: mig-parted leaves them alone).

    ``device_ids`` is one PCI device ID for all GPUs or a mapping index -> ID; it is needed
    only when an entry has a ``device-filter``. Raises ``MigConfigError`` for an unknown
    config name (listing the names), for a listed GPU index the node does not have, and
    for a device filter without device IDs.
    """
    if name not in config.configs:
        raise MigConfigError(
            "config name",
            name,
            "no such config in mig-configs",
            "choose one of: " + ", ".join(config.names),
        )
    indices = list(gpu_indices)
    present = set(indices)
    out: dict[int, MigConfigEntry] = {}
    for i, entry in enumerate(config.configs[name]):
        if entry.devices != "all":
            missing = [d for d in entry.devices if d not in present]
            if missing:
                raise MigConfigError(
                    f"mig-configs.{name}[{i}].devices",
                    list(entry.devices),
                    f"GPU index {missing[0]} does not exist on this node (GPUs: {sorted(present)})",
                    "list only the indices nvidia-smi -L shows, or use 'devices: all'",
                )
        for gpu in indices:
            did = device_ids.get(gpu) if isinstance(device_ids, Mapping) else device_ids
            if gpu not in out and entry.matches(gpu, did):
                out[gpu] = entry
    return out


def select_layout(
    config: MigConfig,
    name: str,
    gpu_indices: Iterable[int],
    device_ids: Mapping[int, str] | str | None = None,
) -> dict[int, dict[str, int]]:
    """Wanted ``{profile: count}`` per GPU index for config ``name``.

    A GPU whose entry has ``mig-enabled: false`` maps to ``{}`` (use ``select_entries``
    to tell that from MIG on without instances). Errors as ``select_entries``.
    """
    return {
        gpu: {k: v for k, v in e.mig_devices.items() if v}
        for gpu, e in select_entries(config, name, gpu_indices, device_ids).items()
    }
