# Copyright: gpufleet contributors
# Apache License 2.0 (see LICENSE)
"""Edit feature gates and runtime-config where kubeadm clusters keep them.

This module decides HOW a wanted setting is written; WHAT to set per Kubernetes version
is the version model's business (``dra_versions``), which this module does not import.
Input per component is a :class:`FlagEdit`: feature gates to set
(``{"DRAPrioritizedList": True}``), gate names that must be absent, runtime-config
entries to set (``{"resource.k8s.io/v1beta1": "true"}``) and runtime-config keys that
must be absent.

Places edited, each by a pure function returning an :class:`EditResult` (new text plus
one :class:`Change` per thing changed, with its old and new value and why):

* ``edit_cluster_configuration``: the kubeadm ``ClusterConfiguration`` (ConfigMap
  ``kube-system/kubeadm-config``, key ``ClusterConfiguration``, or a kubeadm config
  file), ``apiServer``/``controllerManager``/``scheduler`` ``extraArgs`` for
  ``kubeadm.k8s.io/v1beta3`` (a map) and ``v1beta4``/``v1`` (a list of ``{name, value}``).
* ``edit_static_pod_manifest``: ``/etc/kubernetes/manifests/kube-*.yaml``; only the
  ``--feature-gates=``/``--runtime-config=`` items of the component's ``command`` change,
  the rest of the file is kept byte for byte where the layout allows.
* ``edit_kubelet_configuration``: the ``featureGates`` map of a ``KubeletConfiguration``
  (``/var/lib/kubelet/config.yaml``, ConfigMap ``kube-system/kubelet-config`` ``kubelet``).
* ``enable_dynamic_resources``: a custom ``KubeSchedulerConfiguration`` that disables the
  ``DynamicResources`` plugin.

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
* A flag given twice is applied in order (both values are ``Set`` on the same map), so
  duplicates are merged into the last occurrence and the earlier ones dropped.

Needs PyYAML (``HAS_YAML``); output is dumped with ``sort_keys=False`` so keys keep
their order. Comments in re-dumped YAML documents are lost (PyYAML does not keep them);
the static pod manifest edit keeps them because it edits the text in place.
"""

from __future__ import annotations

import difflib
import re
import shlex
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

try:
    import yaml

    HAS_YAML = True
    YAML_IMPORT_ERROR: str | None = None
except ImportError as _err:  # pragma: no cover - exercised only where PyYAML is missing
    yaml = None  # type: ignore[assignment]
    HAS_YAML = False
    YAML_IMPORT_ERROR = str(_err)

__all__ = [
    "APISERVER",
    "CLUSTER_CONFIGURATION_SECTIONS",
    "COMPONENTS",
    "CONTROLLER_MANAGER",
    "DEFAULT_KUBELET_CONFIG",
    "DYNAMIC_RESOURCES",
    "KUBEADM_APIS",
    "SCHEDULER",
    "Change",
    "ComponentFlags",
    "ConfigEditError",
    "EditResult",
    "FlagEdit",
    "FlagEntry",
    "FlagValueError",
    "SystemdService",
    "ValueEdit",
    "cluster_configuration_flags",
    "edit_cluster_configuration",
    "edit_command",
    "edit_kubelet_configuration",
    "edit_static_pod_manifest",
    "enable_dynamic_resources",
    "expand_exec_start",
    "format_entries",
    "kubelet_argv_from_systemd",
    "kubelet_config_path_from_cmdline",
    "kubelet_config_path_from_systemd",
    "kubelet_feature_gates",
    "kubelet_flag_values",
    "merge_feature_gates",
    "merge_runtime_config",
    "parse_environment_file",
    "parse_feature_gates",
    "parse_go_bool",
    "parse_runtime_config",
    "parse_systemd_service",
    "scheduler_config_has_dynamic_resources",
    "static_pod_flags",
]

APISERVER = "kube-apiserver"
CONTROLLER_MANAGER = "kube-controller-manager"
SCHEDULER = "kube-scheduler"
#: Control-plane components kubeadm runs as static pods, in kubeadm's order.
COMPONENTS = (APISERVER, CONTROLLER_MANAGER, SCHEDULER)
#: Component -> section of the kubeadm ClusterConfiguration holding its ``extraArgs``.
CLUSTER_CONFIGURATION_SECTIONS = {
    APISERVER: "apiServer",
    CONTROLLER_MANAGER: "controllerManager",
    SCHEDULER: "scheduler",
}
#: kubeadm config API -> shape of ``extraArgs``: ``map`` (v1beta3) or ``list`` of
#: ``{name, value}`` (v1beta4 from 1.31, kubernetes/kubernetes#125029; v1 experimental
#: in 1.36+, adds ``mergeMethod``). Source: ``cmd/kubeadm/app/apis/kubeadm/<version>/types.go``.
KUBEADM_APIS = {
    "kubeadm.k8s.io/v1beta3": "map",
    "kubeadm.k8s.io/v1beta4": "list",
    "kubeadm.k8s.io/v1": "list",
}
KUBELET_CONFIG_API = "kubelet.config.k8s.io/v1beta1"
SCHEDULER_CONFIG_API = "kubescheduler.config.k8s.io/v1"
#: Where kubeadm writes the kubelet configuration (``cmd/kubeadm/app/constants``
#: ``KubeletConfigurationFileName`` under ``KubeletRunDirectory``).
DEFAULT_KUBELET_CONFIG = "/var/lib/kubelet/config.yaml"
DYNAMIC_RESOURCES = "DynamicResources"

