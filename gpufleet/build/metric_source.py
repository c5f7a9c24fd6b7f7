"""The metric series a Kubernetes Go source file defines, read from the file itself.

Kubernetes components define their metrics with ``k8s.io/component-base/metrics``: an
options literal (``&metrics.CounterOpts{Namespace: ..., Subsystem: ..., Name: ...}``,
followed by its label names in ``[]string{...}`` for the ``*Vec`` constructors) or a
descriptor for a custom collector (``metrics.NewDesc(name, help, []string{...}, ...)``,
its name a string, a constant, ``A + "_b"`` or ``metrics.BuildFQName(ns, subsystem,
name)``). The full name joins the non-empty parts with ``_`` as ``BuildFQName`` does
(``k8s.io/component-base/metrics/opts.go``). String constants of the same file are
resolved; an expression that cannot be read is reported, never guessed.

Used by tests/integration/test_metric_series_source.py against the module sources in the
Go module cache (``release_facts.module_dir``).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

_OPTS = re.compile(r"\b(Counter|Gauge|Histogram|Summary|TimingHistogram)Opts\s*\{")
_DESC = re.compile(r"\bNewDesc\s*\(")
_FQ = re.compile(r"^(?:\w+\.)?BuildFQName\s*\((.*)\)$", re.S)
_CONST = re.compile(r"^\s*(?:const\s+)?([A-Za-z_]\w*)(?:\s+string)?\s*=\s*(.+?)\s*$")
_IDENT = re.compile(r"^[A-Za-z_]\w*$")
_CLOSE = {"(": ")", "[": "]", "{": "}"}


@dataclass(frozen=True)
class Defined:
    """A series a file defines: ``name`` (full), ``labels`` (``None``: not a literal list),
    ``line`` (1-based) of its options literal or descriptor, ``kind`` (``counter``,
    ``gauge``, ``histogram``... from the options type; None for a descriptor, whose
    collector chooses)."""

    name: str
    labels: tuple[str, ...] | None
    line: int
    kind: str | None = None


@dataclass(frozen=True)
class Extraction:
    """What a file defines, and the expressions it names series with that could not be
    read (``line: expression``)."""

    series: tuple[Defined, ...]
    unresolved: tuple[str, ...]

    def names(self) -> set[str]:
        return {s.name for s in self.series}


def strip_comments(text: str) -> str:
    """``text`` with Go comments blanked (line structure kept), strings left alone."""
    out: list[str] = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if c in "\"'`":
            end = _string_end(text, i)
            out.append(text[i:end])
            i = end
        elif text.startswith("//", i):
            end = text.find("\n", i)
            i = n if end < 0 else end
        elif text.startswith("/*", i):
            end = text.find("*/", i + 2)
            end = n if end < 0 else end + 2
            out.append(re.sub(r"[^\n]", " ", text[i:end]))
            i = end
        else:
            out.append(c)
            i += 1
    return "".join(out)


def _string_end(text: str, start: int) -> int:
    """Index just past the string or rune literal opening at ``start``."""
    quote = text[start]
    i = start + 1
    while i < len(text):
        if text[i] == "\\" and quote != "`":
            i += 2
            continue
        if text[i] == quote:
            return i + 1
        i += 1
    return len(text)


def _matching(text: str, start: int) -> int:
    """Index of the bracket closing the one at ``start`` (strings skipped)."""
    stack = [_CLOSE[text[start]]]
    i = start + 1
    while i < len(text):
        c = text[i]
        if c in "\"'`":
            i = _string_end(text, i)
            continue
        if c in _CLOSE:
            stack.append(_CLOSE[c])
        elif stack and c == stack[-1]:
            stack.pop()
            if not stack:
                return i
        i += 1
    raise ValueError(f"unbalanced {text[start]!r} at offset {start}")


def split_top(text: str, sep: str = ",") -> list[str]:
    """``text`` split at ``sep`` outside brackets and strings, parts stripped, empty last
    part (a trailing comma) dropped."""
    parts: list[str] = []
    depth, last, i = 0, 0, 0
    while i < len(text):
        c = text[i]
        if c in "\"'`":
            i = _string_end(text, i)
            continue
        if c in "([{":
            depth += 1
        elif c in ")]}":
            depth -= 1
        elif c == sep and depth == 0:
            parts.append(text[last:i].strip())
            last = i + 1
        i += 1
    parts.append(text[last:].strip())
    return parts if parts[-1] else parts[:-1]


def _literal(token: str) -> str | None:
    if len(token) >= 2 and token[0] == token[-1] == "`":
        return token[1:-1]
    if len(token) >= 2 and token[0] == token[-1] == '"':
        return bytes(token[1:-1], "utf-8").decode("unicode_escape")
    return None


def evaluate(expr: str, constants: Mapping[str, str]) -> str | None:
    """The string a Go expression of literals, constants, ``+`` and ``BuildFQName`` has;
    None when a part is anything else."""
    expr = expr.strip()
    parts = split_top(expr, "+")
    if len(parts) > 1:
        values = [evaluate(p, constants) for p in parts]
        return None if any(v is None for v in values) else "".join(values)  # type: ignore[arg-type]
    literal = _literal(expr)
    if literal is not None:
        return literal
    if _IDENT.match(expr):
        return constants.get(expr)
    fq = _FQ.match(expr)
    if fq:
        args = [evaluate(a, constants) for a in split_top(fq.group(1))]
        if len(args) != 3 or any(a is None for a in args):
            return None
        return full_name(*args)  # type: ignore[arg-type]
    return None


def full_name(namespace: str, subsystem: str, name: str) -> str:
    """``BuildFQName``: the non-empty parts joined with ``_``; no name, no series."""
    if not name:
        return ""
    return "_".join(p for p in (namespace, subsystem, name) if p)


def string_constants(text: str) -> dict[str, str]:
    """The string constants (and single-line string variables) of a comment-free file,
    ``const X = "a"`` or inside a ``const (...)`` block, resolved against each other."""
    pending: dict[str, str] = {}
    for line in text.splitlines():
        m = _CONST.match(line)
        if m:
            pending.setdefault(m.group(1), m.group(2))
    resolved: dict[str, str] = {}
    changed = True
    while changed:
        changed = False
        for name, expr in pending.items():
            if name not in resolved:
                value = evaluate(expr, resolved)
                if value is not None:
                    resolved[name] = value
                    changed = True
    return resolved


def _labels(expr: str | None, constants: Mapping[str, str]) -> tuple[str, ...] | None:
    if expr is None:
        return ()
    expr = expr.strip()
    if expr == "nil":
        return ()
    if not expr.startswith("[]string{") or not expr.endswith("}"):
        return None
    values = [evaluate(p, constants) for p in split_top(expr[len("[]string{") : -1])]
    return None if any(v is None for v in values) else tuple(values)  # type: ignore[arg-type]


def _labels_after(text: str, start: int) -> str | None:
    """The label argument after an options literal ending at ``start``: ``None`` when the
    call ends there (no labels), else its text (``[]string{...}`` or another expression)."""
    rest = text[start:]
    if re.match(r"\s*,?\s*\)", rest):
        return None
    literal = re.match(r"\s*,\s*(\[\]string\{)", rest)
    if literal:
        first = start + literal.start(1)
        return text[first : _matching(text, first + len("[]string")) + 1]
    other = re.match(r"\s*,\s*([^,)]+)", rest)
    return other.group(1) if other else None


def _fields(body: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for part in split_top(body):
        key, sep, value = part.partition(":")
        if sep and _IDENT.match(key.strip()):
            out[key.strip()] = value.strip()
    return out


def _from_options(text: str, constants: Mapping[str, str]) -> tuple[list[Defined], list[str]]:
    found: list[Defined] = []
    unresolved: list[str] = []
    for m in _OPTS.finditer(text):
        line = text.count("\n", 0, m.start()) + 1
        try:
            close = _matching(text, m.end() - 1)
            labels = _labels_after(text, close + 1)
        except ValueError as exc:
            unresolved.append(f"{line}: {exc}")
            continue
        fields = _fields(text[m.end() : close])
        parts = [
            evaluate(fields.get(k, '""'), constants) for k in ("Namespace", "Subsystem", "Name")
        ]
        if any(p is None for p in parts):
            written = (fields.get(k, "") for k in ("Namespace", "Subsystem", "Name"))
            unresolved.append(f"{line}: {' / '.join(written)}")
            continue
        name = full_name(*parts)  # type: ignore[arg-type]
        if name:
            kind = re.sub(r"(?<!^)([A-Z])", r"_\1", m.group(1)).lower()
            found.append(Defined(name, _labels(labels, constants), line, kind))
    return found, unresolved


def _from_descriptors(text: str, constants: Mapping[str, str]) -> tuple[list[Defined], list[str]]:
    found: list[Defined] = []
    unresolved: list[str] = []
    for m in _DESC.finditer(text):
        line = text.count("\n", 0, m.start()) + 1
        try:
            close = _matching(text, m.end() - 1)
        except ValueError as exc:
            unresolved.append(f"{line}: {exc}")
            continue
        args = split_top(text[m.end() : close])
        if not args:
            continue
        name = evaluate(args[0], constants)
        if not name:
            unresolved.append(f"{line}: {args[0]}")
            continue
        found.append(Defined(name, _labels(args[2] if len(args) > 2 else None, constants), line))
    return found, unresolved


def extract(text: str) -> Extraction:
    """Every series the Go source ``text`` defines, in source order."""
    code = strip_comments(text)
    constants = string_constants(code)
    opts, bad_opts = _from_options(code, constants)
    descs, bad_descs = _from_descriptors(code, constants)
    series = sorted(opts + descs, key=lambda d: d.line)
    return Extraction(tuple(series), tuple(bad_opts + bad_descs))


def extract_file(path: Path) -> Extraction:
    return extract(path.read_text(encoding="utf-8"))
