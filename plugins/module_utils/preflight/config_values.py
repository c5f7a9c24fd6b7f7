# Copyright: gpufleet contributors
# Apache License 2.0 (see LICENSE)
"""Role variables that the roles write into configuration files, systemd units and command
lines, judged by the grammar of the place they land in, before any host is changed.

A value with a line break would add a line of its own there: an ``ExecStartPre=`` in a
unit, another scrape job or a ``remote_write`` in prometheus.yml, a ``gpgcheck=0`` in a
package repository file. The templates quote what they write (JSON for YAML, systemd's
quoting for units); this rule refuses what no quoting makes right, naming the variable,
the value and the form it must take.

Grammars and their sources:

* Prometheus durations: ``ParseDuration`` of prometheus/common ``model/time.go``: ``0``,
  or one or more ``<digits><unit>`` with units ``y w d h m s ms`` each at most once and in
  that order (``1h30m``, ``1y``, ``500ms``), at most 2^63-1 nanoseconds.
* Addresses ``HOST:PORT``: a host name, an IPv4 address or a bracketed IPv6 address, and a
  port 1-65535 (Prometheus' ``targets``; a listen address may leave the host empty).
* Paths: absolute, no control character (a line break ends a setting in every format the
  roles write); a command word (``monitoring_promtool``, run through a shell-split command
  line) has no whitespace either.
* Repository URLs: ``http``/``https`` with a host, no whitespace or control character.
* A DRA driver name: a DNS subdomain (Kubernetes ``IsDNS1123Subdomain``).
* The Grafana dashboard ConfigMap's namespace, label and annotation: Kubernetes object
  metadata as kube-apiserver validates it (k8s.io/apimachinery ``pkg/util/validation``
  ``validation.go``): a namespace is a DNS label (``IsDNS1123Label``, at most 63), a label
  or annotation key a qualified name (``IsQualifiedName``: ``[PREFIX/]NAME``, NAME at most
  63 of ``[-A-Za-z0-9_.]`` starting and ending alphanumeric, PREFIX a DNS subdomain), a
  label value ``IsValidLabelValue`` (empty, or at most 63 of the NAME characters).
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Callable, Mapping
from typing import Any
from urllib.parse import urlsplit

from ansible_collections.gpufleet.cluster.plugins.module_utils.preflight.problem import (
    ERROR,
    HostContext,
    problem,
    short,
)

#: Characters no value written into a file may hold: C0 controls, DEL, and the Unicode
#: line and paragraph separators.
CONTROL = re.compile("[\x00-\x1f\x7f\x85\u2028\u2029]")

#: Prometheus duration units and their nanoseconds, largest first (model/time.go unitMap).
DURATION_UNITS = (
    ("y", 365 * 24 * 3600 * 10**9),
    ("w", 7 * 24 * 3600 * 10**9),
    ("d", 24 * 3600 * 10**9),
    ("h", 3600 * 10**9),
    ("m", 60 * 10**9),
    ("s", 10**9),
    ("ms", 10**6),
)
_MAX_NS = 2**63 - 1
_HOST = re.compile(
    r"[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?(\.[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*"
)
_DNS_SUBDOMAIN = re.compile(r"[a-z0-9]([a-z0-9-]*[a-z0-9])?(\.[a-z0-9]([a-z0-9-]*[a-z0-9])?)*")
_DNS_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
#: apimachinery validation.go qualifiedNameFmt (also the label value format, may be empty).
_QUALIFIED_NAME = re.compile(r"([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]")
_K8S_NAME_MAX = 63


def prometheus_duration(text: str) -> int:
    """Nanoseconds of a Prometheus duration (prometheus/common model/time.go
    ``ParseDuration``). Raises ValueError for anything else: empty, a sign, a fraction,
    spaces, an unknown unit, units out of order or repeated, or more than 2^63-1 ns."""
    if text == "0":
        return 0
    if not text:
        raise ValueError("empty duration")
    parts = re.findall(r"([0-9]+)([^0-9]+)", text)
    if "".join(n + u for n, u in parts) != text:
        raise ValueError("not a duration")
    order = [u for u, _unused in DURATION_UNITS]
    last, total = -1, 0
    for digits, unit in parts:
        if unit not in order:
            raise ValueError(f"unknown unit {unit!r}")
        pos = order.index(unit)
        if pos <= last:
            raise ValueError("units must go from largest to smallest, each once")
        last = pos
        mult = DURATION_UNITS[pos][1]
        value = int(digits)
        if value > 2**63 // mult:
            raise ValueError("out of range")
        total += value * mult
        if total > _MAX_NS:
            raise ValueError("out of range")
    return total


def _port(text: str) -> bool:
    return text.isascii() and text.isdigit() and 1 <= int(text) <= 65535


def _host(text: str) -> bool:
    if text.startswith("[") and text.endswith("]"):
        try:
            return ipaddress.ip_address(text[1:-1]).version == 6
        except ValueError:
            return False
    return len(text) <= 253 and bool(_HOST.fullmatch(text))


def check_address(value: Any, *, listen: bool = False) -> str | None:
    """Why ``value`` is not ``HOST:PORT`` (None when it is); ``listen``: the host may be
    empty (``:9090``)."""
    text = str(value)
    host, sep, port = text.rpartition(":")
    if not sep or not _port(port):
        return "is not HOST:PORT with a port 1-65535"
    if not (listen and host == "") and not _host(host):
        return "has no host name, IPv4 address or [IPv6] address before the port"
    return None


def check_duration(value: Any) -> str | None:
    try:
        prometheus_duration(str(value))
    except ValueError as err:
        return f"is not a Prometheus duration ({err})"
    return None


def check_path(value: Any, *, command: bool = False, empty: bool = False) -> str | None:
    text = str(value)
    if empty and text == "":
        return None
    if not text.startswith("/"):
        return "is not an absolute path"
    if command and re.search(r"\s", text):
        return "holds whitespace (it is a command word)"
    return None


def check_url(value: Any) -> str | None:
    text = str(value)
    if re.search(r"\s", text):
        return "holds whitespace"
    parts = urlsplit(text)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return "is not an http or https URL with a host"
    return None


def check_name(value: Any) -> str | None:
    text = str(value)
    if len(text) > 253 or not _DNS_SUBDOMAIN.fullmatch(text):
        return "is not a DNS subdomain (lowercase letters, digits, '-' and '.')"
    return None


def check_namespace(value: Any) -> str | None:
    """Why ``value`` is not a namespace name (``IsDNS1123Label``), or None."""
    if not isinstance(value, str):
        return "is not a string"
    if len(value) > _K8S_NAME_MAX or not _DNS_LABEL.fullmatch(value):
        return "is not a DNS label (at most 63 lowercase letters, digits and '-')"
    return None


def check_qualified_name(value: Any, *, empty: bool = False) -> str | None:
    """Why ``value`` is not a label or annotation key (``IsQualifiedName``), or None;
    ``empty``: '' is accepted (nothing written)."""
    if not isinstance(value, str):
        return "is not a string"
    if empty and value == "":
        return None
    prefix, slash, name = value.rpartition("/")
    if slash and (not prefix or "/" in prefix):
        return "is not a qualified name: one '/' after a non-empty prefix at most"
    if slash and (len(prefix) > 253 or not _DNS_SUBDOMAIN.fullmatch(prefix)):
        return "has a prefix that is not a DNS subdomain (lowercase letters, digits, '-', '.')"
    if len(name) > _K8S_NAME_MAX or not _QUALIFIED_NAME.fullmatch(name):
        return (
            "is not a qualified name (at most 63 letters, digits, '-', '_' or '.', "
            "starting and ending with a letter or digit)"
        )
    return None


def check_label_value(value: Any) -> str | None:
    """Why ``value`` is not a label value (``IsValidLabelValue``), or None."""
    if not isinstance(value, str):
        return "is not a string (YAML reads an unquoted 1 or true as a number or a boolean)"
    if value and (len(value) > _K8S_NAME_MAX or not _QUALIFIED_NAME.fullmatch(value)):
        return (
            "is not a label value (at most 63 letters, digits, '-', '_' or '.', "
            "starting and ending with a letter or digit)"
        )
    return None


def check_text(value: Any) -> str | None:
    return None


def check_percent(value: Any) -> str | None:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= 100:
        return "is not an integer from 0 to 100"
    return None


#: How a kind of value is checked, and the fix its problem names.
KINDS: dict[str, tuple[Callable[[Any], str | None], str]] = {
    "duration": (check_duration, "a Prometheus duration such as 30s, 1h30m, 1y or 500ms"),
    "address": (check_address, "HOST:PORT, e.g. 10.0.0.5:10250 or [fd00::5]:9400"),
    "listen": (lambda v: check_address(v, listen=True), "HOST:PORT or :PORT, e.g. 0.0.0.0:9090"),
    "path": (check_path, "an absolute path, e.g. /etc/gpufleet/monitoring"),
    "path_or_empty": (lambda v: check_path(v, empty=True), "an absolute path, or '' for none"),
    "command": (
        lambda v: check_path(v, command=True, empty=True),
        "the absolute path of the program, without spaces or arguments, or '' for none",
    ),
    "url": (check_url, "an http or https URL, e.g. https://nvidia.github.io/libnvidia-container"),
    "name": (check_name, "a DNS subdomain, e.g. gpu.example.com"),
    "text": (check_text, "the text on one line"),
    "percent": (check_percent, "an integer from 0 to 100"),
    "namespace": (check_namespace, "a namespace name (DNS label), e.g. monitoring"),
    "label_key": (
        check_qualified_name,
        "a label key, NAME or PREFIX/NAME, e.g. grafana_dashboard",
    ),
    "annotation_key": (
        lambda v: check_qualified_name(v, empty=True),
        "an annotation key, NAME or PREFIX/NAME, e.g. grafana_folder, or '' for none",
    ),
    "label_value": (
        check_label_value,
        "a quoted label value, e.g. \"1\", or '' (the sidecar's label with any value)",
    ),
}

#: Variable -> (kind, where the roles write it). Lists of addresses and target objects are
#: the ``address_list`` and ``node_targets`` kinds of :func:`rule_config_values`.
CONFIG_VARIABLES: dict[str, tuple[str, str]] = {
    "monitoring_config_dir": ("path", "prometheus.yml and the gpufleet-prometheus unit"),
    "monitoring_scrape_interval": ("duration", "prometheus.yml (global)"),
    "monitoring_bearer_token_file": ("path", "prometheus.yml (credentials_file)"),
    "monitoring_ca_file": ("path_or_empty", "prometheus.yml (ca_file)"),
    "monitoring_dra_driver_name": ("name", "the alerting rules (a PromQL regular expression)"),
    "monitoring_claim_leaked_for": ("duration", "the alerting rules (for:)"),
    "monitoring_claim_pending_for": ("duration", "the alerting rules (for:)"),
    "monitoring_resourceslice_missing_for": ("duration", "the alerting rules (for:)"),
    "monitoring_plugin_down_for": ("duration", "the alerting rules (for:)"),
    "monitoring_device_idle_for": ("duration", "the alerting rules (for:)"),
    "monitoring_dra_gate_missing_for": ("duration", "the alerting rules (for:)"),
    "monitoring_claim_create_failed_for": ("duration", "the alerting rules (for:)"),
    "monitoring_binding_conditions_failed_for": ("duration", "the alerting rules (for:)"),
    "monitoring_gpu_path_dual_for": ("duration", "the alerting rules (for:)"),
    "monitoring_device_idle_window": ("duration", "the alerting rules (a PromQL range)"),
    "monitoring_device_idle_percent": ("percent", "the alerting rules (a PromQL threshold)"),
    "monitoring_promtool": ("command", "the validate command line of the rendered files"),
    "monitoring_prometheus_binary": ("path_or_empty", "the copy to the monitoring host"),
    "monitoring_prometheus_listen": ("listen", "the gpufleet-prometheus unit (ExecStart)"),
    "monitoring_prometheus_data_dir": ("path", "the gpufleet-prometheus unit (ExecStart)"),
    "monitoring_grafana_dashboards_dir": ("path_or_empty", "the Grafana dashboard provider"),
    "monitoring_grafana_provisioning_dir": ("path_or_empty", "the Grafana dashboard provider"),
    "monitoring_grafana_folder": ("text", "the Grafana dashboard provider (folder)"),
    "monitoring_grafana_sidecar_namespace": ("namespace", "the Grafana dashboard ConfigMap"),
    "monitoring_grafana_sidecar_label": ("label_key", "the Grafana dashboard ConfigMap"),
    "monitoring_grafana_sidecar_label_value": ("label_value", "the Grafana dashboard ConfigMap"),
    "monitoring_grafana_sidecar_folder_annotation": (
        "annotation_key",
        "the Grafana dashboard ConfigMap",
    ),
    "kubeadm_bin_dir": ("path", "the kubelet unit and its kubeadm drop-in (ExecStart)"),
    "mig_persist_layout_file": ("path", "the gpufleet-mig unit (ExecStart)"),
    "mig_persist_lib_dir": ("path", "the gpufleet-mig unit (Environment)"),
    "nvidia_container_toolkit_repo_url": ("url", "the apt source list and the yum .repo file"),
    "nvidia_container_toolkit_repo_key_url": ("url", "the yum .repo file (gpgkey)"),
    "nvidia_container_toolkit_cdi_spec": ("path", "the nvidia-ctk cdi generate command line"),
}
ADDRESS_LISTS = (
    "monitoring_scheduler_targets",
    "monitoring_controller_manager_targets",
    "monitoring_apiserver_targets",
    "monitoring_object_exporter_targets",
)
NODE_TARGETS = ("monitoring_kubelet_targets", "monitoring_dcgm_exporter_targets")


#: Kinds whose null is refused rather than left unset: the ConfigMap's metadata has no
#: value to fall back on (a null annotation key writes no annotation, as '' does).
_NULL_REFUSED = ("namespace", "label_key", "label_value")

#: What each kind is called in a message.
KIND_NAMES = {
    "duration": "a Prometheus duration",
    "address": "HOST:PORT",
    "listen": "a listen address",
    "path": "an absolute path",
    "path_or_empty": "an absolute path",
    "command": "a program path",
    "url": "an http or https URL",
    "name": "a DNS subdomain",
    "text": "one line of text",
    "percent": "a percentage",
    "namespace": "a namespace name",
    "label_key": "a label key",
    "annotation_key": "an annotation key",
    "label_value": "a label value",
}


def value_problem(kind: str, value: Any) -> str | None:
    """Why ``value`` cannot be written as a ``kind`` (a key of ``KINDS``), or None."""
    if kind != "percent":
        found = CONTROL.search(str(value))
        if found:
            return (
                f"is not {KIND_NAMES[kind]}: it holds the control character {found.group()!r} "
                "(a line break would add a line)"
            )
    return KINDS[kind][0](value)


def _items(settings: Mapping[str, Any], name: str) -> list[tuple[str, str, Any]]:
    """(variable path, kind, value) of each entry of a target list variable."""
    value = settings.get(name)
    if not isinstance(value, list):
        return []
    if name in ADDRESS_LISTS:
        return [(f"{name}[{i}]", "address", v) for i, v in enumerate(value)]
    out = []
    for i, entry in enumerate(value):
        if isinstance(entry, Mapping):
            out.append((f"{name}[{i}].address", "address", entry.get("address", "")))
            out.append((f"{name}[{i}].node", "text", entry.get("node", "")))
    return out


def rule_config_values(ctx: HostContext) -> None:
    """Each variable of ``CONFIG_VARIABLES``, ``ADDRESS_LISTS`` and ``NODE_TARGETS`` the
    host runs with (set or defaulted) that its destination's grammar refuses: one error
    naming the variable, the value, where it goes and the form to write."""
    checks = [
        (name, kind, ctx.settings[name])
        for name, (kind, _unused) in CONFIG_VARIABLES.items()
        if name in ctx.settings and (ctx.settings[name] is not None or kind in _NULL_REFUSED)
    ]
    for name in (*ADDRESS_LISTS, *NODE_TARGETS):
        checks.extend(_items(ctx.settings, name))
    for path, kind, value in checks:
        why = value_problem(kind, value)
        if why is None:
            continue
        root = path.split("[", 1)[0]
        where = CONFIG_VARIABLES.get(root, ("", "prometheus.yml (targets and labels)"))[1]
        ctx.add(
            problem(
                "config-value",
                ERROR,
                path,
                value,
                f"{why}; it is written into {where}",
                f"write {path} as {KINDS[kind][1]}",
            )
        )
    _sidecar_folder(ctx)


def _truthy(value: Any) -> bool:
    """Ansible's ``bool`` filter of a variable as the role's ``when:`` reads it."""
    return value is True or str(value).strip().lower() in ("true", "yes", "on", "y", "1")


def _sidecar_folder(ctx: HostContext) -> None:
    """The folder the Grafana dashboard ConfigMap names in its folder annotation: the
    dashboard sidecar (kiwigrid/k8s-sidecar ``FOLDER_ANNOTATION``) takes the annotation's
    value as a directory, absolute or relative to its ``FOLDER``, and Grafana makes a
    folder of each directory (``foldersFromFilesStructure``): a '/' or a '..' would put the
    dashboard into another directory than the one folder the variable names."""
    settings = ctx.settings
    folder = settings.get("monitoring_grafana_folder")
    annotation = settings.get("monitoring_grafana_sidecar_folder_annotation")
    if not (_truthy(settings.get("monitoring_grafana_sidecar_configmap")) and annotation):
        return
    if not isinstance(folder, str) or not (folder in (".", "..") or "/" in folder):
        return
    ctx.add(
        problem(
            "config-value",
            ERROR,
            "monitoring_grafana_folder",
            folder,
            f"is not one directory name: it is written into the Grafana dashboard ConfigMap "
            f"(annotation {short(annotation)}), whose value the dashboard sidecar takes as a "
            "directory path",
            "write monitoring_grafana_folder as one folder name without '/' (not '.' or "
            "'..'), or set monitoring_grafana_sidecar_folder_annotation: '' to write none",
        )
    )


def check_values(variables: Mapping[str, Any]) -> list[str]:
    """The problems :func:`rule_config_values` finds in ``variables`` (the values a role
    runs with), one line each: ``variable=value: why; fix: ...``. A role checks its own
    variables with it on entry, for a playbook run without preflight."""
    ctx = HostContext("", (), dict(variables), variables, [], "")
    rule_config_values(ctx)
    return [f"{p.variable}={short(p.value)}: {p.message}; fix: {p.fix}" for p in ctx.problems]