FEATURE_GATES = "feature-gates"
RUNTIME_CONFIG = "runtime-config"

_GO_TRUE = frozenset(("1", "t", "T", "TRUE", "true", "True"))
_GO_FALSE = frozenset(("0", "f", "F", "FALSE", "false", "False"))
_GATE_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9]*$")
_RC_PART = r"[A-Za-z0-9](?:[A-Za-z0-9.-]*[A-Za-z0-9])?"
_RC_KEY = re.compile(rf"^{_RC_PART}/{_RC_PART}(?:/{_RC_PART})?$")
_RC_API_KEYS = frozenset(("api/all", "api/ga", "api/beta", "api/alpha"))
GO_BOOL_HELP = "Go strconv.ParseBool: true, false, 1, 0, t, f, T, F, TRUE, FALSE, True, False"
_BOOL_HELP = GO_BOOL_HELP


class ConfigEditError(ValueError):
    """A document or an input cannot be edited; the message names the value and the fix."""


class FlagValueError(ConfigEditError):
    """A ``--feature-gates`` or ``--runtime-config`` value is malformed."""


def _require_yaml() -> None:
    if not HAS_YAML:
        raise ConfigEditError(
            f"PyYAML is required to edit Kubernetes configuration ({YAML_IMPORT_ERROR}); "
            "fix: install python3-yaml (Debian) or pip install PyYAML on this host"
        )


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


def _gate_text(value: bool) -> str:
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
        {k: _gate_text(v) for k, v in wanted.items()},
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


# ------------------------------------------------------------------ argument lists


@dataclass
class _Arg:
    """One argument: ``name`` is the flag name for the flags this module manages, else
    ``None``; ``origin`` is the untouched original (returned as is when unchanged)."""

    name: str | None
    value: str
    origin: Any = None
    edited: bool = False


def _edit_args(
    args: list[_Arg], edit: FlagEdit, where: Callable[[str], str]
) -> tuple[list[_Arg], list[Change]]:
    """Apply ``edit`` to an argument list: merge all occurrences of a managed flag into
    its last one, add a missing flag at the end, drop a flag left without entries."""
    out = list(args)
    changes: list[Change] = []
    for flag, touched in (
        (FEATURE_GATES, edit.touches_feature_gates),
        (RUNTIME_CONFIG, edit.touches_runtime_config),
    ):
        if not touched:
            continue
        place = where(flag)
        index = [i for i, a in enumerate(out) if a.name == flag]
        combined = ",".join(out[i].value for i in index) if index else None
        if flag == FEATURE_GATES:
            merged = merge_feature_gates(
                combined, edit.feature_gates, edit.absent_feature_gates, place
            )
        else:
            merged = merge_runtime_config(
                combined, edit.runtime_config, edit.absent_runtime_config, place
            )
        changes.extend(merged.changes)
        if not merged.changed and len(index) <= 1:
            continue
        for i in index[:-1]:
            changes.append(
                Change(
                    place,
                    f"--{flag}",
                    out[i].value,
                    None,
                    f"duplicate --{flag} (the component applies each in turn); merged into "
                    "the last one",
                )
            )
        drop = set(index[:-1])
        parse = parse_feature_gates if flag == FEATURE_GATES else parse_runtime_config
        if not merged.new or not parse(merged.new, place):
            if index:
                changes.append(
                    Change(place, f"--{flag}", combined, None, "no entry left; flag removed")
                )
                drop.add(index[-1])
        elif index:
            last = out[index[-1]]
            if merged.new != last.value:
                out[index[-1]] = _Arg(flag, merged.new, last.origin, edited=True)
        else:
            out.append(_Arg(flag, merged.new, None, edited=True))
        out = [a for i, a in enumerate(out) if i not in drop]
    return out, changes


def _command_to_args(argv: Sequence[str], where: str) -> list[_Arg]:
    args: list[_Arg] = []
    i = 0
    while i < len(argv):
        item = argv[i]
        if not isinstance(item, str):
            args.append(_Arg(None, "", ("other", item)))
            i += 1
            continue
        matched = False
        for flag in (FEATURE_GATES, RUNTIME_CONFIG):
            if item.startswith(f"--{flag}="):
                args.append(_Arg(flag, item[len(flag) + 3 :], ("eq", item)))
                matched = True
            elif item == f"--{flag}":
                if i + 1 >= len(argv) or not isinstance(argv[i + 1], str):
                    raise ConfigEditError(
                        f"{where}: --{flag} is the last command item and has no value; fix: "
                        f"write --{flag}=<value> or remove it"
                    )
                args.append(_Arg(flag, argv[i + 1], ("sep", item, argv[i + 1])))
                i += 1
                matched = True
        if not matched:
            args.append(_Arg(None, item, ("other", item)))
        i += 1
    return args


def _args_to_command(args: Sequence[_Arg]) -> list[str]:
    argv: list[str] = []
    for a in args:
        kind = a.origin[0] if a.origin else "eq"
        if not a.edited:
            argv.extend(a.origin[1:])
        elif kind == "sep":
            argv.extend([f"--{a.name}", a.value])
        else:
            argv.append(f"--{a.name}={a.value}")
    return argv


