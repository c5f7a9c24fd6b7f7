#!/usr/bin/env python3
# Copyright: gpufleet contributors
# Apache License 2.0 (see LICENSE)
"""Read-only check of ``host.gpu_facts.collect_host`` on a real GPU host; prints JSON.

Runs both backends: nvidia-smi (the real program, through a runner that refuses every
command line except the read-only ones ``host.gpu_facts`` issues) and NVML when ``pynvml``
imports (``$GPUFLEET_NVML_PATH`` may name a directory or wheel to import it from). Never
changes MIG mode, creates or destroys instances, or resets a GPU.

Usage (from the repository root): ``python3 tests/unit/data/gpu/h200_device_check.py``;
raw nvidia-smi outputs go to ``$OUT/raw`` when ``$OUT`` is set.
"""

from __future__ import annotations

import importlib
import json
import os
import platform
import subprocess
import sys
import types
from pathlib import Path

ROOT = Path(__file__).resolve().parents[4]
# The collection's module_utils as the package they import each other from, without an
# installed collection: gpu_query imports gpu_info, nvidia_smi_parse and gpu_nvml.
PACKAGE = "ansible_collections.gpufleet.cluster.plugins.module_utils"
for depth in range(1, PACKAGE.count(".") + 2):
    name = ".".join(PACKAGE.split(".")[:depth])
    if name not in sys.modules:
        pkg = sys.modules[name] = types.ModuleType(name)
        pkg.__path__ = [str(ROOT / "plugins" / "module_utils")] if name == PACKAGE else []
gq = importlib.import_module(f"{PACKAGE}.gpu_query")
gnvml = importlib.import_module(f"{PACKAGE}.gpu_nvml")
ginfo = importlib.import_module(f"{PACKAGE}.gpu_info")

READ_ONLY = [
    ["-q", "-x"],
    ["-q"],
    [f"--query-gpu={gq.QUERY_FIELDS}", "--format=csv"],
    ["-L"],
    ["mig", "-lgi"],
    ["mig", "-lci"],
    ["topo", "-m"],
    ["nvlink", "-s"],
]
RAW = Path(os.environ["OUT"]) / "raw" if os.environ.get("OUT") else None
commands: list[dict] = []


def run(argv: list[str]) -> tuple[int, str, str]:
    if argv[1:] not in READ_ONLY:
        raise PermissionError(f"refused (not a read-only query): {argv}")
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=120, check=False)
    commands.append({"argv": argv[1:], "rc": proc.returncode, "stdout_bytes": len(proc.stdout)})
    if RAW:
        RAW.mkdir(parents=True, exist_ok=True)
        name = "_".join(a.lstrip("-").split("=")[0] for a in argv[1:]) or "plain"
        (RAW / f"{name}.txt").write_text(proc.stdout + proc.stderr + f"[exit {proc.returncode}]\n")
    return proc.returncode, proc.stdout, proc.stderr


def result(backend: str) -> dict:
    try:
        host = gq.collect_host(run, backend, "nvidia-smi")
    except ginfo.GpuQueryError as err:
        return {"error": f"{type(err).__name__}: {err}"}
    return {
        "backend": host.backend,
        "driver_version": host.driver_version,
        "cuda_driver_version": host.cuda_driver_version,
        "warnings": host.warnings,
        "gpus": [g.to_dict() for g in host.gpus],
    }


def main() -> int:
    extra = os.environ.get("GPUFLEET_NVML_PATH")
    if extra:
        sys.path.insert(0, extra)
    nv = gnvml.load_nvml()
    out = {
        "python": platform.python_version(),
        "pynvml": getattr(nv, "__file__", None),
        "nvidia-smi": result("nvidia-smi"),
        "nvml": result("nvml") if nv else {"error": "pynvml not importable"},
        "commands": commands,
    }
    print(json.dumps(out, indent=2, sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())
