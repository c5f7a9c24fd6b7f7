# Copyright: gpufleet contributors
# Apache License 2.0 (see LICENSE)
"""Verdicts on DRA device selectors without Kubernetes at hand: the compile verdict that
kube-apiserver gives a selector of a new object, and the result that kube-scheduler gets
on a device, for the part of Kubernetes' DRA CEL environment this module can judge; for
the rest an explicit ``cannot_judge`` (a verdict of its own, neither a pass nor a fail).

The truth is ``k8s.io/dynamic-resource-allocation/cel`` (``compile.go``:
``CompileCELExpression``, ``DeviceMatches``) of the release; ``lab/go/celcheck`` runs it,
and ``tests/integration/test_cel_differential.py`` holds this module to it on every
expression of ``tests/data/cel_corpus.yaml``: where this module gives a verdict, it is
Kubernetes' verdict.

What is judged. An expression is parsed with cel-python and type-checked here against
the environment's declarations: ``device`` (``driver`` string, ``allowMultipleAllocations``
bool with DRAConsumableCapacity, ``attributes`` map of domain -> map of name -> dyn,
``capacity`` map of domain -> map of name -> Quantity); literals; ``&&``, ``||``, ``!``,
``?:``, ``==``, ``!=``, ``<``, ``<=``, ``>``, ``>=``, ``in``, string ``+``; ``has()``; the
macros ``all``, ``exists``, ``exists_one``, ``filter``, ``map`` (one iteration variable,
nested at most twice); ``size``, ``matches``, ``contains``, ``startsWith``, ``endsWith``;
the string extensions ``lowerAscii``, ``upperAscii``, ``trim``, ``replace``, ``split``,
``indexOf``, ``lastIndexOf``, ``substring``, ``charAt``; ``quantity``/``isQuantity`` and the
Quantity methods; ``semver``/``isSemver`` and the Semver methods (``cel.evaluate``).

What is invalid for certain: a syntax error (cel-python's grammar is CEL's), a variable
other than ``device``, a name the environment does not declare (``dra.cel_env``), a
function called the way it is not declared (``add(q, 1)`` for the member ``q.add(1)``),
a field ``device`` lacks, an operator or function applied to types with no overload,
and a result that is neither bool nor dyn.

What cannot be judged offline: the optional syntax (``.?x``, ``[?k]``), the functions
and macros this module does not implement (``find``, ``sum``, ``sets.*``, ``isIP``,
``url``, ``cel.bind``, ``optional.*``...), arithmetic on numbers (overflow and division
by zero), conversions (``int('x')`` is refused when the program is built), ``type()``,
bytes, null, list and map values other than a literal list on the right of ``in``, and
expressions whose estimated cost this module does not bound (macros nested three deep,
``!=`` on Quantity or Semver: Kubernetes' estimator gives these an unbounded cost).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ansible_collections.gpufleet.cluster.plugins.module_utils.cel import evaluate as vcel
from ansible_collections.gpufleet.cluster.plugins.module_utils.dra import cel_env as env
from ansible_collections.gpufleet.cluster.plugins.module_utils.dra.resource_versions import (
    device_fields,
)

__all__ = [
    "CANNOT_JUDGE",
    "INVALID",
    "MAX_LENGTH",
    "OK",
    "TOO_LONG",
    "Outcome",
    "Verdict",
    "evaluate",
    "judge",
]

OK = "ok"
INVALID = "invalid"
TOO_LONG = "too_long"
CANNOT_JUDGE = "cannot_judge"

#: resourceapi.CELSelectorExpressionMaxLength (k8s.io/api/resource/v1/types.go).
MAX_LENGTH = 10 * 1024

#: Macro nesting this module bounds the estimated cost of (three levels over the device's
#: maps reach 19,142,915 in Kubernetes 1.37's estimator, beyond the 1,000,000 limit).
MAX_MACRO_DEPTH = 2


@dataclass(frozen=True)
class Verdict:
    """The compile verdict on one expression: ``verdict`` (``ok``, ``invalid``,
    ``too_long``, ``cannot_judge``) and ``message`` (why, for anything but ``ok``)."""

    verdict: str
    message: str = ""

    @property
    def judged(self) -> bool:
        return self.verdict != CANNOT_JUDGE


@dataclass(frozen=True)
class Outcome:
    """The result of one expression on one device: ``result`` (True/False, None on an
    error or when not judged), ``error`` (the runtime error's kind as
    ``lab/go/celcheck`` names it: ``no_such_key``, ``no_such_overload``, ``not_bool``,
    ``other``) and ``message``; ``judged`` False: cannot be judged offline."""

    result: bool | None
    error: str | None = None
    message: str = ""
    judged: bool = True


class _Invalid(Exception):
    pass


class _Unjudged(Exception):
    pass


# ----------------------------------------------------------------------------- types

BOOL, INT, UINT, DOUBLE, STRING = "bool", "int", "uint", "double", "string"
QUANTITY, SEMVER, DYN = "kubernetes.Quantity", "kubernetes.Semver", "dyn"
DEVICE = "kubernetes.DRADevice"
ATTRS2, ATTRS1 = "map(string, map(string, dyn))", "map(string, dyn)"
CAPS2, CAPS1 = "map(string, map(string, kubernetes.Quantity))", "map(string, Quantity)"
MAPS = {ATTRS2: ATTRS1, ATTRS1: DYN, CAPS2: CAPS1, CAPS1: QUANTITY}
NUMBERS = {INT, UINT, DOUBLE}
ORDERED = NUMBERS | {STRING, BOOL}


def _list(elem: str) -> str:
    return f"list({elem})"


def _elem(t: str) -> str | None:
    return t[5:-1] if t.startswith("list(") else None


#: Member functions implemented here: name -> {receiver type: [(argument types, result)]}.
_S = STRING
_METHODS: dict[str, dict[str, list[tuple[tuple[str, ...], str]]]] = {
    "contains": {_S: [((_S,), BOOL)]},
    "startsWith": {_S: [((_S,), BOOL)]},
    "endsWith": {_S: [((_S,), BOOL)]},
    "matches": {_S: [((_S,), BOOL)]},
    "size": {_S: [((), INT)]},
    "lowerAscii": {_S: [((), _S)]},
    "upperAscii": {_S: [((), _S)]},
    "trim": {_S: [((), _S)]},
    "replace": {_S: [((_S, _S), _S), ((_S, _S, INT), _S)]},
    "split": {_S: [((_S,), _list(_S)), ((_S, INT), _list(_S))]},
    "indexOf": {_S: [((_S,), INT), ((_S, INT), INT)]},
    "lastIndexOf": {_S: [((_S,), INT), ((_S, INT), INT)]},
    "substring": {_S: [((INT,), _S), ((INT, INT), _S)]},
    "charAt": {_S: [((INT,), _S)]},
    "compareTo": {QUANTITY: [((QUANTITY,), INT)], SEMVER: [((SEMVER,), INT)]},
    "isGreaterThan": {QUANTITY: [((QUANTITY,), BOOL)], SEMVER: [((SEMVER,), BOOL)]},
    "isLessThan": {QUANTITY: [((QUANTITY,), BOOL)], SEMVER: [((SEMVER,), BOOL)]},
    "add": {QUANTITY: [((QUANTITY,), QUANTITY), ((INT,), QUANTITY)]},
    "sub": {QUANTITY: [((QUANTITY,), QUANTITY), ((INT,), QUANTITY)]},
    "asInteger": {QUANTITY: [((), INT)]},
    "asApproximateFloat": {QUANTITY: [((), DOUBLE)]},
    "isInteger": {QUANTITY: [((), BOOL)]},
    "major": {SEMVER: [((), INT)]},
    "minor": {SEMVER: [((), INT)]},
    "patch": {SEMVER: [((), INT)]},
}

#: Global functions implemented here: name -> [(argument types, result)].
_GLOBALS: dict[str, list[tuple[tuple[str, ...], str]]] = {
    "quantity": [((_S,), QUANTITY)],
    "isQuantity": [((_S,), BOOL)],
    "semver": [((_S,), SEMVER), ((_S, BOOL), SEMVER)],
    "isSemver": [((_S,), BOOL), ((_S, BOOL), BOOL)],
    "matches": [((_S, _S), BOOL)],
    "sign": [((QUANTITY,), INT)],
    "size": [((_S,), INT)],
}

_MACROS = {"all", "exists", "exists_one", "filter", "map"}

#: Identifiers the environment declares as type names (``type(x) == int``).
_TYPE_NAMES = {"int", "uint", "double", "string", "bool", "bytes", "list", "map", "type"}
_TYPE_NAMES |= {"null_type", "dyn", "google", "kubernetes"}


def _fits(actual: str, wanted: str) -> bool:
    return actual in (wanted, DYN)


def _pick(overloads: list[tuple[tuple[str, ...], str]], args: list[str], what: str) -> str:
    results = {
        r
        for params, r in overloads
        if len(params) == len(args) and all(_fits(a, p) for a, p in zip(args, params, strict=True))
    }
    if not results:
        raise _Invalid(f"found no matching overload for {what} applied to ({', '.join(args)})")
    return results.pop() if len(results) == 1 else DYN


# ----------------------------------------------------------------------------- checker


class _Checker:
    """The static type of each node of a cel-python parse tree, as cel-go's checker with
    the DRA declarations would give it; raises _Invalid or _Unjudged."""

    def __init__(self, features: Mapping[str, bool], release: str | None = None) -> None:
        self.features = features
        self.scopes: list[dict[str, str]] = []
        self.globals, self.members, self.macros = env.tables(release)
        minor = env.release_minor(release)
        self.overloads = {
            name: [
                o
                for o in overloads
                if minor is None or minor >= env.OVERLOAD_INTRODUCED.get((name, len(o[0])), 0)
            ]
            for name, overloads in _GLOBALS.items()
        }

    def check(self, node: Any) -> str:
        from lark import Token, Tree

        if isinstance(node, Token):
            raise _Unjudged(f"token {node!s}")
        if not isinstance(node, Tree):
            raise AssertionError(f"not a CEL parse tree: {node!r}")
        data, kids = node.data, node.children
        handler = getattr(self, "_" + data, None)
        if handler is not None:
            return handler(kids)
        if len(kids) == 1 and isinstance(kids[0], Tree):
            return self.check(kids[0])
        raise _Unjudged(f"{data} is not judged offline")

    # -- structure
    def _expr(self, kids: list[Any]) -> str:
        if len(kids) == 1:
            return self.check(kids[0])
        cond, yes, no = (self.check(k) for k in kids)
        if not _fits(cond, BOOL):
            raise _Invalid(f"found no matching overload for '_?_:_' applied to ({cond}, ...)")
        if yes == no or no == DYN:
            return yes
        if yes == DYN:
            return no
        raise _Unjudged("a conditional whose branches differ in type")

    def _conditionalor(self, kids: list[Any]) -> str:
        return self._logic(kids, "_||_")

    def _conditionaland(self, kids: list[Any]) -> str:
        return self._logic(kids, "_&&_")

    def _logic(self, kids: list[Any], op: str) -> str:
        types = [self.check(k) for k in kids]
        if len(types) == 1:
            return types[0]
        if not all(_fits(t, BOOL) for t in types):
            raise _Invalid(f"found no matching overload for '{op}' applied to ({', '.join(types)})")
        return BOOL

    def _relation(self, kids: list[Any]) -> str:
        if len(kids) == 1:
            return self.check(kids[0])
        op_node, right = kids
        op = op_node.data
        left_t = self.check(op_node.children[0])
        if op == "relation_in":
            return self._in(left_t, right)
        right_t = self.check(right)
        name = {
            "relation_eq": "_==_",
            "relation_ne": "_!=_",
            "relation_lt": "_<_",
            "relation_le": "_<=_",
            "relation_gt": "_>_",
            "relation_ge": "_>=_",
        }[op]
        pair = f"({left_t}, {right_t})"
        if op in ("relation_eq", "relation_ne"):
            if {left_t, right_t} & {QUANTITY, SEMVER} and op == "relation_ne":
                raise _Unjudged("!= on a Quantity or Semver (estimated cost not bounded here)")
            containers = [t.startswith(("list", "map")) for t in (left_t, right_t)]
            scalars = [t in ORDERED or t in (QUANTITY, SEMVER) for t in (left_t, right_t)]
            if any(containers) and not (any(scalars) and DYN not in (left_t, right_t)):
                raise _Unjudged("equality of lists or maps")
            if DYN in (left_t, right_t) or left_t == right_t:
                return BOOL
            raise _Invalid(f"found no matching overload for '{name}' applied to '{pair}'")
        if DYN in (left_t, right_t) and {left_t, right_t} - {DYN} <= ORDERED:
            return BOOL
        if left_t == right_t and left_t in ORDERED:
            return BOOL
        if left_t in NUMBERS and right_t in NUMBERS:
            raise _Unjudged("ordering of numbers of different types")
        raise _Invalid(f"found no matching overload for '{name}' applied to '{pair}'")

    def _in(self, left_t: str, right: Any) -> str:
        right_t = self._in_operand(right)
        if right_t == DYN or (left_t == DYN and right_t in MAPS):
            return BOOL
        if right_t in MAPS:
            if left_t == STRING:
                return BOOL
        else:
            elem = _elem(right_t)
            if elem is not None and (_fits(left_t, elem) or elem == DYN):
                return BOOL
            if elem in NUMBERS and left_t in NUMBERS:
                return BOOL
        raise _Invalid(f"found no matching overload for '@in' applied to '({left_t}, {right_t})'")

    def _in_operand(self, node: Any) -> str:
        lit = _find(node, "list_lit")
        if lit is not None:
            items = [self.check(c) for c in (lit.children[0].children if lit.children else [])]
            kinds = set(items)
            if len(kinds) > 1 or not kinds <= ORDERED:
                raise _Unjudged("a list literal of mixed or non-scalar elements")
            return _list(items[0]) if items else _list(DYN)
        return self.check(node)

    def _addition(self, kids: list[Any]) -> str:
        if len(kids) == 1:
            return self.check(kids[0])
        op_node, right = kids
        left_t, right_t = self.check(op_node.children[0]), self.check(right)
        if op_node.data == "addition_add" and left_t == right_t == STRING:
            return STRING
        if {left_t, right_t} & {QUANTITY, SEMVER} or (
            left_t in ORDERED and right_t in ORDERED and left_t != right_t
        ):
            op = "_+_" if op_node.data == "addition_add" else "_-_"
            raise _Invalid(
                f"found no matching overload for '{op}' applied to '({left_t}, {right_t})'"
            )
        raise _Unjudged("arithmetic (overflow is not judged offline)")

    def _multiplication(self, kids: list[Any]) -> str:
        if len(kids) == 1:
            return self.check(kids[0])
        raise _Unjudged("arithmetic (overflow, division by zero are not judged offline)")

    def _unary(self, kids: list[Any]) -> str:
        if len(kids) == 1:
            return self.check(kids[0])
        op, operand = kids
        t = self.check(operand)
        if op.data == "unary_not":
            if _fits(t, BOOL):
                return BOOL
            raise _Invalid(f"found no matching overload for '!_' applied to '({t})'")
        raise _Unjudged("negation (overflow is not judged offline)")

    def _paren_expr(self, kids: list[Any]) -> str:
        return self.check(kids[0])

    # -- leaves
    def _literal(self, kids: list[Any]) -> str:
        token = kids[0]
        kind = token.type
        if kind in ("STRING_LIT", "MLSTRING_LIT"):
            return STRING
        if kind == "BOOL_LIT":
            return BOOL
        if kind == "INT_LIT":
            return INT
        if kind == "UINT_LIT":
            return UINT
        if kind == "FLOAT_LIT":
            return DOUBLE
        raise _Unjudged(f"{kind.lower().replace('_lit', '')} literals")

    def _ident(self, kids: list[Any]) -> str:
        name = str(kids[0])
        for scope in reversed(self.scopes):
            if name in scope:
                return scope[name]
        if name == "device":
            return DEVICE
        if name in _TYPE_NAMES:
            raise _Unjudged(f"the type name {name!r}")
        raise _Invalid(f"undeclared reference to '{name}' (in container '')")

    def _list_lit(self, kids: list[Any]) -> str:
        raise _Unjudged("list values")

    def _map_lit(self, kids: list[Any]) -> str:
        raise _Unjudged("map values")

    def _dot_ident(self, kids: list[Any]) -> str:
        raise _Unjudged("a leading-dot name")

    def _dot_ident_arg(self, kids: list[Any]) -> str:
        raise _Unjudged("a leading-dot call")

    def _member_object(self, kids: list[Any]) -> str:
        raise _Unjudged("message construction")

    # -- members
    def _member_dot(self, kids: list[Any]) -> str:
        target, name = kids[0], str(kids[1])
        qualified = _qualified(target)
        if qualified is not None and qualified not in self._bound():
            dotted = f"{qualified}.{name}"
            if dotted in self.globals:
                raise _Unjudged(f"the function {dotted}")
        t = self.check(target)
        if t == DEVICE:
            fields = {"driver": STRING, "attributes": ATTRS2, "capacity": CAPS2}
            if self.features.get("consumableCapacity"):
                fields["allowMultipleAllocations"] = BOOL
            if name not in fields:
                raise _Invalid(f"undefined field '{name}'")
            return fields[name]
        if t in MAPS:
            return MAPS[t]
        if t == DYN:
            return DYN
        if t in ORDERED or t in (QUANTITY, SEMVER) or _elem(t):
            raise _Invalid(f"type '{t}' does not support field selection")
        raise _Unjudged(f"field selection on {t}")

    def _member_index(self, kids: list[Any]) -> str:
        t, key = self.check(kids[0]), self.check(kids[1])
        if t in MAPS:
            if _fits(key, STRING):
                return MAPS[t]
            raise _Invalid(f"found no matching overload for '_[_]' applied to '({t}, {key})'")
        raise _Unjudged(f"indexing {t} (an error in the indexed value is not judged offline)")

    def _ident_arg(self, kids: list[Any]) -> str:
        name = str(kids[0])
        args = list(kids[1].children) if len(kids) > 1 and kids[1] is not None else []
        if name == "has":
            return self._has(args)
        if name == "matches":
            _check_pattern(args[1:])
        if name in _GLOBALS:
            return _pick(self.overloads[name], [self.check(a) for a in args], f"'{name}'")
        if name in self.globals or name in self.macros:
            raise _Unjudged(f"the function {name}()")
        if name in self.members:
            types = [self.check(a) for a in args]
            raise _Invalid(
                f"found no matching overload for '{name}' applied to '({', '.join(types)})' "
                f"({name} is declared only as a member function: x.{name}(...))"
            )
        raise _Invalid(f"undeclared reference to '{name}' (in container '')")

    def _has(self, args: list[Any]) -> str:
        node = _unwrap(args[0]) if len(args) == 1 else None
        if node is None or getattr(node, "data", None) != "member_dot":
            raise _Invalid("invalid argument to has() macro")
        self._member_dot(node.children)
        return BOOL

    def _member_dot_arg(self, kids: list[Any]) -> str:
        target, name = kids[0], str(kids[1])
        args = list(kids[2].children) if len(kids) > 2 and kids[2] is not None else []
        qualified = _qualified(target)
        if qualified is not None and qualified not in self._bound() and qualified != "device":
            dotted = f"{qualified}.{name}"
            if dotted in self.globals or qualified == "cel":
                raise _Unjudged(f"the function {dotted}()")
        if (
            name in _MACROS
            and args
            and _qualified(args[0]) is not None
            and "." not in str(_qualified(args[0]))
        ):
            return self._macro(target, name, args)
        t = self.check(target)
        types = [self.check(a) for a in args]
        if name in ("asInteger", "isInteger") and _call_name(target) in ("add", "sub"):
            raise _Unjudged(f"{name}() of a sum (Kubernetes' int64 form of it)")
        if name == "matches":
            _check_pattern(args)
        if name in _METHODS:
            table = _METHODS[name]
            if t == DYN:
                overloads = [o for per in table.values() for o in per]
                return _pick(overloads, types, f"'{name}'")
            if t in table:
                return _pick(table[t], types, f"'{name}'")
            if name == "size" and not args and (t in MAPS or _elem(t)):
                return INT
            if name in self.members and (_elem(t) or t in MAPS):
                raise _Unjudged(f"{name}() on {t}")
            raise _Invalid(
                f"found no matching overload for '{name}' applied to '{t}.({', '.join(types)})'"
            )
        if name in self.members or name in self.macros:
            raise _Unjudged(f"the function {name}()")
        if name in self.globals:
            raise _Invalid(
                f"found no matching overload for '{name}' applied to '{t}.({', '.join(types)})' "
                f"({name} is declared only as a global function: {name}(...))"
            )
        raise _Invalid(f"undeclared reference to '{name}' (in container '')")

    def _macro(self, target: Any, name: str, args: list[Any]) -> str:
        if len(args) != 2:
            raise _Unjudged(f"{name}() with {len(args)} arguments")
        if len(self.scopes) >= MAX_MACRO_DEPTH:
            raise _Unjudged("macros nested more than twice (estimated cost not bounded here)")
        t = self.check(target)
        if t in MAPS:
            elem = STRING
        elif t == DYN:
            raise _Unjudged(f"{name}() over a dyn value")
        else:
            elem = _elem(t)
            if elem is None:
                raise _Invalid(
                    f"found no matching overload for '{name}': {t} is not a list or a map"
                )
        var = str(_qualified(args[0]))
        self.scopes.append({var: elem})
        try:
            body = self.check(args[1])
        finally:
            self.scopes.pop()
        if name == "map":
            return _list(body)
        if not _fits(body, BOOL):
            raise _Invalid(f"found no matching overload for '{name}': the predicate is {body}")
        return _list(elem) if name == "filter" else BOOL

    def _bound(self) -> set[str]:
        return {n for scope in self.scopes for n in scope}


def _unwrap(node: Any) -> Any:
    from lark import Tree

    while (
        isinstance(node, Tree)
        and len(node.children) == 1
        and isinstance(node.children[0], Tree)
        and node.data != "paren_expr"
    ):
        node = node.children[0]
    return node


def _call_name(node: Any) -> str | None:
    node = _unwrap(node)
    if getattr(node, "data", None) == "member_dot_arg":
        return str(node.children[1])
    return None


#: Regular expression syntax that Python's ``re`` and RE2 read differently or RE2 lacks.
_NOT_RE2 = re.compile(r"\(\?[=!<>P#]|\\[1-9]|\\[AZzbB]|[*+?}]\+|\(\?[a-z]*-")


def _check_pattern(args: list[Any]) -> None:
    """A literal pattern is compiled by Kubernetes at compile time (``invalid matches
    argument``); a non-literal one at run time."""
    node = _unwrap(args[0]) if args else None
    if getattr(node, "data", None) != "literal" or node.children[0].type != "STRING_LIT":
        return
    raw = str(node.children[0])
    if raw[:1] in "rR" or "\\" in raw:
        raise _Unjudged("a regular expression with escapes or a raw string")
    pattern = raw[1:-1]
    if _NOT_RE2.search(pattern):
        raise _Unjudged("a regular expression RE2 may read differently")
    try:
        re.compile(pattern)
    except re.error:
        raise _Invalid("invalid matches argument") from None


def _find(node: Any, data: str) -> Any:
    """The ``data`` node that ``node`` wraps through single-child nodes, or None."""
    from lark import Tree

    while isinstance(node, Tree):
        if node.data == data:
            return node
        if len(node.children) != 1 or node.data == "paren_expr":
            return None
        node = node.children[0]
    return None


def _qualified(node: Any) -> str | None:
    """``sets`` for an identifier, ``a.b`` for a chain of identifiers; None otherwise."""
    node = _unwrap(node)
    data = getattr(node, "data", None)
    if data == "ident":
        return str(node.children[0])
    if data == "member_dot":
        inner = _qualified(node.children[0])
        return f"{inner}.{node.children[1]}" if inner else None
    return None


_OPTIONAL_RE = re.compile(r"\.\s*\?|\[\s*\?|\{\s*\?|,\s*\?")


def _strip_strings(text: str) -> str:
    return re.sub(
        r"'''.*?'''|\"\"\".*?\"\"\"|'(?:\\.|[^'\\])*'|\"(?:\\.|[^\"\\])*\"", "''", text, flags=re.S
    )


def judge(
    expression: Any, features: Mapping[str, bool] | None = None, release: str | None = None
) -> Verdict:
    """The compile verdict on one selector ``expression`` for a new object, with the DRA
    CEL ``features`` of the release (``{"consumableCapacity": bool}``; default: on, as in
    1.36+) and the functions and macros of the environment of ``release`` (``1.33.13``;
    default: the newest, ``dra.cel_env.tables``). A release older than 1.33 cannot be
    judged. Never raises."""
    feats = {"consumableCapacity": True} if features is None else dict(features)
    if not isinstance(expression, str):
        return Verdict(INVALID, f"expression {expression!r} is not a string")
    if len(expression.encode()) > MAX_LENGTH:
        return Verdict(TOO_LONG, f"may not be longer than {MAX_LENGTH} bytes")
    if _OPTIONAL_RE.search(_strip_strings(expression)):
        return Verdict(
            CANNOT_JUDGE,
            "the optional syntax (.?field, [?key]) cannot be judged offline; Kubernetes "
            "accepts it (cel-go's optional types)",
        )
    try:
        tree = vcel.parse(expression)
    except vcel.CelError as err:
        return Verdict(INVALID, str(err))
    try:
        checker = _Checker(feats, release)
    except ValueError as err:
        return Verdict(CANNOT_JUDGE, f"cannot judge offline: {err}")
    try:
        result = checker.check(tree)
    except _Invalid as err:
        return Verdict(INVALID, f"compilation failed: {err}")
    except _Unjudged as err:
        return Verdict(CANNOT_JUDGE, f"cannot judge offline: {err}")
    if result not in (BOOL, DYN):
        return Verdict(INVALID, f"must evaluate to bool or the unknown type, not {result}")
    return Verdict(OK)


def _error_kind(message: str) -> str:
    low = message.lower()
    if "no such key" in low or "no such member" in low:
        return "no_such_key"
    if "no such overload" in low or "no matching overload" in low or "unsupported" in low:
        return "no_such_overload"
    if "out of range" in low:
        return "out_of_range"
    return "other"


def evaluate(
    expression: str,
    driver: str,
    device: Mapping[str, Any],
    features: Mapping[str, bool] | None = None,
    list_attributes: bool = True,
    release: str | None = None,
) -> Outcome:
    """The result of ``expression`` on one ResourceSlice ``device`` of ``driver``, as
    kube-scheduler gets it (``DeviceMatches``). ``list_attributes`` False: the release
    refuses list-type attribute values (1.36 without DRAListTypeAttributes: "unsupported
    attribute value" for the whole device). ``release``: as for :func:`judge`. Not judged
    when :func:`judge` cannot judge the expression; an expression that does not compile
    gives no result. Never raises."""
    verdict = judge(expression, features, release)
    if verdict.verdict == CANNOT_JUDGE:
        return Outcome(None, message=verdict.message, judged=False)
    if verdict.verdict != OK:
        return Outcome(None, "not_compiled", verdict.message)
    body = device_fields(device)
    if not list_attributes:
        for name, value in (body.get("attributes") or {}).items():
            if isinstance(value, Mapping) and set(value) & {"strings", "ints", "bools", "versions"}:
                return Outcome(None, "other", f"attribute {name}: unsupported attribute value")
    try:
        activation = vcel.device_activation(driver, device)
    except vcel.CelError as err:
        return Outcome(None, "other", str(err))
    outcome = vcel.Selector(expression).evaluate(activation)
    if outcome.error:
        if "returned" in outcome.error and "not bool" in outcome.error:
            return Outcome(None, "not_bool", outcome.error)
        return Outcome(None, _error_kind(outcome.error), outcome.error)
    return Outcome(outcome.matched)