def edit_command(
    argv: Sequence[str], edit: FlagEdit, where: str = "command"
) -> tuple[list[str], tuple[Change, ...]]:
    """Apply ``edit`` to a component command line (``["kube-apiserver", "--a=b", ...]``).

    Both ``--flag=value`` and ``--flag value`` are understood (the value is rewritten in
    the form found); a missing flag is appended as ``--flag=value``. Returns the new argv
    and the changes. Raises ConfigEditError/FlagValueError for malformed input.
    """
    args, changes = _edit_args(
        _command_to_args(argv, where), edit, lambda flag: f"{where} --{flag}"
    )
    return _args_to_command(args), tuple(changes)


def _command_flags(argv: Sequence[str], where: str) -> ComponentFlags:
    args = _command_to_args(argv, where)
    return _flags_from_values(
        [a.value for a in args if a.name == FEATURE_GATES],
        [a.value for a in args if a.name == RUNTIME_CONFIG],
        where,
    )


def _flags_from_values(gates: Sequence[str], runtime: Sequence[str], where: str) -> ComponentFlags:
    fg: dict[str, bool] = {}
    for value in gates:
        for e in parse_feature_gates(value, f"{where} --feature-gates"):
            fg[e.key] = bool(parse_go_bool(e.value))
    rc: dict[str, str] = {}
    for value in runtime:
        for e in parse_runtime_config(value, f"{where} --runtime-config"):
            rc[e.key] = e.value
    return ComponentFlags(fg, rc)


# ------------------------------------------------------------------ YAML documents

_DOC_SPLIT = re.compile(r"^---[ \t]*(?:#.*)?$", re.MULTILINE)


if HAS_YAML:

    class _GoStyleDumper(yaml.SafeDumper):
        """Quote like Kubernetes' YAML encoder (go-yaml via sigs.k8s.io/yaml): a string
        that cannot be plain is double-quoted, so a document kubeadm wrote is dumped back
        byte for byte."""

        def choose_scalar_style(self) -> str:
            style = super().choose_scalar_style()
            return '"' if style == "'" else style


def _dump(data: Any) -> str:
    return yaml.dump(
        data,
        Dumper=_GoStyleDumper,
        sort_keys=False,
        default_flow_style=False,
        width=1 << 30,
        allow_unicode=True,
    )


def _load(text: str, what: str) -> Any:
    try:
        return yaml.safe_load(text)
    except (yaml.YAMLError, RecursionError, ValueError, AttributeError) as err:  # and bad scalars
        why = "it nests too deep to parse" if isinstance(err, RecursionError) else err
        raise ConfigEditError(f"{what} is not valid YAML: {why}") from None


@dataclass
class _Doc:
    prefix: str  # the separator line (and what precedes the body) kept verbatim
    body: str


def _split_documents(text: str) -> list[_Doc]:
    docs: list[_Doc] = []
    pos = 0
    prefix = ""
    for m in _DOC_SPLIT.finditer(text):
        docs.append(_Doc(prefix, text[pos : m.start()]))
        end = m.end() + 1 if text[m.end() : m.end() + 1] == "\n" else m.end()
        prefix = text[m.start() : end]
        pos = end
    docs.append(_Doc(prefix, text[pos:]))
    return [d for d in docs if d.prefix or d.body.strip()]


def _edit_document_of_kind(
    text: str,
    kind: str,
    what: str,
    edit: Callable[[dict[str, Any]], list[Change]],
) -> EditResult:
    """Find the one YAML document of ``kind`` in ``text`` (a single document or a stream),
    let ``edit`` change its parsed form in place and re-dump only that document."""
    _require_yaml()
    docs = _split_documents(text)
    found = []
    for i, doc in enumerate(docs):
        data = _load(doc.body, what)
        if isinstance(data, dict) and data.get("kind") == kind:
            found.append((i, data))
    if not found:
        kinds = [
            (d.get("kind") if isinstance(d, dict) else type(d).__name__)
            for d in (_load(doc.body, what) for doc in docs)
        ]
        raise ConfigEditError(
            f"{what}: no document of kind {kind} (kinds found: {kinds or 'none'}); fix: "
            f"pass the {kind} text"
        )
    if len(found) > 1:
        raise ConfigEditError(
            f"{what}: {len(found)} documents of kind {kind}; fix: keep one {kind} per file"
        )
    index, data = found[0]
    changes = edit(data)
    if not changes:
        return EditResult(text)
    docs[index].body = _dump(data)
    return EditResult("".join(d.prefix + d.body for d in docs), tuple(changes))


def _one_document(text: str, what: str) -> dict[str, Any]:
    _require_yaml()
    data = _load(text, what)
    if not isinstance(data, dict):
        raise ConfigEditError(
            f"{what} is not a YAML mapping (got {type(data).__name__}); fix: pass the file text"
        )
    return data


# ------------------------------------------------------------------ kubeadm ClusterConfiguration


def _extra_args_shape(data: Mapping[str, Any], what: str) -> str:
    api = data.get("apiVersion")
    shape = KUBEADM_APIS.get(str(api))
    if shape is None:
        raise ConfigEditError(
            f"{what}: apiVersion {api!r} is not a kubeadm config API this module edits "
            f"(known: {', '.join(KUBEADM_APIS)}); fix: migrate the file with "
            "'kubeadm config migrate --old-config <file>' of a kubeadm that reads it"
        )
    return shape


