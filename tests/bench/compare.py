"""Compare the results of scale benchmark runs at different fleet sizes: is the time of
each command linear in the objects, and its memory flat?

``python -m tests.bench.compare SMALL.json LARGE.json`` (files written by
``tests/bench/test_scale.py``, ``GPUFLEET_BENCH_RESULTS``) prints, per command, the
figures at each size and the ratios between them beside the ratio of the objects
(nodes, ResourceSlices, ResourceClaims and pods): wall time, requests, peak RSS, and the
floor and the ratio of wall time to it where both runs measured one. Exit 2 when a file
cannot be read.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

#: The figures compared, as (key in ``project``, title, format); the floor's two are
#: missing from results written before it was measured.
FIGURES = (
    ("wall_s", "wall s", "{:.2f}"),
    ("requests", "requests", "{:.0f}"),
    ("peak_rss_mib", "peak RSS MiB", "{:.0f}"),
    ("floor_s", "floor s", "{:.2f}"),
    ("ratio_to_floor", "wall/floor", "{:.1f}"),
)


def command(what: str) -> str:
    """The command a figure's ``what`` names: its first words up to the fleet size
    (``"validate 10000 GPU nodes ..."`` -> ``"validate"``)."""
    words = []
    for word in what.split():
        if word[:1].isdigit():
            break
        words.append(word)
    return " ".join(words) or what


def objects(doc: dict[str, Any]) -> int:
    """Objects of the fleet a run judged: nodes, their ResourceSlices (one each), claims,
    and pods (one per live claim and one plugin pod per node)."""
    nodes, claims, leaked = int(doc["nodes"]), int(doc["claims"]), int(doc["leaked"])
    return nodes + nodes + claims + (claims - leaked) + nodes


def compare(small: dict[str, Any], large: dict[str, Any]) -> list[dict[str, Any]]:
    """Per command present in both runs: its figures at each size and the ratio
    large/small of each, with ``objects_ratio``, the ratio of the fleets' objects. A
    figure missing from either run is left out of its row."""
    ratio = objects(large) / objects(small)
    before = {command(f["what"]): f for f in small["figures"]}
    out = []
    for fig in large["figures"]:
        name = command(fig["what"])
        if name not in before:
            continue
        a, b = before[name]["project"], fig["project"]
        row: dict[str, Any] = {"command": name, "objects_ratio": ratio}
        for key, _, _ in FIGURES:
            if a.get(key) is None or b.get(key) is None:
                continue
            row[key] = (a[key], b[key])
            row[f"{key}_ratio"] = b[key] / a[key] if a[key] else None
        out.append(row)
    return out


def render(small: dict[str, Any], large: dict[str, Any]) -> str:
    rows = compare(small, large)
    a, b = objects(small), objects(large)
    lines = [f"{small['nodes']} -> {large['nodes']} GPU nodes: objects x{b / a:.1f} ({a} -> {b})"]
    for row in rows:
        parts = []
        for key, title, fmt in FIGURES:
            if key not in row:
                continue
            a, b = row[key]
            r = row[f"{key}_ratio"]
            parts.append(
                f"{title} {fmt.format(a)} -> {fmt.format(b)}"
                + (f" (x{r:.1f})" if r is not None else "")
            )
        lines.append(f"  {row['command']}: " + "; ".join(parts))
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print("usage: python -m tests.bench.compare SMALL.json LARGE.json", file=sys.stderr)
        return 2
    try:
        docs = [json.loads(Path(p).read_text()) for p in argv]
    except (OSError, ValueError) as err:
        print(f"error: cannot read the results: {err}", file=sys.stderr)
        return 2
    print(render(*docs))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
