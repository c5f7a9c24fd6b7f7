# Copyright: gpufleet contributors
# Apache License 2.0 (see LICENSE)
"""CEL for DRA device selectors: the expressions the builders write
(``cel_mig_profile``, ``cel_memory_at_least``, ``memory_quantity``), the selector
suggested for a plausible wrong shape (``suggest_cel``), and the check of an expression
(``check_cel``).

What the CEL check covers. The verdict on an expression is Kubernetes' (``cel.verdicts``:
the Python environment held to ``k8s.io/dynamic-resource-allocation/cel`` of each pinned
release by the differential tests, or a verdict of that library itself passed in as
``judge``): an error when kube-apiserver refuses it, ``cannot-judge`` when the Python
environment cannot say offline (optional syntax, functions it does not implement), never a
guess. An expression Kubernetes refuses gets the most helpful message found: an
undeclared variable, a ``device`` field other than ``driver``, ``attributes``,
``capacity``, ``allowMultipleAllocations``, an ordering operator applied to a capacity (a
``Quantity``: use ``compareTo``), or Kubernetes' own words. Attribute and capacity names of
``gpu.nvidia.com`` that the NVIDIA DRA driver does not publish (or no longer publishes,
such as ``index``) are warnings: the API accepts them, but the selector never matches.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any

from ansible_collections.gpufleet.cluster.plugins.module_utils.cel import verdicts as dra_cel
from ansible_collections.gpufleet.cluster.plugins.module_utils.claims import metadata as cm
from ansible_collections.gpufleet.cluster.plugins.module_utils.claims.metadata import (
    ClaimTemplateError,
)
from ansible_collections.gpufleet.cluster.plugins.module_utils.claims.problems import (
    ERROR,
    UNJUDGED,
    WARNING,
)
from ansible_collections.gpufleet.cluster.plugins.module_utils.dra import cel_env as dra_cel_env
from ansible_collections.gpufleet.cluster.plugins.module_utils.dra_driver.chart import (
    NVIDIA_DRIVER,
)
from ansible_collections.gpufleet.cluster.plugins.module_utils.dra_driver.classes import (
    ATTRIBUTE_KEYS,
    CAPACITY_KEYS,
    MEMORY_SLICE_RE,
    REMOVED_ATTRIBUTE_KEYS,
)
from ansible_collections.gpufleet.cluster.plugins.module_utils.mig.profiles import parse_profile

__all__ = [
    "cel_memory_at_least",
    "cel_memory_compare",
    "cel_mig_profile",
    "check_cel",
    "suggest_cel",
]


# --------------------------------------------------------------------------------------
# CEL snippets
# --------------------------------------------------------------------------------------


def cel_string(value: str) -> str:
    return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"


def cel_mig_profile(profile: str) -> str:
    """``device.attributes['gpu.nvidia.com'].profile == '1g.18gb'``.

    Raises ClaimTemplateError when ``profile`` is not a MIG profile name as nvidia-smi prints
    it (``<n>g.<m>gb`` with an optional ``+me``/``+gfx``/``-me``/``+me.all`` suffix).
    """
    if not isinstance(profile, str) or parse_profile(profile) is None:
        raise ClaimTemplateError(
            f"profile={profile!r} is not a MIG profile name.",
            "give the name nvidia-smi mig -lgip prints, e.g. 1g.18gb (H200), 3g.40gb "
            "(H100 80GB), 1g.10gb+me.",
        )
    return f"device.attributes['{NVIDIA_DRIVER}'].profile == {cel_string(profile)}"


def memory_quantity(min_gib: float | int | str, name: str = "min_gib") -> str:
    """A memory size in GiB as a Kubernetes quantity: 40 -> ``"40Gi"``, 40.5 ->
    ``"41472Mi"``. The driver publishes GPU memory in bytes as a BinarySI quantity
    (nvmlDeviceGetMemoryInfo total; MIG: memorySizeMB * 2^20). Raises ClaimTemplateError
    for a value that is not a positive number."""
    try:
        gib = float(min_gib)
    except (TypeError, ValueError):
        gib = float("nan")
    if isinstance(min_gib, bool) or not 1 / 1024 <= gib <= cm.MAX_MEMORY_GIB:  # NaN too
        raise ClaimTemplateError(
            f"{name}={str(min_gib)[:40]} is not a positive number of GiB up to "
            f"{cm.MAX_MEMORY_GIB} (1 MiB at least; no GPU has more than {cm.MAX_MEMORY_GIB} GB).",
            "give the smallest GPU memory the workload needs in GiB, e.g. 40.",
        )
    if gib.is_integer():
        return f"{int(gib)}Gi"
    return f"{round(gib * 1024)}Mi"


def cel_memory_at_least(min_gib: float | int | str) -> str:
    """``device.capacity['gpu.nvidia.com'].memory.compareTo(quantity('40Gi')) >= 0``
    (a capacity is a Quantity: compare with compareTo, not with ``>=``)."""
    return (
        f"device.capacity['{NVIDIA_DRIVER}'].memory.compareTo("
        f"quantity('{memory_quantity(min_gib)}')) >= 0"
    )


def cel_memory_compare(quantity: str, op: str) -> str:
    """``device.capacity['gpu.nvidia.com'].memory.compareTo(quantity('20Gi')) >= 0`` for
    ``op`` one of ``>=``, ``<=``; ``quantity`` is a Kubernetes quantity the caller checked
    (``templates.check_min_memory``). Raises ValueError for another operator."""
    if op not in (">=", "<="):
        raise ValueError(f"op={op!r} is not >= or <=")
    return f"device.capacity['{NVIDIA_DRIVER}'].memory.compareTo(quantity('{quantity}')) {op} 0"


MEMORY_EXAMPLE = cel_memory_at_least(40)


SELECTOR_EXAMPLE = f'selectors: [{{cel: {{expression: "{MEMORY_EXAMPLE}"}}}}]'


def selectors_text(expression: str) -> str:
    return f'selectors: [{{cel: {{expression: "{expression}"}}}}]'


_VALUE_RE = re.compile(r"^\s*(>=|=>|>|<=|=<|<|==|=)?\s*(\d+(?:\.\d+)?)\s*([A-Za-z]*)\s*$")


_OP_MAP = {
    ">=": ">=",
    "=>": ">=",
    ">": ">",
    "<=": "<=",
    "=<": "<=",
    "<": "<",
    "==": "==",
    "=": "==",
}


_UNIT_TO_SUFFIX = {
    "": "Gi",
    "g": "Gi",
    "gb": "Gi",
    "gib": "Gi",
    "gi": "Gi",
    "m": "Mi",
    "mb": "Mi",
    "mib": "Mi",
    "mi": "Mi",
    "t": "Ti",
    "tb": "Ti",
    "tib": "Ti",
    "ti": "Ti",
}


def _memory_unit_from_key(key: str) -> str:
    low = key.lower()
    for unit in ("gib", "gb", "mib", "mb", "tib", "tb"):
        if low.endswith(unit):
            return unit
    return ""


def suggest_cel(mapping: Mapping[str, Any], domain: str = NVIDIA_DRIVER) -> str:
    """Turn a made-up ``attributes:``-style map into the CEL expression that means it.

    ``{memoryGB: ">=40"}`` -> ``device.capacity['gpu.nvidia.com'].memory.compareTo(
    quantity('40Gi')) >= 0`` (GPU "GB" are GiB: the driver publishes BinarySI bytes);
    ``{productName: "NVIDIA H200"}`` -> ``device.attributes['gpu.nvidia.com'].productName ==
    'NVIDIA H200'``; a capacity key with a number (``multiprocessors: ">=16"``) -> a
    ``compareTo(quantity('16'))``. Clauses are joined with ``&&``.
    """
    clauses = []
    for key, raw in mapping.items():
        key_s = str(key)
        low = key_s.lower()
        value = raw
        if isinstance(raw, Mapping) and len(raw) == 1:
            # {memory: {min: 40}} or {memory: {">=": 40}}
            op_key, value = next(iter(raw.items()))
            value = f"{'>=' if str(op_key).lower() in ('min', 'gte', '>=') else op_key}{value}"
        match = _VALUE_RE.match(str(value)) if not isinstance(value, bool) else None
        if "mem" in low and match:
            op = _OP_MAP[match.group(1) or ">="]
            unit = (match.group(3) or _memory_unit_from_key(key_s)).lower()
            suffix = _UNIT_TO_SUFFIX.get(unit, "Gi")
            clauses.append(
                f"device.capacity['{domain}'].memory.compareTo(quantity('{match.group(2)}"
                f"{suffix}')) {op} 0"
            )
        elif key_s in CAPACITY_KEYS and match:
            op = _OP_MAP[match.group(1) or ">="]
            clauses.append(
                f"device.capacity['{domain}'].{key_s}.compareTo(quantity('{match.group(2)}"
                f"')) {op} 0"
            )
        elif isinstance(value, bool):
            clauses.append(f"device.attributes['{domain}'].{key_s} == {str(value).lower()}")
        elif isinstance(value, int | float):
            clauses.append(f"device.attributes['{domain}'].{key_s} == {value}")
        elif isinstance(value, list | tuple):
            items = ", ".join(cel_string(str(v)) for v in value)
            clauses.append(f"device.attributes['{domain}'].{key_s} in [{items}]")
        else:
            clauses.append(f"device.attributes['{domain}'].{key_s} == {cel_string(str(value))}")
    return " && ".join(clauses) if clauses else MEMORY_EXAMPLE


# ---- CEL


_DEVICE_FIELDS = ("driver", "attributes", "capacity", "allowMultipleAllocations")


_MACROS = frozenset({"all", "exists", "exists_one", "map", "filter"})


#: Ordering operators: Kubernetes' Quantity type has none (k8s.io/apiserver/pkg/cel/library/
#: quantity.go offers isLessThan, isGreaterThan, compareTo instead).
_ORDER_OPS = {"relation_lt": "<", "relation_le": "<=", "relation_gt": ">", "relation_ge": ">="}


_COMPARE_OPS = {"<": "< 0", "<=": "<= 0", ">": "> 0", ">=": ">= 0"}


_FLIP = {"<": ">", "<=": ">=", ">": "<", ">=": "<="}


def _celpy():
    try:
        import celpy  # type: ignore[import-not-found]
    except ImportError as exc:  # pragma: no cover - declared dependency
        raise RuntimeError(
            "the CEL checker needs the cel-python package (import name celpy); install it "
            "with: pip install 'cel-python>=0.4,<0.6'"
        ) from exc
    return celpy


def _token_text(node: Any) -> str | None:
    """The text of a tree node that is a single token (ident, field name)."""
    from lark import Token

    if isinstance(node, Token):
        return str(node)
    return None


def _unwrap(node: Any) -> Any:
    """Descend through single-child wrapper nodes (expr -> ... -> member)."""
    from lark import Tree

    while (
        isinstance(node, Tree)
        and len(node.children) == 1
        and isinstance(node.children[0], Tree)
        and node.data
        in {
            "expr",
            "conditionalor",
            "conditionaland",
            "relation",
            "addition",
            "multiplication",
            "unary",
            "member",
            "primary",
            "paren_expr",
        }
    ):
        node = node.children[0]
    return node


def _chain(node: Any) -> list[str] | None:
    """A member chain rooted at an identifier as a list: ``device.capacity['x'].memory`` ->
    ``['device', 'capacity', "['x']", 'memory']``; None for anything else (a call...)."""
    from lark import Tree

    node = _unwrap(node)
    if not isinstance(node, Tree):
        return None
    if node.data == "ident":
        text = _token_text(node.children[0])
        return [text] if text else None
    if node.data == "member_dot":
        inner = _chain(node.children[0])
        name = _token_text(node.children[1])
        return [*inner, name] if inner is not None and name else None
    if node.data == "member_index":
        inner = _chain(node.children[0])
        key = _unwrap(node.children[1])
        if inner is None:
            return None
        if isinstance(key, Tree) and key.data == "literal":
            lit = _token_text(key.children[0]) or ""
            return [*inner, f"[{lit}]"]
        return [*inner, "[?]"]
    return None


def _literal_key(part: str) -> str | None:
    """``"['gpu.nvidia.com']"`` -> ``"gpu.nvidia.com"``; None when not a string literal."""
    if len(part) >= 4 and part[0] == "[" and part[-1] == "]" and part[1] in "'\"":
        inner = part[1:-1]
        if inner[0] == inner[-1]:
            return inner[1:-1]
    return None


Judge = Callable[[str], "dra_cel.Verdict"]


def check_cel(expression: Any, judge: Judge | None = None) -> list[tuple[str, str]]:
    """Check one DRA selector expression; returns ``[(severity, message)]``, empty when
    nothing was found. ``judge``: the compile verdict of an expression (default
    ``cel.verdicts.judge``, Kubernetes 1.36+ defaults); see the module docstring."""
    if not isinstance(expression, str) or not expression.strip():
        return [
            (
                ERROR,
                f"expression {expression!r} is not a non-empty CEL string; use "
                + selectors_text(MEMORY_EXAMPLE),
            )
        ]
    verdict = (judge or dra_cel.judge)(expression)
    if verdict.verdict == dra_cel.CANNOT_JUDGE:
        return [
            (
                UNJUDGED,
                f"{verdict.message}; Kubernetes' own CEL environment judges it: build it "
                f"with `python -m gpufleet.build.celcheck build` (1.{dra_cel_env.OLDEST_MINOR} "
                "and newer) and check "
                "again, or ask the cluster's API server (`kubectl apply --dry-run=server`)",
            )
        ]
    celpy = _celpy()
    try:
        tree = celpy.Environment().compile(expression)
    except Exception as exc:  # celpy raises CELParseError (and lark errors) on bad syntax
        if verdict.verdict == dra_cel.OK:
            return []  # Kubernetes compiles it: nothing more to say
        first = str(exc).strip().splitlines()
        detail = " ".join(line.strip() for line in first if line.strip())[:300]
        return [
            (
                ERROR,
                f"CEL expression {expression!r} does not parse ({detail}); a DRA selector is "
                "a boolean CEL expression over `device`, e.g. " + MEMORY_EXAMPLE,
            )
        ]
    found = _lint(tree)
    if verdict.verdict == dra_cel.OK:
        return [f for f in found if f[0] != ERROR]
    if not any(f[0] == ERROR for f in found):
        detail = " ".join(verdict.message.split())[:400]
        found.insert(
            0,
            (
                ERROR,
                f"Kubernetes refuses CEL expression {expression!r}: {detail}; a DRA selector "
                "is a boolean CEL expression over `device`, e.g. " + MEMORY_EXAMPLE,
            ),
        )
    return found


def _macro_variables(tree: Any) -> set[str]:
    """The variables a macro binds in the parse tree (``x`` of ``.exists(x, ...)``)."""
    from lark import Tree

    bound: set[str] = set()
    for node in tree.iter_subtrees():
        if node.data == "member_dot_arg" and len(node.children) >= 3:
            method = _token_text(node.children[1])
            args = node.children[2]
            if method in _MACROS and isinstance(args, Tree) and args.children:
                chain = _chain(args.children[0])
                if chain and len(chain) == 1:
                    bound.add(chain[0])
    return bound


def _quantity_on_the_right(tree: Any) -> list[tuple[str, str]]:
    """Errors for a capacity Quantity on the right of an order operator
    (``40 <= device.capacity[...].memory``)."""
    from lark import Tree

    out: list[tuple[str, str]] = []
    # The right operand is the second child of the parent relation: `40 <= device.capacity..`
    for node in tree.iter_subtrees():
        if node.data == "relation" and len(node.children) == 2:
            op_node, right = node.children
            if isinstance(op_node, Tree) and op_node.data in _ORDER_OPS:
                chain = _chain(right)
                if chain and len(chain) >= 4 and chain[:2] == ["device", "capacity"]:
                    op = _ORDER_OPS[op_node.data]
                    key = _literal_key(chain[2]) or NVIDIA_DRIVER
                    out.append(
                        (
                            ERROR,
                            f"capacity {'.'.join(chain[3:])} is a Quantity: `{op}` does not "
                            "apply to it (Kubernetes: no matching overload); compare with "
                            f"device.capacity['{key}'].{'.'.join(chain[3:])}"
                            f".compareTo(quantity('40Gi')) {_COMPARE_OPS[_FLIP[op]]}",
                        )
                    )
    return out


def _lint(tree: Any) -> list[tuple[str, str]]:
    """The linter's findings on a parse tree: errors that explain a refusal, warnings."""
    found: list[tuple[str, str]] = []
    bound = _macro_variables(tree)
    seen: set[str] = set()
    for node in tree.iter_subtrees_topdown():
        if node.data == "ident":
            name = _token_text(node.children[0])
            if name and name != "device" and name not in bound and name not in seen:
                seen.add(name)
                found.append(
                    (
                        ERROR,
                        f"CEL expression uses undeclared variable {name!r}: a DRA selector "
                        "sees only `device` (driver, attributes, capacity), e.g. "
                        + (
                            MEMORY_EXAMPLE
                            if "mem" in name.lower()
                            else f"device.attributes['{NVIDIA_DRIVER}'].{name} == '...'"
                        ),
                    )
                )
        elif node.data == "member_dot":
            chain = _chain(node)
            if (
                chain
                and len(chain) == 2
                and chain[0] == "device"
                and chain[1] not in _DEVICE_FIELDS
            ):
                found.append(
                    (
                        ERROR,
                        f"`device` has no field {chain[1]!r} (fields: "
                        f"{', '.join(_DEVICE_FIELDS)}); attributes are "
                        f"device.attributes['{NVIDIA_DRIVER}'].<name>, capacities "
                        f"device.capacity['{NVIDIA_DRIVER}'].<name>",
                    )
                )
            elif (
                chain
                and len(chain) == 3
                and chain[0] == "device"
                and chain[1]
                in (
                    "attributes",
                    "capacity",
                )
            ):
                found.append(
                    (
                        WARNING,
                        f"device.{chain[1]}.{chain[2]} looks up a domain named {chain[2]!r}: "
                        f"{chain[1]} are grouped by domain, use device.{chain[1]}"
                        f"['{NVIDIA_DRIVER}'].{chain[2]}",
                    )
                )
            if chain and len(chain) == 4 and chain[0] == "device":
                found.extend(_check_key(chain[1], _literal_key(chain[2]), chain[3]))
        elif node.data in _ORDER_OPS:
            op = _ORDER_OPS[node.data]
            # relation_xx(left relation, right addition): left is the first child
            for side in node.children[:1]:
                chain = _chain(side)
                if chain and len(chain) >= 4 and chain[:2] == ["device", "capacity"]:
                    key = _literal_key(chain[2]) or NVIDIA_DRIVER
                    found.append(
                        (
                            ERROR,
                            f"capacity {'.'.join(chain[3:])} is a Quantity: `{op}` does not "
                            "apply to it (Kubernetes: no matching overload); compare with "
                            f"device.capacity['{key}'].{'.'.join(chain[3:])}"
                            f".compareTo(quantity('40Gi')) {_COMPARE_OPS[op]}",
                        )
                    )
    found.extend(_quantity_on_the_right(tree))
    return found