def _section_args(section: Mapping[str, Any], shape: str, where: str) -> list[_Arg]:
    extra = section.get("extraArgs")
    if extra is None:
        return []
    args: list[_Arg] = []
    if shape == "map":
        if not isinstance(extra, Mapping):
            raise ConfigEditError(
                f"{where}: extraArgs is a {type(extra).__name__}, kubeadm.k8s.io/v1beta3 "
                "wants a map of flag: value; fix: write extraArgs as a map"
            )
        for key, value in extra.items():
            args.append(_managed_arg(str(key), value, where, key))
        return args
    if not isinstance(extra, list):
        raise ConfigEditError(
            f"{where}: extraArgs is a {type(extra).__name__}, kubeadm.k8s.io/v1beta4 wants a "
            "list of {name, value}; fix: write '- name: feature-gates' / '  value: ...' items"
        )
    for item in extra:
        if not isinstance(item, Mapping) or not isinstance(item.get("name"), str):
            raise ConfigEditError(
                f"{where}: extraArgs item {item!r} has no name; fix: give each item "
                "name: <flag> and value: <value>"
            )
        name = item["name"]
        if name in (FEATURE_GATES, RUNTIME_CONFIG) and item.get("mergeMethod"):
            raise ConfigEditError(
                f"{where}: extraArgs {name} has mergeMethod {item['mergeMethod']!r}; this "
                "module only edits replaced values; fix: drop mergeMethod from that item"
            )
        args.append(_managed_arg(name, item.get("value", ""), where, item))
    return args


def _managed_arg(name: str, value: Any, where: str, origin: Any) -> _Arg:
    if name in (FEATURE_GATES, RUNTIME_CONFIG):
        if not isinstance(value, str):
            raise ConfigEditError(
                f"{where}: extraArgs {name} value {value!r} is not a string; fix: quote it, "
                f'e.g. "{name}": "Name=true"'
            )
        return _Arg(name, value, origin)
    return _Arg(None, "", origin)


def _store_section_args(section: dict[str, Any], shape: str, args: Sequence[_Arg]) -> None:
    """Write ``args`` back as ``extraArgs``; unchanged items are the original objects."""
    new: Any
    if shape == "map":
        old = section.get("extraArgs") or {}
        new = {}
        for a in args:
            if a.origin is None:
                new[a.name] = a.value
            else:
                new[a.origin] = a.value if a.edited else old[a.origin]
    else:
        new = []
        for a in args:
            if a.origin is None:
                new.append({"name": a.name, "value": a.value})
            elif a.edited:
                item = dict(a.origin)
                item["value"] = a.value
                new.append(item)
            else:
                new.append(a.origin)
    if new:
        section["extraArgs"] = new
    else:
        section.pop("extraArgs", None)


def edit_cluster_configuration(text: str, edits: Mapping[str, FlagEdit]) -> EditResult:
    """Edit ``extraArgs`` of a kubeadm ClusterConfiguration.

    ``text``: the ClusterConfiguration document (the ``ClusterConfiguration`` key of
    ConfigMap ``kube-system/kubeadm-config``) or a kubeadm config file holding one among
    other documents (the others are kept verbatim). ``edits``: component name
    (``kube-apiserver``, ``kube-controller-manager``, ``kube-scheduler``) -> FlagEdit.
    A missing section or ``extraArgs`` is created when something must be set; an
    ``extraArgs`` left empty is removed. For v1beta4/v1, several items of one flag are
    merged into the last one (reported). Raises ConfigEditError for an unknown
    apiVersion, a component name, runtime-config for a component other than
    kube-apiserver, or malformed values.
    """
    _check_components(edits, COMPONENTS, "edits")

    def apply(data: dict[str, Any]) -> list[Change]:
        shape = _extra_args_shape(data, "ClusterConfiguration")
        changes: list[Change] = []
        for component in COMPONENTS:
            edit = edits.get(component)
            if edit is None or edit.empty:
                continue
            name = CLUSTER_CONFIGURATION_SECTIONS[component]
            where = f"ClusterConfiguration {name}.extraArgs"
            section = data.get(name)
            if section is None:
                section = {}
            elif not isinstance(section, dict):
                raise ConfigEditError(
                    f"ClusterConfiguration {name} is a {type(section).__name__}, not a "
                    "mapping; fix: write it as a mapping"
                )
            args = _section_args(section, shape, where)
            new_args, found = _edit_args(args, edit, lambda flag, w=where: f"{w} {flag}")
            if found:
                _store_section_args(section, shape, new_args)
                data[name] = section
                changes.extend(found)
        return changes

    return _edit_document_of_kind(text, "ClusterConfiguration", "ClusterConfiguration", apply)


def cluster_configuration_flags(text: str) -> dict[str, ComponentFlags]:
    """Effective feature gates and runtime-config per control-plane component as written
    in a kubeadm ClusterConfiguration (``text`` as for ``edit_cluster_configuration``)."""
    result: dict[str, ComponentFlags] = {}

    def read(data: dict[str, Any]) -> list[Change]:
        shape = _extra_args_shape(data, "ClusterConfiguration")
        for component, name in CLUSTER_CONFIGURATION_SECTIONS.items():
            where = f"ClusterConfiguration {name}.extraArgs"
            args = _section_args(data.get(name) or {}, shape, where)
            result[component] = _flags_from_values(
                [a.value for a in args if a.name == FEATURE_GATES],
                [a.value for a in args if a.name == RUNTIME_CONFIG],
                where,
            )
        return []

    _edit_document_of_kind(text, "ClusterConfiguration", "ClusterConfiguration", read)
    return result


