# Copyright: gpufleet contributors
# Apache License 2.0 (see LICENSE)
"""Feature-gate and runtime-config values as the components parse them, and the records
of an edit: ``parse_feature_gates``, ``parse_runtime_config``, ``parse_go_bool``,
``merge_feature_gates``, ``merge_runtime_config``, ``format_entries``; ``FlagEdit`` (what
to set and what must be absent, per component), ``Change``, ``ValueEdit``,
``EditResult``, ``ComponentFlags``; the errors ``ConfigEditError`` and ``FlagValueError``.

Value syntax, as the components parse it:

* ``--feature-gates``: ``featureGate.Set`` in
  ``staging/src/k8s.io/component-base/featuregate/feature_gate.go``: comma-separated
  ``Name=<bool>``, empty segments skipped, name and value trimmed, ``<bool>`` as Go's
  ``strconv.ParseBool`` (``1 t T TRUE true True 0 f F FALSE false False``); a later entry
  for the same name wins.
* ``--runtime-config``: ``ConfigurationMap.Set`` in
  ``staging/src/k8s.io/component-base/cli/flag/configuration_map.go`` (``key[=value]``,
  a missing value is ``""``), checked by ``MergeAPIResourceConfigs`` in
  ``staging/src/k8s.io/apiserver/pkg/server/resourceconfig/helpers.go``: ``api/all``,
  ``api/ga``, ``api/beta``, ``api/alpha`` take exactly ``true``/``false``; other keys are
  ``group/version`` or ``group/version/resource`` (resource lower case) with ``""``
  (= true) or a ``strconv.ParseBool`` value.

Standard library only.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "Change",
    "ComponentFlags",
    "ConfigEditError",
    "EditResult",
    "FlagEdit",
    "FlagEntry",
    "FlagValueError",
    "ValueEdit",
    "format_entries",
    "merge_feature_gates",
    "merge_runtime_config",
    "parse_feature_gates",
    "parse_go_bool",
    "parse_runtime_config",
]


FEATURE_GATES = "feature-gates"


RUNTIME_CONFIG = "runtime-config"


_GO_TRUE = frozenset(("1", "t", "T", "TRUE", "true", "True"))


_GO_FALSE = frozenset(("0", "f", "F", "FALSE", "false", "False"))


_GATE_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9]*\Z")


_RC_PART = r"[A-Za-z0-9](?:[A-Za-z0-9.-]*[A-Za-z0-9])?"


_RC_KEY = re.compile(rf"^{_RC_PART}/{_RC_PART}(?:/{_RC_PART})?\Z")


_RC_API_KEYS = frozenset(("api/all", "api/ga", "api/beta", "api/alpha"))


GO_BOOL_HELP = "Go strconv.ParseBool: true, false, 1, 0, t, f, T, F, TRUE, FALSE, True, False"


_BOOL_HELP = GO_BOOL_HELP


class ConfigEditError(ValueError):
    """A document or an input cannot be edited; the message names the value and the fix."""


class FlagValueError(ConfigEditError):
    """A ``--feature-gates`` or ``--runtime-config`` value is malformed."""


# ------------------------------------------------------------------ results


@dataclass(frozen=True)
class Change:
    """One change: in ``where`` (a file place, e.g. ``kube-apiserver command
    --feature-gates``), ``what`` (a gate, a runtime-config key, a flag) went from ``old``
    to ``new`` (``None``: absent) because ``why``."""

    where: str
    what: str
    old: str | None
    new: str | None
    why: str

    def to_dict(self) -> dict[str, str | None]:
        return {
            "where": self.where,
            "what": self.what,
            "old": self.old,
            "new": self.new,
            "why": self.why,
        }

    def __str__(self) -> str:
        return f"{self.where}: {self.what}: {self.old!r} -> {self.new!r} ({self.why})"


@dataclass(frozen=True)
class ValueEdit:
    """The result of merging one flag value: ``new`` is ``None`` when no entry is left
    (the flag should go); ``changes`` is empty when ``new == old``."""

    old: str | None
    new: str | None
    changes: tuple[Change, ...] = ()

    @property
    def changed(self) -> bool:
        return bool(self.changes)


@dataclass(frozen=True)
class EditResult:
    """An edited document: the new ``text`` (equal to the input when nothing changed)
    and the ``changes`` made."""

    text: str
    changes: tuple[Change, ...] = ()

    @property
    def changed(self) -> bool:
        return bool(self.changes)

    def changes_as_dicts(self) -> list[dict[str, str | None]]:
        return [c.to_dict() for c in self.changes]


@dataclass(frozen=True)
class ComponentFlags:
    """Effective ``--feature-gates`` (name -> bool) and ``--runtime-config``
    (key -> value as written, ``""`` for a bare key) of one component."""

    feature_gates: dict[str, bool] = field(default_factory=dict)
    runtime_config: dict[str, str] = field(default_factory=dict)


# ------------------------------------------------------------------ wanted edits


def _as_go_bool(value: Any, variable: str) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and parse_go_bool(value) is not None:
        return bool(parse_go_bool(value))
    raise ConfigEditError(
        f"{variable}={value!r} is not a boolean; fix: use true or false ({_BOOL_HELP})"
    )


@dataclass
class FlagEdit:
    """The wanted state of one component's flags.

    ``feature_gates``: gate name -> value to set; ``absent_feature_gates``: gate names that
    must not appear; ``runtime_config``: key (``group/version``) -> ``"true"``/``"false"``;
    ``absent_runtime_config``: keys that must not appear (a ``group/version`` also removes
    its ``group/version/resource`` entries). Empty means "leave this flag alone".
    """

    feature_gates: dict[str, bool] = field(default_factory=dict)
    absent_feature_gates: frozenset[str] = frozenset()
    runtime_config: dict[str, str] = field(default_factory=dict)
    absent_runtime_config: frozenset[str] = frozenset()

    @classmethod
    def from_params(cls, params: Mapping[str, Any] | None, variable: str = "") -> FlagEdit:
        """Build and validate from module parameters or a dict with the four keys above.

        ``variable`` prefixes the parameter names in error messages (``apiserver`` gives
        ``apiserver.feature_gates.X``; empty: ``feature_gates.X``).
        Raises ConfigEditError for bad names, non-boolean values, or a name both set and
        absent.
        """

        def name_of(param: str) -> str:
            return f"{variable}.{param}" if variable else param

        params = params or {}
        gates_in = params.get("feature_gates") or {}
        if not isinstance(gates_in, Mapping):
            raise ConfigEditError(
                f"{name_of('feature_gates')}={gates_in!r} is not a mapping; "
                "fix: give gate names and booleans, e.g. {DRAPrioritizedList: true}"
            )
        gates: dict[str, bool] = {}
        for name, value in gates_in.items():
            _check_gate_name(str(name), name_of("feature_gates"))
            gates[str(name)] = _as_go_bool(value, name_of(f"feature_gates.{name}"))
        absent_gates = frozenset(str(n) for n in params.get("absent_feature_gates") or ())
        for name in absent_gates:
            _check_gate_name(name, name_of("absent_feature_gates"))
        rc_in = params.get("runtime_config") or {}
        if not isinstance(rc_in, Mapping):
            raise ConfigEditError(
                f"{name_of('runtime_config')}={rc_in!r} is not a mapping; fix: give keys and "
                'values, e.g. {"resource.k8s.io/v1beta1": "true"}'
            )
        runtime: dict[str, str] = {}
        for key, value in rc_in.items():
            _check_runtime_key(str(key), name_of("runtime_config"))
            flag = _as_go_bool(value, name_of(f"runtime_config.{key}"))
            runtime[str(key)] = "true" if flag else "false"
        absent_rc = frozenset(str(k) for k in params.get("absent_runtime_config") or ())
        for key in absent_rc:
            _check_runtime_key(key, name_of("absent_runtime_config"))
        edit = cls(gates, absent_gates, runtime, absent_rc)
        edit.validate(variable or "parameters")
        return edit

    def validate(self, variable: str = "edit") -> None:
        """Raise ConfigEditError when a gate or key is both wanted and absent."""
        both = sorted(set(self.feature_gates) & set(self.absent_feature_gates))
        if both:
            raise ConfigEditError(
                f"{variable}: feature gate(s) {', '.join(both)} are both in feature_gates and "
                "absent_feature_gates; fix: keep each name in one of the two"
            )
        clash = sorted(
            k
            for k in self.runtime_config
            for a in self.absent_runtime_config
            if k == a or k.startswith(a + "/")
        )
        if clash:
            raise ConfigEditError(
                f"{variable}: runtime-config key(s) {', '.join(clash)} are both set and "
                "absent (absent_runtime_config); fix: keep each key in one of the two"
            )

    @property
    def touches_feature_gates(self) -> bool:
        return bool(self.feature_gates or self.absent_feature_gates)

    @property
    def touches_runtime_config(self) -> bool:
        return bool(self.runtime_config or self.absent_runtime_config)

    @property
    def empty(self) -> bool:
        return not (self.touches_feature_gates or self.touches_runtime_config)


def _check_gate_name(name: str, variable: str) -> None:
    if not _GATE_NAME.match(name):
        raise ConfigEditError(
            f"{variable}: {name!r} is not a feature gate name; fix: use the gate's "
            "CamelCase name, e.g. DynamicResourceAllocation"
        )


def _check_runtime_key(key: str, variable: str) -> None:
    if key in _RC_API_KEYS:
        return
    if not _RC_KEY.match(key):
        raise ConfigEditError(
            f"{variable}: {key!r} is not a runtime-config key; fix: use group/version "
            "(resource.k8s.io/v1beta1), group/version/resource or api/all|ga|beta|alpha"
        )
    parts = key.split("/")
    if len(parts) == 3 and parts[2] != parts[2].lower():
        raise ConfigEditError(
            f"{variable}: {key!r}: the resource of group/version/resource is lower case "
            f"plural; fix: {'/'.join([*parts[:2], parts[2].lower()])}"
        )


# ------------------------------------------------------------------ flag values


def parse_go_bool(text: str) -> bool | None:
    """Go's ``strconv.ParseBool``: the boolean, or ``None`` when ``text`` is not one."""
    if text in _GO_TRUE:
        return True
    if text in _GO_FALSE:
        return False
    return None


