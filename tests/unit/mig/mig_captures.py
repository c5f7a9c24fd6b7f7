"""``nvidia-smi mig -lgip`` and ``-lgipp`` text in the layout the driver prints, built from
rows: the captures the hostile tests and the capture-planning benchmark feed to
``mig.profiles.model_from_nvidia_smi`` (real rows from ``tests/unit/data/gpu/``, hostile
ones made here)."""

from __future__ import annotations

from dataclasses import dataclass

_RULE = "+" + "-" * 79 + "+"


@dataclass(frozen=True)
class Row:
    """One GPU-instance profile as ``-lgip`` and ``-lgipp`` print it (engines per GI)."""

    name: str
    profile_id: int
    total: int
    size: int
    starts: tuple[int, ...]
    gib: float = 10.0
    sm: int = 16
    dec: int = 0
    enc: int = 0
    ce: int = 1
    jpeg: int = 0
    ofa: int = 0


def lgip(rows: list[Row], gpu: int = 0) -> str:
    """``nvidia-smi mig -lgip`` of ``rows`` on GPU ``gpu``."""
    out = [
        _RULE,
        "| GPU instance profiles:" + " " * 56 + "|",
        "| GPU   Name               ID    Instances   Memory     P2P    SM    DEC   ENC  |",
        "|                                Free/Total   GiB              CE    JPEG  OFA  |",
        "|" + "=" * 79 + "|",
    ]
    for r in rows:
        out.append(
            f"|  {gpu:>2}  MIG {r.name:<15}{r.profile_id:>4}     {r.total}/{r.total}"
            f"       {r.gib:>7.2f}      No    {r.sm:>3}    {r.dec:>2}    {r.enc:>2}   |"
        )
        out.append(f"|{' ' * 59}{r.ce:>4}  {r.jpeg:>4}  {r.ofa:>4}   |")
        out.append(_RULE)
    return "\n".join(out) + "\n"


def lgipp(rows: list[Row], gpu: int = 0) -> str:
    """``nvidia-smi mig -lgipp`` of ``rows`` on GPU ``gpu``."""
    return "".join(
        f"GPU  {gpu} Profile ID {r.profile_id:>2} Placements: "
        f"{{{','.join(str(s) for s in r.starts)}}}:{r.size}\n"
        for r in rows
    )


def hostile_rows(slices: int = 64, kinds: int = 48) -> list[Row]:
    """A geometry no NVIDIA GPU has, at the bounds the parser accepts: ``slices`` memory
    slices, ``kinds`` profiles of 1, 2 and 3 slices that may start on every second slice
    (so odd slices fragment), each with engines, and one full-GPU profile holding all."""
    rows = []
    for k in range(kinds):
        size = 1 + k % 3
        rows.append(
            Row(
                name=f"{size}g.{10 + k}gb",
                profile_id=20 + k,
                total=slices,
                size=size,
                starts=tuple(range(k % 2, slices - size + 1, 2)),
                dec=size,
                ce=size,
                jpeg=1,
            )
        )
    rows.append(Row("8g.999gb", 0, 1, slices, (0,), dec=slices, ce=slices, jpeg=slices, ofa=1))
    return rows