def _check_components(edits: Mapping[str, FlagEdit], allowed: Sequence[str], what: str) -> None:
    for component, edit in edits.items():
        if component not in allowed:
            raise ConfigEditError(
                f"{what}: component {component!r} is not one of {', '.join(allowed)}"
            )
        if component != APISERVER and edit.touches_runtime_config:
            raise ConfigEditError(
                f"{what}: runtime-config is a kube-apiserver flag, {component} has none; "
                "fix: give runtime_config only for the apiserver"
            )


# ------------------------------------------------------------------ static pod manifests


def _find_container(data: Mapping[str, Any], component: str, what: str) -> Mapping[str, Any]:
    containers = getattr(data.get("spec"), "get", {}.get)("containers") or []  # spec: any YAML
    names = [c.get("name") for c in containers if isinstance(c, Mapping)]
    for c in containers:
        if isinstance(c, Mapping) and c.get("name") == component:
            return c
    raise ConfigEditError(
        f"{what}: no container named {component} (containers: {names or 'none'}); fix: pass "
        "the manifest of that component or the right component name"
    )


def static_pod_flags(text: str, component: str) -> ComponentFlags:
    """Effective feature gates and runtime-config of ``component``'s container command in
    a static pod manifest."""
    what = f"{component} static pod manifest"
    data = _one_document(text, what)
    container = _find_container(data, component, what)
    return _command_flags(list(container.get("command") or []), f"{component} command")


def edit_static_pod_manifest(text: str, component: str, edit: FlagEdit) -> EditResult:
    """Edit ``--feature-gates``/``--runtime-config`` in a kubeadm static pod manifest.

    Only the ``command`` of the container named ``component`` changes: the managed flag
    items are rewritten in place, a missing flag is appended after the last command item,
    a flag left empty is removed. The text outside those items is kept byte for byte when
    the command is a block sequence of plain or quoted scalars (kubeadm's layout);
    otherwise the document is re-dumped (same data, keys in their order). Raises
    ConfigEditError for an unknown component, a missing container, flags in ``args``
    (kubeadm never writes them there) or malformed values.
    """
    if component not in COMPONENTS:
        raise ConfigEditError(
            f"component={component!r} is not a kubeadm static pod component; fix: use one "
            f"of {', '.join(COMPONENTS)}"
        )
    _check_components({component: edit}, COMPONENTS, "edit")
    what = f"{component} static pod manifest"
    data = _one_document(text, what)
    container = _find_container(data, component, what)
    for item in container.get("args") or []:
        if isinstance(item, str) and item.split("=", 1)[0] in (
            "--" + FEATURE_GATES,
            "--" + RUNTIME_CONFIG,
        ):
            raise ConfigEditError(
                f"{what}: {item.split('=', 1)[0]} is in the container's args, not its "
                "command; fix: move it into command (kubeadm's layout)"
            )
    command = container.get("command")
    if not isinstance(command, list) or not command:
        raise ConfigEditError(
            f"{what}: container {component} has no command list; fix: restore the kubeadm "
            f"manifest (kubeadm init phase control-plane {component.removeprefix('kube-')})"
        )
    new_command, changes = edit_command(command, edit, f"{component} command")
    if not changes:
        return EditResult(text)
    expected = _load(text, what)
    _find_container(expected, component, what)["command"] = new_command  # type: ignore[index]
    new_text = _rewrite_block_sequence(text, component, command, new_command)
    if new_text is None or _load(new_text, what) != expected:
        new_text = _dump(expected)
    return EditResult(new_text, changes)


def _command_node(root: Any, component: str) -> Any:
    def get(node: Any, key: str) -> Any:
        if not isinstance(node, yaml.MappingNode):
            return None
        for k, v in node.value:
            if isinstance(k, yaml.ScalarNode) and k.value == key:
                return v
        return None

    containers = get(get(root, "spec"), "containers")
    if not isinstance(containers, yaml.SequenceNode):
        return None
    for c in containers.value:
        name = get(c, "name")
        if isinstance(name, yaml.ScalarNode) and name.value == component:
            return get(c, "command")
    return None


def _scalar_text(value: str) -> str | None:
    out = _dump([value])
    if not out.startswith("- ") or out.count("\n") != 1:
        return None
    return out[2:-1]


def _rewrite_block_sequence(
    text: str, component: str, old: Sequence[str], new: Sequence[str]
) -> str | None:
    """Edit the command items in the text itself; ``None`` when the layout is not a
    block sequence of one-line scalars (then the caller re-dumps)."""
    try:
        root = yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.YAMLError:
        return None
    seq = _command_node(root, component)
    if not isinstance(seq, yaml.SequenceNode) or seq.flow_style or len(seq.value) != len(old):
        return None
    spans: list[tuple[int, int, int, int, str]] = []  # line start, value start/end, line end
    for node in seq.value:
        if not isinstance(node, yaml.ScalarNode):
            return None
        start, end = node.start_mark.index, node.end_mark.index
        line_start = text.rfind("\n", 0, start) + 1
        prefix = text[line_start:start]
        if not re.fullmatch(r"[ \t]*-[ \t]+", prefix) or "\n" in text[start:end]:
            return None
        line_end = text.find("\n", end)
        line_end = len(text) if line_end < 0 else line_end + 1
        spans.append((line_start, start, end, line_end, prefix))
    pieces: list[tuple[int, int, str]] = []  # (from, to, replacement), applied from the end
    ops = difflib.SequenceMatcher(a=list(old), b=list(new), autojunk=False).get_opcodes()
    for tag, i1, i2, j1, j2 in ops:
        if tag == "equal":
            continue
        if tag == "replace" and i2 - i1 == j2 - j1:
            for k in range(i2 - i1):
                rendered = _scalar_text(new[j1 + k])
                if rendered is None:
                    return None
                _, start, end, _, _ = spans[i1 + k]
                pieces.append((start, end, rendered))
            continue
        if tag in ("delete", "replace"):
            pieces.append((spans[i1][0], spans[i2 - 1][3], ""))
        if tag in ("insert", "replace"):
            lines = []
            for value in new[j1:j2]:
                rendered = _scalar_text(value)
                if rendered is None:
                    return None
                ref = spans[min(i1, len(spans) - 1)]
                lines.append(ref[4] + rendered + "\n")
            at = spans[i1 - 1][3] if i1 > 0 else spans[0][0]
            if at == len(text) and not text.endswith("\n"):
                lines[0] = "\n" + lines[0]
            pieces.append((at, at, "".join(lines)))
    for start, end, replacement in sorted(pieces, key=lambda p: (p[0], p[1]), reverse=True):
        text = text[:start] + replacement + text[end:]
    return text