@dataclass(frozen=True)
class FlagEntry:
    """One entry of a flag value: ``key``, its ``value`` (both trimmed; ``""`` for a bare
    runtime-config key) and the ``token`` exactly as written between the commas."""

    key: str
    value: str
    token: str


def parse_feature_gates(value: str, where: str = "--feature-gates") -> tuple[FlagEntry, ...]:
    """Parse a ``--feature-gates`` value (``A=true,B=false``) into entries, in order.

    Raises FlagValueError naming ``where``, the value and the bad entry: a segment without
    ``=``, a name that is not a gate name, a value that is not a Go boolean.
    """
    entries: list[FlagEntry] = []
    for token in value.split(","):
        if token == "":
            continue
        key, sep, val = token.partition("=")
        key, val = key.strip(), val.strip()
        if not sep:
            raise FlagValueError(
                f"{where}: value {value!r} is malformed: entry {token!r} has no '=<bool>'; "
                "fix: write Name=true or Name=false"
            )
        if not _GATE_NAME.match(key):
            raise FlagValueError(
                f"{where}: value {value!r} is malformed: {key!r} in {token!r} is not a "
                "feature gate name; fix: write Name=true with a CamelCase gate name"
            )
        if parse_go_bool(val) is None:
            raise FlagValueError(
                f"{where}: value {value!r} is malformed: {val!r} in {token!r} is not a "
                f"boolean; fix: use {_BOOL_HELP}"
            )
        entries.append(FlagEntry(key, val, token))
    return tuple(entries)