def _check_key(field_name: str, domain: str | None, key: str) -> list[tuple[str, str]]:
    if domain != NVIDIA_DRIVER:
        return []
    if field_name == "attributes":
        if key in ATTRIBUTE_KEYS:
            return []
        if key in REMOVED_ATTRIBUTE_KEYS:
            return [
                (
                    WARNING,
                    f"attribute {NVIDIA_DRIVER}/{key} is no longer published by the NVIDIA DRA "
                    f"driver: {REMOVED_ATTRIBUTE_KEYS[key]}",
                )
            ]
        if key in CAPACITY_KEYS or MEMORY_SLICE_RE.match(key):
            return [
                (
                    WARNING,
                    f"{key} is a capacity, not an attribute, of {NVIDIA_DRIVER} devices: use "
                    f"device.capacity['{NVIDIA_DRIVER}'].{key}.compareTo(quantity('40Gi')) >= 0",
                )
            ]
        return [
            (
                WARNING,
                f"the NVIDIA DRA driver publishes no attribute {key!r} (attributes: "
                f"{', '.join(sorted(ATTRIBUTE_KEYS))}); the selector never matches",
            )
        ]
    if field_name == "capacity":
        if key in CAPACITY_KEYS or MEMORY_SLICE_RE.match(key):
            return []
        if key in ATTRIBUTE_KEYS:
            return [
                (
                    WARNING,
                    f"{key} is an attribute, not a capacity, of {NVIDIA_DRIVER} devices: use "
                    f"device.attributes['{NVIDIA_DRIVER}'].{key}",
                )
            ]
        return [
            (
                WARNING,
                f"the NVIDIA DRA driver publishes no capacity {key!r} (capacities: "
                f"{', '.join(sorted(CAPACITY_KEYS))}, memorySlice<N>); the selector never "
                "matches",
            )
        ]
    return []