# ------------------------------------------------------------------ KubeletConfiguration


def _kubelet_gates(data: Mapping[str, Any], what: str) -> dict[str, Any] | None:
    api = data.get("apiVersion")
    if api != KUBELET_CONFIG_API:
        raise ConfigEditError(
            f"{what}: apiVersion {api!r} is not {KUBELET_CONFIG_API}; fix: pass a "
            "KubeletConfiguration of that API version"
        )
    gates = data.get("featureGates")
    if gates is None:
        return None
    if not isinstance(gates, dict):
        raise ConfigEditError(
            f"{what}: featureGates is a {type(gates).__name__}, not a map of gate: bool; "
            "fix: write featureGates: {Name: true}"
        )
    for name, value in gates.items():
        if not isinstance(value, bool):
            raise ConfigEditError(
                f"{what}: featureGates.{name} = {value!r} is not a boolean; fix: write "
                f"{name}: true or {name}: false"
            )
    return gates


def edit_kubelet_configuration(text: str, edit: FlagEdit) -> EditResult:
    """Merge ``edit.feature_gates``/``edit.absent_feature_gates`` into the ``featureGates``
    map of a KubeletConfiguration (``kubelet.config.k8s.io/v1beta1``).

    ``text``: ``/var/lib/kubelet/config.yaml``, the ``kubelet`` key of ConfigMap
    ``kube-system/kubelet-config``, or a kubeadm config stream holding one. Other gates keep
    their order and value; new gates are appended; an emptied ``featureGates`` is removed.
    Raises ConfigEditError for another apiVersion, non-boolean gate values, or a
    runtime-config edit (the kubelet has no such flag).
    """
    if edit.touches_runtime_config:
        raise ConfigEditError(
            "kubelet: runtime-config is a kube-apiserver flag; fix: give runtime_config "
            "only for the apiserver"
        )
    where = "KubeletConfiguration featureGates"

    def apply(data: dict[str, Any]) -> list[Change]:
        gates = _kubelet_gates(data, "KubeletConfiguration")
        current = dict(gates or {})
        changes: list[Change] = []
        new: dict[str, bool] = {}
        for name, value in current.items():
            if name in edit.absent_feature_gates:
                changes.append(
                    Change(where, name, _gate_text(value), None, "feature gate must be absent")
                )
            elif name in edit.feature_gates and edit.feature_gates[name] is not value:
                new[name] = edit.feature_gates[name]
                changes.append(
                    Change(
                        where,
                        name,
                        _gate_text(value),
                        _gate_text(edit.feature_gates[name]),
                        "feature gate wanted",
                    )
                )
            else:
                new[name] = value
        for name, value in edit.feature_gates.items():
            if name not in current:
                new[name] = value
                changes.append(
                    Change(where, name, None, _gate_text(value), "feature gate wanted, was missing")
                )
        if changes:
            if new:
                data["featureGates"] = new
            else:
                del data["featureGates"]
        return changes

    return _edit_document_of_kind(text, "KubeletConfiguration", "KubeletConfiguration", apply)


def kubelet_feature_gates(text: str) -> dict[str, bool]:
    """The ``featureGates`` map of a KubeletConfiguration (empty when there is none)."""
    found: dict[str, bool] = {}

    def read(data: dict[str, Any]) -> list[Change]:
        found.update(_kubelet_gates(data, "KubeletConfiguration") or {})
        return []

    _edit_document_of_kind(text, "KubeletConfiguration", "KubeletConfiguration", read)
    return found


# ------------------------------------------------------------------ kubelet command line


def kubelet_flag_values(argv: Sequence[str], flag: str) -> list[str]:
    """All values of ``--<flag>`` in a kubelet command line, in order (``--flag=v`` and
    ``--flag v``; ``argv[0]`` is the program). Parsing stops at ``--``, as pflag does."""
    values: list[str] = []
    i = 1
    while i < len(argv):
        item = argv[i]
        if item == "--":
            break
        if item.startswith(f"--{flag}="):
            values.append(item[len(flag) + 3 :])
        elif item == f"--{flag}" and i + 1 < len(argv):
            values.append(argv[i + 1])
            i += 1
        i += 1
    return values


def kubelet_config_path_from_cmdline(argv: Sequence[str]) -> str | None:
    """The ``--config`` file of a kubelet command line (the last one wins, as pflag sets
    the flag once per occurrence); ``None`` without one. ``argv`` as in
    ``/proc/<pid>/cmdline`` split at NUL."""
    values = [v for v in kubelet_flag_values(argv, "config") if v]
    return values[-1] if values else None


