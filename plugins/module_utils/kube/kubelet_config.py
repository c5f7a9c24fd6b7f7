# Copyright: gpufleet contributors
# Apache License 2.0 (see LICENSE)
"""The kubelet's configuration: the ``featureGates`` map of a ``KubeletConfiguration``
(``/var/lib/kubelet/config.yaml``, ConfigMap ``kube-system/kubelet-config`` ``kubelet``:
``edit_kubelet_configuration``, ``kubelet_feature_gates``), and where the running kubelet
takes its flags and configuration file from (its command line, its systemd unit with
drop-ins and environment files: ``kubelet_argv_from_systemd``,
``kubelet_config_path_from_systemd``).
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ansible_collections.gpufleet.cluster.plugins.module_utils.kube.flags import (
    Change,
    ConfigEditError,
    EditResult,
    FlagEdit,
    gate_text,
)
from ansible_collections.gpufleet.cluster.plugins.module_utils.kube.manifests import (
    edit_document_of_kind,
)

__all__ = [
    "DEFAULT_KUBELET_CONFIG",
    "SystemdService",
    "edit_kubelet_configuration",
    "expand_exec_start",
    "feature_gates_of",
    "kubelet_argv_from_systemd",
    "kubelet_config_path_from_cmdline",
    "kubelet_config_path_from_systemd",
    "kubelet_feature_gates",
    "kubelet_flag_values",
    "parse_environment_file",
    "parse_systemd_service",
]


KUBELET_CONFIG_API = "kubelet.config.k8s.io/v1beta1"


#: Where kubeadm writes the kubelet configuration (``cmd/kubeadm/app/constants``
#: ``KubeletConfigurationFileName`` under ``KubeletRunDirectory``).
DEFAULT_KUBELET_CONFIG = "/var/lib/kubelet/config.yaml"


# ------------------------------------------------------------------ KubeletConfiguration


def _kubelet_gates(data: Mapping[str, Any], what: str) -> dict[str, Any] | None:
    api = data.get("apiVersion")
    if api != KUBELET_CONFIG_API:
        raise ConfigEditError(
            f"{what}: apiVersion {api!r} is not {KUBELET_CONFIG_API}; fix: pass a "
            "KubeletConfiguration of that API version"
        )
    return feature_gates_of(data, what)


def feature_gates_of(data: Mapping[str, Any], what: str) -> dict[str, Any] | None:
    """The ``featureGates`` map of a KubeletConfiguration ``data`` (``None`` when it has
    none), each value a YAML boolean: the kubelet decodes the map as ``map[string]bool``
    and refuses to start on a string such as ``"false"``. Raises ConfigEditError naming
    ``what``, the gate and the value."""
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
                    Change(where, name, gate_text(value), None, "feature gate must be absent")
                )
            elif name in edit.feature_gates and edit.feature_gates[name] is not value:
                new[name] = edit.feature_gates[name]
                changes.append(
                    Change(
                        where,
                        name,
                        gate_text(value),
                        gate_text(edit.feature_gates[name]),
                        "feature gate wanted",
                    )
                )
            else:
                new[name] = value
        for name, value in edit.feature_gates.items():
            if name not in current:
                new[name] = value
                changes.append(
                    Change(where, name, None, gate_text(value), "feature gate wanted, was missing")
                )
        if changes:
            if new:
                data["featureGates"] = new
            else:
                del data["featureGates"]
        return changes

    return edit_document_of_kind(text, "KubeletConfiguration", "KubeletConfiguration", apply)


def kubelet_feature_gates(text: str) -> dict[str, bool]:
    """The ``featureGates`` map of a KubeletConfiguration (empty when there is none)."""
    found: dict[str, bool] = {}

    def read(data: dict[str, Any]) -> list[Change]:
        found.update(_kubelet_gates(data, "KubeletConfiguration") or {})
        return []

    edit_document_of_kind(text, "KubeletConfiguration", "KubeletConfiguration", read)
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
