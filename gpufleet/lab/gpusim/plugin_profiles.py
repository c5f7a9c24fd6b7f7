"""The MIG profile tables as the simulator's DRA kubelet plugin embeds them.

The Go plugin (``lab/gpu-simulator/kubelet-plugin``) publishes, in its dynamic MIG mode,
one device per MIG profile and placement of each GPU. It reads those profiles from
``internal/devices/migprofiles.json``, which this module writes from the collection's
tables (``plugins/module_utils/mig/tables.py`` through ``mig.profiles.MODELS``), so the
simulator, the planner and the plugin share one table. Regenerate after changing the
tables::

    python -m gpufleet.lab.gpusim.plugin_profiles          # write the file
    python -m gpufleet.lab.gpusim.plugin_profiles --check  # exit 1 when it is stale

Models without a sourced profile table are left out: the plugin then publishes such a
GPU without partitions.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from ansible_collections.gpufleet.cluster.plugins.module_utils.mig import profiles as mig_profiles

#: The embedded file, relative to the repository root.
RELATIVE_PATH = Path("lab/gpu-simulator/kubelet-plugin/internal/devices/migprofiles.json")


def document() -> dict:
    """The file's content: every built-in model with profiles, in ``MODELS`` order."""
    models = []
    for m in mig_profiles.MODELS.values():
        if not m.profiles:
            continue
        models.append(
            {
                "names": list(m.nvml_names),
                "architecture": m.architecture,
                "total_slices": m.total_slices,
                "profiles": [
                    {
                        "name": p.name,
                        "id": p.profile_id,
                        "slices": p.slices,
                        "memory_mib": p.memory_mib,
                        "multiprocessors": p.multiprocessors,
                        "copy_engines": p.copy_engines,
                        "decoders": p.decoders,
                        "encoders": p.encoders,
                        "jpeg_engines": p.jpeg_engines,
                        "ofa_engines": p.ofa_engines,
                        "placements": list(p.placements),
                    }
                    for p in m.profiles
                ],
            }
        )
    return {
        "generated_by": "python -m gpufleet.lab.gpusim.plugin_profiles "
        "(from plugins/module_utils/mig/tables.py); do not edit",
        "models": models,
    }


def render() -> str:
    """The file's text (stable: fixed key order, one trailing newline)."""
    return json.dumps(document(), indent=1) + "\n"


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    root = Path(__file__).resolve().parents[3]
    path = root / RELATIVE_PATH
    text = render()
    if args == ["--check"]:
        if not path.is_file() or path.read_text(encoding="utf-8") != text:
            print(f"{RELATIVE_PATH} is stale; run python -m gpufleet.lab.gpusim.plugin_profiles")
            return 1
        return 0
    if args:
        print("usage: python -m gpufleet.lab.gpusim.plugin_profiles [--check]", file=sys.stderr)
        return 2
    path.write_text(text, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