def parse_runtime_config(value: str, where: str = "--runtime-config") -> tuple[FlagEntry, ...]:
    """Parse a ``--runtime-config`` value (``g/v=true,api/all=false,g/v2``) into entries.

    Raises FlagValueError naming ``where``, the value and the bad entry: an empty key, a
    key that is neither ``api/<all|ga|beta|alpha>`` nor ``group/version[/resource]``, an
    upper-case resource, or a value kube-apiserver rejects.
    """
    entries: list[FlagEntry] = []
    for token in value.split(","):
        if token == "":
            continue
        key, sep, val = token.partition("=")
        key, val = key.strip(), val.strip()
        problem = ""
        if not key:
            problem = f"entry {token!r} has no key"
        elif key in _RC_API_KEYS:
            if val not in ("true", "false"):
                problem = f"{key} takes exactly true or false, not {val!r}"
        elif not _RC_KEY.match(key):
            problem = f"key {key!r} is not group/version or group/version/resource"
        elif len(key.split("/")) == 3 and key.split("/")[2] != key.split("/")[2].lower():
            problem = f"resource in {key!r} must be lower case plural"
        elif sep and val != "" and parse_go_bool(val) is None:
            problem = f"value {val!r} of {key} is not a boolean ({_BOOL_HELP})"
        if problem:
            raise FlagValueError(
                f"{where}: value {value!r} is malformed: {problem}; fix: write "
                "group/version=true or group/version=false entries separated by commas"
            )
        entries.append(FlagEntry(key, val, token))
    return tuple(entries)