def parse_environment_file(text: str) -> dict[str, str]:
    """Parse a systemd ``EnvironmentFile`` (``KEY=value``, ``KEY="quoted value"``, ``#``
    and ``;`` comments, backslash line continuation), as ``systemd.exec(5)`` describes;
    kubeadm writes ``/var/lib/kubelet/kubeadm-flags.env`` in this form."""
    env: dict[str, str] = {}
    text = re.sub(r"\\\n", "", text)
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line[0] in "#;" or "=" not in line:
            continue
        key, value = line.split("=", 1)
        key, value = key.strip(), value.strip()
        if len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'":
            quote = value[0]
            value = value[1:-1]
            if quote == '"':
                value = re.sub(r'\\(["\\$`])', r"\1", value)
        env[key] = value
    return env


@dataclass
class SystemdService:
    """What ``parse_systemd_service`` reads from a unit: ``environment`` assignments in
    order, ``environment_files`` as (path, optional) and the effective ``exec_start``."""

    environment: dict[str, str] = field(default_factory=dict)
    environment_files: list[tuple[str, bool]] = field(default_factory=list)
    exec_start: str | None = None


def parse_systemd_service(text: str) -> SystemdService:
    """Read ``[Service]`` ``Environment=``, ``EnvironmentFile=`` and ``ExecStart=`` from a
    unit file and its drop-ins concatenated in systemd's order (``systemctl cat kubelet``).
    An empty ``ExecStart=`` or ``EnvironmentFile=`` resets the list, as systemd does."""
    service = SystemdService()
    section = ""
    text = re.sub(r"\\\n", " ", text)
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line[0] in "#;":
            continue
        if line.startswith("[") and line.endswith("]"):
            section = line[1:-1]
            continue
        if section != "Service" or "=" not in line:
            continue
        key, value = (p.strip() for p in line.split("=", 1))
        if key == "Environment":
            for word in shlex.split(value):
                if "=" in word:
                    k, v = word.split("=", 1)
                    service.environment[k] = v
        elif key == "EnvironmentFile":
            if not value:
                service.environment_files.clear()
            else:
                service.environment_files.append((value.lstrip("-"), value.startswith("-")))
        elif key == "ExecStart":
            service.exec_start = value or None
    return service


def expand_exec_start(command: str, env: Mapping[str, str]) -> list[str]:
    """Expand an ``ExecStart=`` line the way systemd does: the line is split into words
    (quotes respected), a word that is exactly ``$VAR`` becomes the variable's value split
    into words (quotes respected, unset -> nothing), ``${VAR}`` inside a word is replaced
    in place. A leading ``-@:+!`` on the program is dropped."""
    argv: list[str] = []
    for word in shlex.split(command):
        whole = re.fullmatch(r"\$([A-Za-z_][A-Za-z0-9_]*)", word)
        if whole:
            argv.extend(shlex.split(env.get(whole.group(1), "")))
            continue
        argv.append(
            re.sub(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}", lambda m: env.get(m.group(1), ""), word)
        )
    if argv:
        argv[0] = argv[0].lstrip("-@:+!")
    return argv


def kubelet_argv_from_systemd(unit_text: str, env_files: Mapping[str, str | None]) -> list[str]:
    """The kubelet command line systemd would run: ``unit_text`` as ``systemctl cat
    kubelet`` prints it, ``env_files`` path -> text (``None``: missing) for each
    ``EnvironmentFile``. Values from environment files override ``Environment=`` ones,
    later files override earlier ones (``systemd.exec(5)``). Returns ``[]`` without an
    ExecStart. Raises ConfigEditError for a missing non-optional environment file."""
    service = parse_systemd_service(unit_text)
    if not service.exec_start:
        return []
    env = dict(service.environment)
    for path, optional in service.environment_files:
        content = env_files.get(path)
        if content is None:
            if optional:
                continue
            raise ConfigEditError(
                f"kubelet unit: EnvironmentFile={path} is missing and not optional; systemd "
                "would refuse to start the kubelet; fix: create it or mark it optional (-)"
            )
        env.update(parse_environment_file(content))
    return expand_exec_start(service.exec_start, env)


def kubelet_config_path_from_systemd(
    unit_text: str, env_files: Mapping[str, str | None]
) -> str | None:
    """The ``--config`` file of the kubelet as systemd starts it (see
    ``kubelet_argv_from_systemd``); kubeadm's drop-in ``10-kubeadm.conf`` sets
    ``KUBELET_CONFIG_ARGS=--config=/var/lib/kubelet/config.yaml``, while
    ``KUBELET_KUBEADM_ARGS`` (``kubeadm-flags.env``) and ``KUBELET_EXTRA_ARGS``
    (``/etc/default/kubelet``) come later on the line and so win."""
    return kubelet_config_path_from_cmdline(kubelet_argv_from_systemd(unit_text, env_files))


# ------------------------------------------------------------------ KubeSchedulerConfiguration

#: Extension points the DynamicResources plugin implements in every release with
#: structured parameters (1.31-1.37: PreEnqueue, PreFilter, Filter, PostFilter, Reserve,
#: PreBind; ``pkg/scheduler/framework/plugins/dynamicresources/dynamicresources.go``).
#: Score (1.36+) is left out: it is optional and not implemented by older releases.
_DR_POINTS = ("preEnqueue", "preFilter", "filter", "postFilter", "reserve", "preBind")


