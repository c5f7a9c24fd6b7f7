"""CDI specs for the judgement of ``nvidia.cdi_spec``: the two real ``nvidia-ctk`` 1.20.2
specs of the h200-single host (tests/unit/data/gpu/h200-single/) and hand-broken variants
of the real one, each with the verdict of the CDI library itself
(``tags.cncf.io/container-device-interface`` v1.1.1 ``cdi.ReadSpec``, through
``lab/go/cdispec``; tests/integration/test_cdi_spec_library.py checks these verdicts
against the library on every run there)."""

from __future__ import annotations

import copy
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

DATA = Path(__file__).resolve().parents[1] / "data" / "gpu" / "h200-single"
REAL = DATA / "cdi-nvidia-ctk-1.20.2.yaml"
NO_DEV = DATA / "cdi-nvidia-ctk-1.20.2-driver-root-no-dev.yaml"
UUID = "GPU-1f6a9c2e-0b4d-4e8a-9c3f-5d2e7a1b8c90"


def load(path: Path) -> dict[str, Any]:
    return yaml.safe_load(path.read_text())


def _edit(change: Callable[[dict[str, Any]], None]) -> Callable[[], dict[str, Any]]:
    def build() -> dict[str, Any]:
        spec = copy.deepcopy(load(REAL))
        change(spec)
        return spec

    return build


def _dev(spec: dict[str, Any], i: int = 0) -> dict[str, Any]:
    return spec["devices"][i]


def _node(spec: dict[str, Any], **fields: Any) -> None:
    _dev(spec)["containerEdits"]["deviceNodes"][0].update(fields)


def _set(d: dict[str, Any], key: str, value: Any) -> None:
    d[key] = value


#: id -> (spec builder, the library loads it, GPU problems expected with every node present)
VARIANTS: dict[str, tuple[Callable[[], dict[str, Any]], bool, bool]] = {
    "real-nvidia-ctk": (lambda: load(REAL), True, False),
    "nvidia-ctk-driver-root-no-dev": (lambda: load(NO_DEV), True, True),
    "empty-device-edits": (_edit(lambda s: _set(_dev(s), "containerEdits", {})), False, True),
    "no-device-edits": (_edit(lambda s: _dev(s).pop("containerEdits")), False, True),
    "device-nodes-removed": (
        _edit(lambda s: _dev(s)["containerEdits"].pop("deviceNodes")),
        True,
        True,
    ),
    "control-node-removed": (
        _edit(
            lambda s: _set(
                s["containerEdits"],
                "deviceNodes",
                [n for n in s["containerEdits"]["deviceNodes"] if n["path"] != "/dev/nvidiactl"],
            )
        ),
        True,
        True,
    ),
    "no-devices": (_edit(lambda s: _set(s, "devices", [])), False, True),
    "name-starts-with-dash": (_edit(lambda s: _set(_dev(s), "name", "-0")), False, False),
    "name-with-space": (_edit(lambda s: _set(_dev(s), "name", "gpu 0")), False, False),
    "name-ends-with-dot": (_edit(lambda s: _set(_dev(s), "name", "gpu0.")), False, False),
    "duplicate-name": (_edit(lambda s: _set(_dev(s, 1), "name", "0")), False, False),
    "kind-without-class": (_edit(lambda s: _set(s, "kind", "nvidia.com")), False, False),
    "kind-with-two-slashes": (_edit(lambda s: _set(s, "kind", "nvidia.com/gpu/x")), False, False),
    "vendor-starts-with-digit": (_edit(lambda s: _set(s, "kind", "1nvidia.com/gpu")), False, False),
    "unknown-version": (_edit(lambda s: _set(s, "cdiVersion", "9.9.9")), False, False),
    "version-with-v-prefix": (_edit(lambda s: _set(s, "cdiVersion", "v0.5.0")), True, False),
    "version-too-old-for-digit-names": (
        _edit(lambda s: _set(s, "cdiVersion", "0.4.0")),
        False,
        False,
    ),
    "annotations-need-0.6.0": (
        _edit(lambda s: _set(s, "annotations", {"a": "b"})),
        False,
        False,
    ),
    "empty-device-path": (_edit(lambda s: _node(s, path="")), False, True),
    "bad-device-type": (_edit(lambda s: _node(s, type="x")), False, False),
    "bad-permissions": (_edit(lambda s: _node(s, permissions="rwx")), False, False),
    "unknown-device-node-field": (_edit(lambda s: _node(s, hostpath="/dev/nvidia0")), False, False),
    "bad-hook-name": (
        _edit(lambda s: _set(_dev(s)["containerEdits"]["hooks"][0], "hookName", "preStart")),
        False,
        False,
    ),
    "hook-without-path": (
        _edit(lambda s: _set(_dev(s)["containerEdits"]["hooks"][0], "path", "")),
        False,
        False,
    ),
    "bad-env": (_edit(lambda s: _set(s["containerEdits"], "env", ["=void"])), False, False),
    "mount-without-container-path": (
        _edit(lambda s: _set(s["containerEdits"]["mounts"][0], "containerPath", "")),
        False,
        False,
    ),
    "unknown-edits-field": (
        _edit(lambda s: _set(_dev(s)["containerEdits"], "deviceNode", [])),
        False,
        False,
    ),
    "unknown-spec-field": (_edit(lambda s: _set(s, "device", [])), False, False),
    "host-path-elsewhere": (_edit(lambda s: _node(s, hostPath="/dev/nvidia7")), True, False),
}
