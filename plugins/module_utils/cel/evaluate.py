# Copyright: gpufleet contributors
# Apache License 2.0 (see LICENSE)
"""Kubernetes' DRA CEL environment on cel-python (``celpy``): evaluate DeviceClass and
ResourceClaim selectors against published devices, and say why one does not match.

The environment follows ``k8s.io/dynamic-resource-allocation/cel/compile.go`` (v0.37.2):

* the variable ``device`` with ``driver`` (string), ``allowMultipleAllocations`` (bool),
  ``attributes`` and ``capacity``: maps of domain -> map of identifier -> value. An
  attribute or capacity name without a domain (``productName``) belongs to the device's
  driver (``parseQualifiedName``); ``resource.kubernetes.io/pciBusID`` is
  ``device.attributes['resource.kubernetes.io'].pciBusID``. A domain the device lacks is
  an empty map (``newStringInterfaceMapWithDefault``); an identifier it lacks is a runtime
  error ("no such key"), which makes kube-scheduler fail the whole claim, not only that
  device (``selectorsMatch`` in ``structured/internal/stable/allocator_stable.go``).
* attribute values: ``string``, ``int``, ``bool`` and ``version`` (a semantic version,
  ``apiservercel.Semver``); the list forms ``strings``, ``ints``, ``bools``,
  ``versions`` (1.36+). Capacities are ``Quantity`` values.
* ``quantity()``/``isQuantity()`` and the Quantity methods ``compareTo``,
  ``isGreaterThan``, ``isLessThan``, ``add``, ``sub``, ``asInteger``,
  ``asApproximateFloat``, ``isInteger``, ``sign`` (``k8s.io/apiserver/pkg/cel/library/
  quantity.go``); ``semver()``/``isSemver()`` (with the optional ``normalize`` flag) and
  the Semver methods ``major``, ``minor``, ``patch``, ``compareTo``, ``isGreaterThan``,
  ``isLessThan`` (``library/semverlib.go``); the string extensions ``lowerAscii``,
  ``upperAscii``, ``trim``, ``replace``, ``split``, ``indexOf``, ``lastIndexOf``,
  ``substring``, ``charAt``, ``join`` (cel-go ``ext/strings.go``); ``matches`` (RE2) is
  cel-python's own.

Quantities are parsed as ``k8s.io/apimachinery/pkg/api/resource`` does (decimal SI
``n u m k M G T P E``, binary SI ``Ki Mi Gi Ti Pi Ei``, exponents ``e3``) and held as
exact fractions. Semantic versions follow semver 2.0.0 precedence (blang/semver).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from ansible_collections.gpufleet.cluster.plugins.module_utils.common.fields import is_map
from ansible_collections.gpufleet.cluster.plugins.module_utils.dra.resource_versions import (
    device_fields,
)
from ansible_collections.gpufleet.cluster.plugins.module_utils.kube.quantity import (
    QuantityError,
    parse_quantity,
    quantity_int64,
)

__all__ = [
    "CelError",
    "Quantity",
    "Selector",
    "SelectorResult",
    "Semver",
    "device_activation",
    "device_values_convert",
    "functions",
    "parse",
    "value_key",
]


class CelError(ValueError):
    """An expression that does not compile, or a value the environment cannot hold."""


def _celpy():
    try:
        import celpy  # type: ignore[import-not-found]
        import celpy.celtypes  # type: ignore[import-not-found]
    except ImportError as exc:  # pragma: no cover - declared dependency
        raise CelError(
            "evaluating DRA selectors needs the cel-python package (import name celpy); "
            "install it with: pip install 'cel-python>=0.4,<0.6'"
        ) from exc
    return celpy


class Quantity:
    """A ``Quantity`` value of the environment: exact ``value`` (Fraction), the text it
    was written as (kept for messages) and ``int64``, what Kubernetes' ``AsInt64`` gives
    for it (None: it cannot; see :func:`quantity_int64`)."""

    def __init__(self, value: Any, text: str | None = None) -> None:
        try:
            self.value = value if isinstance(value, Fraction) else parse_quantity(value)
        except QuantityError as err:
            raise CelError(str(err)) from None
        self.text = text if text is not None else str(value)
        self.int64 = (
            None if isinstance(value, Fraction) and text is None else (quantity_int64(self.text))
        )

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Quantity):
            return self.value == other.value
        return NotImplemented

    def __hash__(self) -> int:
        return hash(self.value)

    def __repr__(self) -> str:
        return f"quantity({self.text!r})"

    def __str__(self) -> str:
        return self.text


# ------------------------------------------------------------------ Semver

_SEMVER_RE = re.compile(
    r"^(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)"
    r"(?:-((?:0|[1-9]\d*|\d*[A-Za-z-][0-9A-Za-z-]*)(?:\.(?:0|[1-9]\d*|\d*[A-Za-z-][0-9A-Za-z-]*))*))?"
    r"(?:\+([0-9A-Za-z-]+(?:\.[0-9A-Za-z-]+)*))?$"
)


def _normalize_semver(text: str) -> str:
    """``semver(x, true)``: drop a leading ``v``, fill a missing minor/patch with 0 and
    strip leading zeros (``library/semverlib.go`` normalizeAndParse)."""
    t = text.strip()
    if t.startswith("v"):
        t = t[1:]
    m = re.match(r"^(\d+)(?:\.(\d+))?(?:\.(\d+))?(.*)$", t)
    if not m:
        return t
    nums = [str(int(x)) if x is not None else "0" for x in m.groups()[:3]]
    return ".".join(nums) + m.group(4)


class Semver:
    """A semantic version (``major.minor.patch[-pre][+build]``), compared by semver 2.0.0
    precedence (build metadata ignored) through ``compare``; like Kubernetes' Semver it
    has no ``<``/``>`` operators in CEL (only ``compareTo``, ``isGreaterThan``,
    ``isLessThan``)."""

    def __init__(self, text: str, normalize: bool = False) -> None:
        raw = _normalize_semver(text) if normalize else text
        m = _SEMVER_RE.match(raw)
        if not m:
            raise CelError(f"{text!r} is not a semantic version (MAJOR.MINOR.PATCH)")
        self.text = raw
        self.major, self.minor, self.patch = (int(m.group(i)) for i in (1, 2, 3))
        self.pre = tuple(m.group(4).split(".")) if m.group(4) else ()

    def _key(self) -> tuple:
        pre: tuple = tuple((0, int(p), "") if p.isdigit() else (1, 0, p) for p in self.pre)
        # a version without pre-release is greater than one with
        return (self.major, self.minor, self.patch, 0 if self.pre else 1, pre)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Semver):
            return self._key() == other._key()
        return NotImplemented

    def compare(self, other: Semver) -> int:
        """-1, 0 or 1 by semver precedence."""
        a, b = self._key(), other._key()
        return (a > b) - (a < b)

    def __hash__(self) -> int:
        return hash(self._key())

    def __repr__(self) -> str:
        return f"semver({self.text!r})"

    def __str__(self) -> str:
        return self.text


# ------------------------------------------------------------------ functions


def _cmp(a: Any, b: Any) -> int:
    if isinstance(a, Quantity) and isinstance(b, Quantity):
        return (a.value > b.value) - (a.value < b.value)
    if isinstance(a, Semver) and isinstance(b, Semver):
        return a.compare(b)
    raise TypeError(f"no such overload: {type(a).__name__}.compareTo({type(b).__name__})")


def functions() -> dict[str, Callable[..., Any]]:
    """The Kubernetes CEL library functions of the DRA environment, as celpy functions
    (a method ``x.f(y)`` is called as ``f(x, y)``): the quantity, semantic-version and
    string libraries."""
    ct = _celpy().celtypes
    return {**_quantity_functions(ct), **_semver_functions(ct), **_string_functions(ct)}


def _comparisons(ct: Any) -> dict[str, Callable[..., Any]]:
    """``compareTo``, ``isGreaterThan``, ``isLessThan`` of quantities and versions."""

    def compare_to(a: Any, b: Any) -> Any:
        return ct.IntType(_cmp(a, b))

    def is_greater(a: Any, b: Any) -> Any:
        return ct.BoolType(_cmp(a, b) > 0)

    def is_less(a: Any, b: Any) -> Any:
        return ct.BoolType(_cmp(a, b) < 0)

    return {"compareTo": compare_to, "isGreaterThan": is_greater, "isLessThan": is_less}


def _quantity_functions(ct: Any) -> dict[str, Callable[..., Any]]:
    """The Kubernetes quantity library (``quantity``, ``add``, ``asInteger``...)."""

    def quantity(s: Any) -> Quantity:
        try:
            return Quantity(parse_quantity(str(s)), str(s))
        except QuantityError as err:
            raise ValueError(str(err)) from None

    def is_quantity(s: Any) -> Any:
        try:
            parse_quantity(str(s))
        except QuantityError:
            return ct.BoolType(False)
        return ct.BoolType(True)

    def _q(x: Any) -> Fraction:
        if isinstance(x, Quantity):
            return x.value
        if isinstance(x, int) and not isinstance(x, bool):
            return Fraction(int(x))
        raise TypeError(f"no such overload for {type(x).__name__}")

    def _qtext(v: Fraction) -> str:
        return str(v.numerator) if v.denominator == 1 else str(float(v))

    def add(a: Any, b: Any) -> Quantity:
        if not isinstance(a, Quantity):
            raise TypeError("add applies to quantities")
        v = a.value + _q(b)
        return Quantity(v, _qtext(v))

    def sub(a: Any, b: Any) -> Quantity:
        if not isinstance(a, Quantity):
            raise TypeError("sub applies to quantities")
        v = a.value - _q(b)
        return Quantity(v, _qtext(v))

    def as_integer(q: Any) -> Any:
        if not isinstance(q, Quantity):
            raise TypeError("asInteger applies to quantities")
        if q.int64 is None:
            raise ValueError("cannot convert value to integer")
        return ct.IntType(q.int64)

    def as_float(q: Any) -> Any:
        if not isinstance(q, Quantity):
            raise TypeError("asApproximateFloat applies to quantities")
        return ct.DoubleType(float(q.value))

    def is_integer(q: Any) -> Any:
        if not isinstance(q, Quantity):
            raise TypeError("isInteger applies to quantities")
        return ct.BoolType(q.int64 is not None)

    def sign(q: Any) -> Any:
        if not isinstance(q, Quantity):
            raise TypeError("sign applies to quantities")
        return ct.IntType((q.value > 0) - (q.value < 0))

    return {
        "quantity": quantity,
        "isQuantity": is_quantity,
        **_comparisons(ct),
        "add": add,
        "sub": sub,
        "asInteger": as_integer,
        "asApproximateFloat": as_float,
        "isInteger": is_integer,
        "sign": sign,
    }


def _semver_functions(ct: Any) -> dict[str, Callable[..., Any]]:
    """The Kubernetes semantic-version library (``semver``, ``major``...)."""

    def semver(s: Any, normalize: Any = False) -> Semver:
        try:
            return Semver(str(s), bool(normalize))
        except CelError as err:
            raise ValueError(str(err)) from None

    def is_semver(s: Any, normalize: Any = False) -> Any:
        try:
            Semver(str(s), bool(normalize))
        except CelError:
            return ct.BoolType(False)
        return ct.BoolType(True)

    def _sv(name: str) -> Callable[[Any], Any]:
        def get(v: Any) -> Any:
            if not isinstance(v, Semver):
                raise TypeError(f"{name} applies to semantic versions")
            return ct.IntType(getattr(v, name))

        return get

    return {
        "semver": semver,
        "isSemver": is_semver,
        "major": _sv("major"),
        "minor": _sv("minor"),
        "patch": _sv("patch"),
    }


def _string_functions(ct: Any) -> dict[str, Callable[..., Any]]:
    """The CEL strings extension as Kubernetes offers it (``lowerAscii``, ``split``...)."""

    def _s(x: Any) -> str:
        if not isinstance(x, str):
            raise TypeError("string function applied to a non-string")
        return str(x)

    def lower_ascii(s: Any) -> Any:
        return ct.StringType("".join(c.lower() if c.isascii() else c for c in _s(s)))

    def upper_ascii(s: Any) -> Any:
        return ct.StringType("".join(c.upper() if c.isascii() else c for c in _s(s)))

    def trim(s: Any) -> Any:
        return ct.StringType(_s(s).strip())

    def replace(s: Any, old: Any, new: Any, n: Any = -1) -> Any:
        return ct.StringType(_s(s).replace(_s(old), _s(new), int(n)))

    def split(s: Any, sep: Any, n: Any = -1) -> Any:
        n = int(n)
        if n == 0:
            return ct.ListType([])
        parts = _s(s).split(_s(sep), n - 1) if n > 0 else _s(s).split(_s(sep))
        return ct.ListType([ct.StringType(p) for p in parts])

    def index_of(s: Any, sub_: Any, start: Any = 0) -> Any:
        return ct.IntType(_s(s).find(_s(sub_), int(start)))

    def last_index_of(s: Any, sub_: Any, end: Any = None) -> Any:
        text = _s(s)
        limit = len(text) if end is None else int(end) + len(_s(sub_))
        return ct.IntType(text.rfind(_s(sub_), 0, limit))

    def substring(s: Any, start: Any, end: Any = None) -> Any:
        text = _s(s)
        a, b = int(start), len(text) if end is None else int(end)
        if a > b:  # cel-go ext/strings.go substrRange
            raise ValueError(f"invalid substring range. start: {a}, end: {b}")
        if not 0 <= a <= len(text):
            raise ValueError(f"index out of range: {a}")
        if b > len(text):
            raise ValueError(f"index out of range: {b}")
        return ct.StringType(text[a:b])

    def char_at(s: Any, i: Any) -> Any:
        text = _s(s)
        i = int(i)
        if not 0 <= i <= len(text):
            raise ValueError(f"index out of range: {i}")
        return ct.StringType(text[i : i + 1])

    def join(items: Any, sep: Any = "") -> Any:
        return ct.StringType(_s(sep).join(_s(x) for x in items))

    return {
        "lowerAscii": lower_ascii,
        "upperAscii": upper_ascii,
        "trim": trim,
        "replace": replace,
        "split": split,
        "indexOf": index_of,
        "lastIndexOf": last_index_of,
        "substring": substring,
        "charAt": char_at,
        "join": join,
    }


# ------------------------------------------------------------------ device values


def _attribute_value(value: Mapping[str, Any], ct: Any) -> Any:
    """A ResourceSlice attribute (``{"string": "x"}``, ``{"version": "1.2.3"}``, ...) as a
    CEL value; raises CelError for one without a supported value (``getAttributeValue``),
    or whose value is not of its member's type (``{"int": "many"}``, which kube-apiserver
    refuses and a hand-made object may hold)."""
    try:
        return _typed_attribute_value(value, ct)
    except (TypeError, ValueError, OverflowError) as err:  # OverflowError: int(inf)
        if isinstance(err, CelError):
            raise
        raise CelError(f"attribute value {value!r} is not of its type: {err}") from None


def _typed_attribute_value(value: Mapping[str, Any], ct: Any) -> Any:
    if "string" in value:
        return ct.StringType(value["string"])
    if "int" in value:
        return ct.IntType(int(value["int"]))
    if "bool" in value:
        return ct.BoolType(bool(value["bool"]))
    if "version" in value:
        return Semver(str(value["version"]))
    if "strings" in value:
        return ct.ListType([ct.StringType(v) for v in value["strings"]])
    if "ints" in value:
        return ct.ListType([ct.IntType(int(v)) for v in value["ints"]])
    if "bools" in value:
        return ct.ListType([ct.BoolType(bool(v)) for v in value["bools"]])
    if "versions" in value:
        return ct.ListType([Semver(str(v)) for v in value["versions"]])
    raise CelError(f"unsupported attribute value {dict(value)!r}")


def _split_name(name: str, driver: str) -> tuple[str, str]:
    domain, sep, ident = name.partition("/")
    return (domain, ident) if sep else (driver, name)


def _capacity_value(value: Any) -> Quantity:
    """A capacity (``{"value": "80Gi"}``, or the quantity itself) as a CEL Quantity;
    raises CelError for one that is not a quantity."""
    raw = value.get("value") if isinstance(value, Mapping) else value
    return Quantity(str(raw))


#: The types of a value that ``value_key`` keys by the value itself.
_SCALARS = (str, int, bool, float)
#: The attribute fields whose value of this very type always converts.
_PLAIN = {"string": str, "bool": bool}


def value_key(member: str, value: Any) -> tuple[Any, ...]:
    """A key of an attribute or capacity value (``{"string": "x"}``, ``{"value": "80Gi"}``)
    under ``member`` that two values share only when they are the same: ``(member, field,
    type, value)`` for a map of one scalar field (the shape of every value an API server
    gives), else ``(member, repr(value))``. The type tells ``1`` from ``True`` and ``1.0``;
    the scalar's own hash is cheaper than its ``repr``, which a fleet's devices would pay
    for each of their values."""
    if is_map(value) and len(value) == 1:
        for field, scalar in value.items():
            kind = type(scalar)
            if kind in _SCALARS:
                return (member, field, kind, scalar)
    return (member, repr(value))


def device_values_convert(device: Mapping[str, Any], seen: dict[Any, bool]) -> bool:
    """Whether :func:`device_activation` would convert every attribute and capacity value
    of ``device`` (it raises for one it cannot), judged value by value: ``seen`` keeps
    each value's verdict by its ``value_key``, for a caller that asks about many devices
    of the same few values. False for anything device_activation would not read as usual.

    An attribute ``{"string": <str>}`` or ``{"bool": <bool>}`` always converts
    (``_typed_attribute_value``) and is taken without a key: each device has its own
    ``uuid`` and PCI bus id, which no other device shares."""
    ct = _celpy().celtypes
    body = device_fields(device)
    for member in ("attributes", "capacity"):
        values = body.get(member) or {}
        if not isinstance(values, Mapping):
            return False
        plain = member == "attributes"
        for value in values.values():
            if plain and is_map(value) and len(value) == 1:
                ((field, scalar),) = value.items()
                if _PLAIN.get(field) is type(scalar):
                    continue
            text = value_key(member, value)
            ok = seen.get(text)
            if ok is None:
                try:
                    if member == "attributes":
                        ok = isinstance(value, Mapping) and _attribute_value(value, ct) is not None
                    else:
                        ok = _capacity_value(value) is not None
                except Exception:  # device_activation raises it: not convertible
                    ok = False
                seen[text] = ok
            if not ok:
                return False
    return True


def device_activation(driver: str, device: Mapping[str, Any]) -> dict[str, Any]:
    """The CEL activation ``{"device": ...}`` for one device of a ResourceSlice of
    ``driver`` (a v1 device, or a v1beta1 device whose fields are under ``basic``).
    Raises CelError for an attribute value the environment cannot hold."""
    celpy = _celpy()
    ct = celpy.celtypes

    class DomainMap(ct.MapType):
        """A map of domains whose missing keys are empty maps (``mapper.Find``)."""

        def __getitem__(self, key: Any) -> Any:
            try:
                return super().__getitem__(key)
            except KeyError:
                return ct.MapType()

    body = device_fields(device)
    attributes: dict[str, dict[Any, Any]] = {}
    for member in ("attributes", "capacity"):
        if not is_map(body.get(member) or {}):
            raise CelError(f"the device's {member} are not a map")
    for name, value in (body.get("attributes") or {}).items():
        domain, ident = _split_name(str(name), driver)
        try:
            attributes.setdefault(domain, {})[ct.StringType(ident)] = _attribute_value(value, ct)
        except CelError as err:
            raise CelError(f"device {device.get('name')}: attribute {name}: {err}") from None
    capacity: dict[str, dict[Any, Any]] = {}
    for name, value in (body.get("capacity") or {}).items():
        domain, ident = _split_name(str(name), driver)
        capacity.setdefault(domain, {})[ct.StringType(ident)] = _capacity_value(value)
    return {
        "device": ct.MapType(
            {
                ct.StringType("driver"): ct.StringType(driver),
                ct.StringType("allowMultipleAllocations"): ct.BoolType(
                    bool(body.get("allowMultipleAllocations", False))
                ),
                ct.StringType("attributes"): DomainMap(
                    {ct.StringType(d): ct.MapType(v) for d, v in attributes.items()}
                ),
                ct.StringType("capacity"): DomainMap(
                    {ct.StringType(d): ct.MapType(v) for d, v in capacity.items()}
                ),
            }
        )
    }


# ------------------------------------------------------------------ selectors


def parse(expression: str) -> Any:
    """cel-python's parse tree (a lark Tree) of ``expression``. Raises CelError naming the
    expression and cel-python's reason when it does not parse (CEL's grammar)."""
    celpy = _celpy()
    try:
        return celpy.Environment().compile(expression)
    except Exception as err:  # celpy raises CELParseError (and lark errors)
        detail = " ".join(str(err).split())[:200]
        raise CelError(f"CEL expression {expression!r} does not parse: {detail}") from None


@dataclass(frozen=True)
class SelectorResult:
    """Outcome of one selector on one device: ``matched``; ``error`` (a CEL runtime error:
    kube-scheduler then fails the whole claim); ``reason`` why it did not match, such as
    ``profile is 1g.18gb, wanted 1g.10gb``."""

    matched: bool
    error: str | None = None
    reason: str | None = None


_CHAIN_RE = re.compile(
    r"^device\s*\.\s*(attributes|capacity)\s*\[\s*(['\"])([^'\"]+)\2\s*\]\s*\.\s*([A-Za-z_]\w*)$"
)
_OPS = {
    "relation_eq": "==",
    "relation_ne": "!=",
    "relation_lt": "<",
    "relation_le": "<=",
    "relation_gt": ">",
    "relation_ge": ">=",
    "relation_in": "in",
}
_FLIP = {"<": ">", "<=": ">=", ">": "<", ">=": "<=", "==": "==", "!=": "!="}
#: ``X.compareTo(Y) OP 0`` -> what X must be relative to Y.
_COMPARE_ZERO = {">=": ">=", ">": ">", "<=": "<=", "<": "<", "==": "==", "!=": "!="}
_METHOD_WORDS = {
    "isGreaterThan": ">",
    "isLessThan": "<",
    "matches": "to match",
    "startsWith": "to start with",
    "endsWith": "to end with",
    "contains": "to contain",
}


def _fmt(value: Any) -> str:
    if isinstance(value, (Quantity, Semver)):
        return str(value)
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_fmt(v) for v in value) + "]"
    return str(value)


def _short(text: str) -> str:
    """``device.attributes['gpu.nvidia.com'].profile`` -> ``profile``; other member chains
    lose the ``device.attributes['domain'].`` prefix only."""
    t = _PREFIX_RE.sub("", text.strip())
    return t[len("device.") :] if t.startswith("device.") else t


_PREFIX_RE = re.compile(
    r"device\s*\.\s*(?:attributes|capacity)\s*\[\s*(['\"])[^'\"]+\1\s*\]\s*\.\s*"
)


def _runtime_message(err: Exception) -> str:
    args = getattr(err, "args", None) or ()
    text = args[0] if args else str(err)
    if text == "return error for overflow" and len(args) > 2 and args[2]:
        text = str(args[2][0])  # a function's ValueError: its own message
    m = re.search(r"no such member in mapping: '([^']+)'", str(text))
    if m:
        return f"no such key: {m.group(1)}"
    return str(text)


class Selector:
    """One compiled selector expression. ``evaluate(activation)`` runs it on a device
    (:func:`device_activation`); for a device it does not match, ``reason`` names the
    first ``&&`` term that is false and the device's value. Raises CelError when the
    expression does not parse."""

    def __init__(self, expression: str) -> None:
        celpy = _celpy()
        self.expression = expression
        self._env = celpy.Environment()
        self._bool = celpy.celtypes.BoolType
        self._functions = functions()
        try:
            tree = self._env.compile(expression)
        except Exception as err:  # celpy raises CELParseError (and lark errors)
            detail = " ".join(str(err).split())[:200]
            raise CelError(f"CEL expression {expression!r} does not parse: {detail}") from None
        self._program = self._env.program(tree, functions=self._functions)
        self._terms = [self._term(node) for node in _conjuncts(tree)]

    def _compile_text(self, text: str) -> Any:
        return self._env.program(self._env.compile(text), functions=self._functions)

    def _term(self, node: Any) -> dict[str, Any]:
        text = self._text(node)
        term: dict[str, Any] = {"text": text, "program": self._compile_text(text)}
        rel = _unwrap(node)
        if getattr(rel, "data", None) == "relation" and len(rel.children) == 2:
            op_node, right = rel.children
            op = _OPS.get(getattr(op_node, "data", ""))
            if op and op_node.children:
                left = op_node.children[0]
                term.update(kind="relation", op=op)
                term["left"] = self._side(left)
                term["right"] = self._side(right)
                return term
        call = _method_call(rel)
        if call is not None:
            receiver, method, args = call
            if method in _METHOD_WORDS:
                term.update(kind="method", method=method)
                term["left"] = self._side(receiver)
                term["args"] = [self._side(a) for a in args]
        return term

    def _side(self, node: Any) -> dict[str, Any]:
        text = self._text(node)
        out: dict[str, Any] = {"text": text, "program": self._compile_text(text)}
        call = _method_call(_unwrap(node))
        if call is not None and call[1] == "compareTo" and len(call[2]) == 1:
            out["compare"] = (self._side(call[0]), self._side(call[2][0]))
        return out

    def _text(self, node: Any) -> str:
        meta = getattr(node, "meta", None)
        if meta is None or getattr(meta, "empty", True):
            raise CelError(f"cannot locate a term of {self.expression!r}")
        return self.expression[meta.start_pos : meta.end_pos].strip()

    def evaluate(self, activation: Mapping[str, Any]) -> SelectorResult:
        try:
            value = self._program.evaluate(dict(activation))
        except Exception as err:  # CELEvalError and Python errors inside functions
            return SelectorResult(False, error=_runtime_message(err))
        if not isinstance(value, (bool, self._bool)):
            return SelectorResult(
                False, error=f"the expression returned {type(value).__name__}, not bool"
            )
        if value:
            return SelectorResult(True)
        return SelectorResult(False, reason=self._why(activation))

    def _value(self, side: Mapping[str, Any], activation: Mapping[str, Any]) -> Any:
        return side["program"].evaluate(dict(activation))

    def _why(self, activation: Mapping[str, Any]) -> str:
        for term in self._terms:
            try:
                ok = term["program"].evaluate(dict(activation))
            except Exception as err:
                return f"{term['text']}: {_runtime_message(err)}"
            if isinstance(ok, (bool, self._bool)) and bool(ok):
                continue
            try:
                return self._describe(term, activation)
            except Exception:
                return f"`{term['text']}` is false"
        return f"`{self.expression}` is false"

    def _describe(self, term: Mapping[str, Any], act: Mapping[str, Any]) -> str:
        kind = term.get("kind")
        if kind == "relation":
            left, right, op = term["left"], term["right"], term["op"]
            if "compare" in left and right["text"] == "0":
                subject, other = left["compare"]
                return self._say(subject, act, _COMPARE_ZERO[op], self._value(other, act))
            if _is_device(left["text"]) or not _is_device(right["text"]):
                return self._say(left, act, op, self._value(right, act))
            return self._say(right, act, _FLIP.get(op, op), self._value(left, act))
        if kind == "method":
            word = _METHOD_WORDS[term["method"]]
            wanted = [self._value(a, act) for a in term["args"]]
            return self._say(term["left"], act, word, wanted[0] if wanted else "")
        return f"`{term['text']}` is false"

    def _say(self, side: Mapping[str, Any], act: Mapping[str, Any], op: str, wanted: Any) -> str:
        actual = self._value(side, act)
        name = _short(side["text"])
        if op == "==":
            return f"{name} is {_fmt(actual)}, wanted {_fmt(wanted)}"
        if op == "!=":
            return f"{name} is {_fmt(actual)}, wanted anything but {_fmt(wanted)}"
        if op == "in":
            return f"{name} is {_fmt(actual)}, wanted one of {_fmt(wanted)}"
        return f"{name} is {_fmt(actual)}, wanted {op} {_fmt(wanted)}"


def _is_device(text: str) -> bool:
    return text.strip().startswith("device")


_WRAPPERS = {
    "expr",
    "conditionalor",
    "conditionaland",
    "relation",
    "addition",
    "multiplication",
    "unary",
    "member",
    "primary",
}


def _unwrap(node: Any) -> Any:
    from lark import Tree

    while (
        isinstance(node, Tree)
        and node.data in _WRAPPERS
        and len(node.children) == 1
        and isinstance(node.children[0], Tree)
    ):
        node = node.children[0]
    if isinstance(node, Tree) and node.data == "paren_expr" and len(node.children) == 1:
        return node
    return node


def _conjuncts(tree: Any) -> list[Any]:
    """The top-level ``&&`` terms of an expression, left to right."""
    from lark import Tree

    node = tree
    while (
        isinstance(node, Tree)
        and node.data in ("expr", "conditionalor")
        and len(node.children) == 1
        and isinstance(node.children[0], Tree)
    ):
        node = node.children[0]

    def flat(n: Any) -> list[Any]:
        if isinstance(n, Tree) and n.data == "conditionaland" and len(n.children) > 1:
            return [t for c in n.children for t in flat(c)]
        if isinstance(n, Tree) and n.data == "conditionaland" and len(n.children) == 1:
            return flat(n.children[0])
        return [n]

    return flat(node)


def _method_call(node: Any) -> tuple[Any, str, Sequence[Any]] | None:
    """``receiver.method(args)`` -> (receiver node, method name, argument nodes)."""
    from lark import Token, Tree

    if not isinstance(node, Tree) or node.data != "member_dot_arg" or len(node.children) < 2:
        return None
    receiver, name = node.children[0], node.children[1]
    if not isinstance(name, Token):
        return None
    args: list[Any] = []
    if len(node.children) > 2 and isinstance(node.children[2], Tree):
        args = list(node.children[2].children)
    return receiver, str(name), args