def _plugin_names(plugin_set: Any, key: str) -> list[str]:
    if not isinstance(plugin_set, Mapping):
        return []
    return [p.get("name") for p in plugin_set.get(key) or [] if isinstance(p, Mapping)]


def _scheduler_profiles(data: Mapping[str, Any], what: str) -> list[dict[str, Any]]:
    api = data.get("apiVersion")
    if api != SCHEDULER_CONFIG_API or data.get("kind") != "KubeSchedulerConfiguration":
        raise ConfigEditError(
            f"{what}: apiVersion {api!r} kind {data.get('kind')!r} is not a "
            f"KubeSchedulerConfiguration of {SCHEDULER_CONFIG_API} (older APIs were removed "
            "in 1.29); fix: migrate the scheduler configuration to "
            f"{SCHEDULER_CONFIG_API}"
        )
    profiles = data.get("profiles") or []
    if not isinstance(profiles, list):
        raise ConfigEditError(f"{what}: profiles is not a list; fix: write a list of profiles")
    return profiles


def _dr_problems(profile: Mapping[str, Any]) -> list[tuple[str, str]]:
    """(extension point, problem) pairs that leave DynamicResources off in a profile."""
    plugins = profile.get("plugins") or {}
    problems: list[tuple[str, str]] = []
    for point, pset in plugins.items() if isinstance(plugins, Mapping) else ():
        disabled = _plugin_names(pset, "disabled")
        enabled = _plugin_names(pset, "enabled")
        if DYNAMIC_RESOURCES in disabled and DYNAMIC_RESOURCES not in enabled:
            problems.append((point, f"{point}.disabled names {DYNAMIC_RESOURCES}"))
        elif (
            "*" in disabled
            and DYNAMIC_RESOURCES not in enabled
            and (point == "multiPoint" or point in _DR_POINTS)
        ):
            problems.append(
                (point, f"{point}.disabled is '*' and {point}.enabled lacks {DYNAMIC_RESOURCES}")
            )
    return problems


def scheduler_config_has_dynamic_resources(text: str) -> bool:
    """True when no profile of a KubeSchedulerConfiguration (v1) leaves the
    DynamicResources plugin off: not disabled by name, and not dropped by a ``"*"``
    disable at ``multiPoint`` or at an extension point it implements without being listed
    in that point's ``enabled``. The default profile (no ``profiles``/``plugins``) has it
    whenever the DynamicResourceAllocation gate is on (``applyDynamicResources`` in
    ``pkg/scheduler/apis/config/v1/default_plugins.go``). Raises ConfigEditError for
    another API version."""
    data = _one_document(text, "KubeSchedulerConfiguration")
    profiles = _scheduler_profiles(data, "KubeSchedulerConfiguration")
    return not any(_dr_problems(p) for p in profiles if isinstance(p, Mapping))


def enable_dynamic_resources(text: str) -> EditResult:
    """Make every profile of a KubeSchedulerConfiguration (v1) run DynamicResources.

    Removes ``DynamicResources`` from every ``disabled`` list; where ``"*"`` is disabled
    at ``multiPoint`` or at one of its extension points, adds ``{name: DynamicResources}``
    to that point's ``enabled`` (at ``multiPoint`` before ``DefaultPreemption`` when listed,
    the place the default puts it, so that an idle claim is deallocated before a pod is
    preempted). Raises ConfigEditError for another API version.
    """

    def apply(data: dict[str, Any]) -> list[Change]:
        changes: list[Change] = []
        for index, profile in enumerate(_scheduler_profiles(data, "KubeSchedulerConfiguration")):
            if not isinstance(profile, dict):
                continue
            name = profile.get("schedulerName", f"profiles[{index}]")
            plugins = profile.get("plugins")
            if not isinstance(plugins, dict):
                continue
            for point, pset in plugins.items():
                if not isinstance(pset, dict):
                    continue
                where = f"KubeSchedulerConfiguration profile {name} plugins.{point}"
                disabled = pset.get("disabled") or []
                kept = [
                    p
                    for p in disabled
                    if not (isinstance(p, Mapping) and p.get("name") == DYNAMIC_RESOURCES)
                ]
                if len(kept) != len(disabled):
                    pset["disabled"] = kept
                    if not kept:
                        del pset["disabled"]
                    changes.append(
                        Change(
                            where + ".disabled",
                            DYNAMIC_RESOURCES,
                            "disabled",
                            None,
                            "DRA needs the DynamicResources plugin",
                        )
                    )
                enabled_names = _plugin_names(pset, "enabled")
                if (
                    "*" in _plugin_names(pset, "disabled")
                    and DYNAMIC_RESOURCES not in enabled_names
                    and (point == "multiPoint" or point in _DR_POINTS)
                ):
                    enabled = list(pset.get("enabled") or [])
                    at = (
                        enabled_names.index("DefaultPreemption")
                        if point == "multiPoint" and "DefaultPreemption" in enabled_names
                        else len(enabled)
                    )
                    enabled.insert(at, {"name": DYNAMIC_RESOURCES})
                    pset["enabled"] = enabled
                    changes.append(
                        Change(
                            where + ".enabled",
                            DYNAMIC_RESOURCES,
                            None,
                            "enabled",
                            "'*' is disabled there; DRA needs the DynamicResources plugin",
                        )
                    )
        return changes

    return _edit_document_of_kind(
        text, "KubeSchedulerConfiguration", "KubeSchedulerConfiguration", apply
    )
