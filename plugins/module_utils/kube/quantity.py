# Copyright: gpufleet contributors
# Apache License 2.0 (see LICENSE)
"""Kubernetes quantities (``k8s.io/apimachinery/pkg/api/resource``): ``16Gi``, ``500m``,
``1e3`` parsed exactly (``parse_quantity``), and what ``Quantity.AsInt64`` gives for one
(``quantity_int64``). Standard library only: node capacities, pod requests and CEL's
quantity library all read them.

A quantity is computed exactly, so its size is bounded: at most ``MAX_DIGITS`` digits and a
decimal exponent of at most ``MAX_EXPONENT`` either way (``1e999999999`` would take minutes
and gigabytes to compute; Kubernetes documents 2^63-1 as the largest quantity,
``quantity.go``). Larger ones are refused as QuantityError."""

from __future__ import annotations

import re
from fractions import Fraction
from typing import Any

__all__ = ["QuantityError", "parse_quantity", "quantity_int64"]


class QuantityError(ValueError):
    """A text that is not a Kubernetes quantity; ``str()`` names it."""


#: The most digits of a quantity's number, and the largest decimal exponent (its ``e``
#: suffix) either way, that ``parse_quantity`` computes.
MAX_DIGITS = 1000
MAX_EXPONENT = 1000


_QUANTITY_RE = re.compile(
    r"^([+-]?(?:\d+\.?\d*|\.\d+))(Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE]|[eE][+-]?\d+)?$", re.ASCII
)
_BINARY = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}
_DECIMAL = {
    "n": Fraction(1, 10**9),
    "u": Fraction(1, 10**6),
    "m": Fraction(1, 10**3),
    "": Fraction(1),
    "k": Fraction(10**3),
    "M": Fraction(10**6),
    "G": Fraction(10**9),
    "T": Fraction(10**12),
    "P": Fraction(10**15),
    "E": Fraction(10**18),
}


def parse_quantity(text: Any) -> Fraction:
    """A Kubernetes quantity (``"16Gi"``, ``"500m"``, ``"1e3"``, ``"143771Mi"``) as an exact
    Fraction in base units. Raises QuantityError naming the text when it is not a quantity
    (``resource.ParseQuantity``)."""
    if isinstance(text, bool):
        raise QuantityError(f"quantity {text!r} is not a Kubernetes quantity")
    if isinstance(text, int):
        return Fraction(text)
    m = _QUANTITY_RE.match(str(text).strip())
    if not m:
        raise QuantityError(
            f"{text!r} is not a Kubernetes quantity (e.g. 16Gi, 500m, 1e3): "
            "resource.ParseQuantity refuses it"
        )
    suffix = m.group(2) or ""
    scientific = suffix[:1] in ("e", "E") and suffix not in _BINARY and suffix not in _DECIMAL
    exponent = suffix[1:].lstrip("+-").lstrip("0") if scientific else ""
    digits = len(m.group(1).lstrip("+-").replace(".", ""))
    if (
        digits > MAX_DIGITS
        or len(exponent) > len(str(MAX_EXPONENT))
        or (exponent and int(exponent) > MAX_EXPONENT)
    ):
        shown = str(text) if len(str(text)) <= 40 else str(text)[:40] + "..."
        raise QuantityError(
            f"{shown!r} is beyond the quantities read here (at most {MAX_DIGITS} "
            f"digits and an exponent of at most {MAX_EXPONENT}); Kubernetes documents 2^63-1 as "
            "the largest quantity"
        )
    number = Fraction(m.group(1))
    if suffix in _BINARY:
        return number * _BINARY[suffix]
    if suffix in _DECIMAL:
        return number * _DECIMAL[suffix]
    return number * Fraction(10) ** int(suffix[1:])


_SUFFIX_RE = re.compile(r"^(Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE]|[eE][+-]?\d{1,12})?$", re.ASCII)
_BINARY_EXP = {"Ki": 10, "Mi": 20, "Gi": 30, "Ti": 40, "Pi": 50, "Ei": 60}
_DECIMAL_EXP = {"n": -9, "u": -6, "m": -3, "": 0, "k": 3, "M": 6, "G": 9, "T": 12}
_DECIMAL_EXP.update({"P": 15, "E": 18})


def quantity_int64(text: str) -> int | None:
    """What ``Quantity.AsInt64`` gives for a quantity parsed from ``text``: the integer, or
    None where Kubernetes cannot (``k8s.io/apimachinery/pkg/api/resource/quantity.go``:
    ``ParseQuantity`` keeps a mantissa and a decimal scale in an int64 only on its fast
    path, with at most 18 digits (binary suffixes: 15 less about 3 per 10 bits), else an
    inf.Dec; ``int64Amount.AsInt64`` refuses a negative scale, such as ``1000m``, and an
    overflow). Quantities from ``add``/``sub`` are not covered."""
    t = str(text).strip()
    if t == "0":
        return 0
    m = re.match(r"^([+-]?)0*(\d*)(?:\.(\d*))?(.*)$", t, re.ASCII)
    if not m or not _SUFFIX_RE.match(m.group(4)):
        return None
    negative, num, denom, suffix = (
        m.group(1) == "-",
        m.group(2) or "0",
        m.group(3) or "",
        m.group(4),
    )
    mantissa = 1
    if suffix in _BINARY_EXP:
        exponent = _BINARY_EXP[suffix]
        if denom:
            return None
        mantissa = 1 << exponent
        precision = 15 - len(num) - int(exponent * 3 / 10) - 1
        scale = 0
    else:
        scale = _DECIMAL_EXP[suffix] if suffix in _DECIMAL_EXP else int(suffix[1:])
        precision = 18 - (len(num) + len(denom))
    if precision < 0:
        return None
    scale -= len(denom)
    if scale < -9:
        return None
    value = int(num + denom) * mantissa
    if value >= 2**63:
        return None
    value = -value if negative else value
    if scale < 0:
        return None
    if scale > 18:  # beyond int64 (and 10**scale would be computed for nothing)
        return 0 if value == 0 else None
    value *= 10**scale
    return value if -(2**63) <= value < 2**63 else None