def format_entries(entries: Iterable[FlagEntry]) -> str:
    """Join entries back into a flag value, each token as written."""
    return ",".join(e.token for e in entries)


def gate_text(value: bool) -> str:
    return "true" if value else "false"


def _rc_enabled(value: str) -> bool:
    """What kube-apiserver makes of a runtime-config value (``""`` is true)."""
    return True if value == "" else bool(parse_go_bool(value))


def _merge(
    entries: Sequence[FlagEntry],
    original: str | None,
    wanted: Mapping[str, str],
    is_absent: Callable[[str], bool],
    same: Callable[[str, str], bool],
    where: str,
    kind: str,
) -> ValueEdit:
    both = sorted(k for k in wanted if is_absent(k))
    if both:
        raise ConfigEditError(
            f"{where}: {kind} {', '.join(both)} both wanted and absent; fix: keep each in one"
        )
    last = {e.key: i for i, e in enumerate(entries)}
    changes: list[Change] = []
    tokens: list[str] = []
    for i, e in enumerate(entries):
        if is_absent(e.key):
            changes.append(Change(where, e.key, e.value, None, f"{kind} must be absent"))
        elif e.key in wanted and i != last[e.key]:
            changes.append(
                Change(
                    where,
                    e.key,
                    e.value,
                    None,
                    f"duplicate {kind} entry (the last one counts); one entry is kept",
                )
            )
        elif e.key in wanted and not same(e.value, wanted[e.key]):
            tokens.append(f"{e.key}={wanted[e.key]}")
            changes.append(Change(where, e.key, e.value, wanted[e.key], f"{kind} wanted"))
        else:
            tokens.append(e.token)
    for key, value in wanted.items():
        if key not in last:
            tokens.append(f"{key}={value}")
            changes.append(Change(where, key, None, value, f"{kind} wanted, was missing"))
    if not changes:
        return ValueEdit(original, original)
    return ValueEdit(original, ",".join(tokens) or None, tuple(changes))


def merge_feature_gates(
    value: str | None,
    wanted: Mapping[str, bool],
    absent: Iterable[str] = (),
    where: str = "--feature-gates",
) -> ValueEdit:
    """Merge a ``--feature-gates`` value (``None``: flag not there).

    Gates in ``wanted`` get their value (a gate already set to an equal value keeps its
    spelling: ``True`` stays), gates in ``absent`` are removed, every other entry keeps its
    text and position; new gates are appended in ``wanted`` order. Raises FlagValueError
    for a malformed ``value``.
    """
    entries = parse_feature_gates(value, where) if value else ()
    absent_set = frozenset(absent)
    return _merge(
        entries,
        value,
        {k: gate_text(v) for k, v in wanted.items()},
        absent_set.__contains__,
        lambda old, new: parse_go_bool(old) == parse_go_bool(new),
        where,
        "feature gate",
    )


def merge_runtime_config(
    value: str | None,
    wanted: Mapping[str, str],
    absent: Iterable[str] = (),
    where: str = "--runtime-config",
) -> ValueEdit:
    """Merge a ``--runtime-config`` value (``None``: flag not there).

    Keys in ``wanted`` get their value (``"true"``/``"false"``; an existing equivalent such
    as a bare key or ``1`` is kept), keys in ``absent`` are removed together with their
    ``key/<resource>`` entries, unrelated entries keep text and position. Raises
    FlagValueError for a malformed ``value``.
    """
    entries = parse_runtime_config(value, where) if value else ()
    absent_set = frozenset(absent)

    def is_absent(key: str) -> bool:
        return any(key == a or key.startswith(a + "/") for a in absent_set)

    return _merge(
        entries,
        value,
        dict(wanted),
        is_absent,
        lambda old, new: _rc_enabled(old) == _rc_enabled(new),
        where,
        "runtime-config",
    )
