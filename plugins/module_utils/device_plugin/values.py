# Copyright: gpufleet contributors
# Apache License 2.0 (see LICENSE)
"""NVIDIA's device plugin on the device-plugin pools: whether there is anything to do
(``pool_decision``), and which chart with which values (``plan``).

Pure functions; the role ``device_plugin`` (through the filters in
``plugins/filter/device_plugin.py``) gathers the facts (the inventory's pools, the installed
release, a local chart's ``Chart.yaml``) and calls them before it changes anything. Every
refusal is a ``DevicePluginError`` naming the variable, the value and the fix.

Placement: the DaemonSet lands on the nodes labelled ``gpufleet.io/gpu-path=device-plugin``
(by the gpu_node_labels role) that carry the GPU labels. NVIDIA's chart also sets a required
node affinity by default (values.yaml ``affinity``: one of the Node Feature Discovery
labels or ``nvidia.com/gpu.present=true``, ``chart.DEFAULT_AFFINITY``), which the scheduler
ANDs with ``nodeSelector`` (``templates/daemonset-device-plugin.yml`` renders both); the
role replaces it with one term that requires the selector's labels, so that the selector
alone decides where the plugin runs. Helm replaces lists when it merges values, so the
chart's ``nodeSelectorTerms`` go away whole.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ansible_collections.gpufleet.cluster.plugins.module_utils.common import k8s_names
from ansible_collections.gpufleet.cluster.plugins.module_utils.common.limits import (
    InputError,
    load_yaml,
    plain_value,
    variable_bool,
)
from ansible_collections.gpufleet.cluster.plugins.module_utils.common.merge import deep_merge
from ansible_collections.gpufleet.cluster.plugins.module_utils.device_plugin.chart import (
    CHART_TOLERATIONS,
    DEVICE_ID_STRATEGIES,
    DEVICE_LIST_STRATEGIES,
    MIG_STRATEGIES,
    STAND_IN_MODE,
    ChartVersion,
    DevicePluginError,
    chart_source,
    newer_than_read,
    parse_chart_version,
)
from ansible_collections.gpufleet.cluster.plugins.module_utils.dra_driver import gpu_paths as gp
from ansible_collections.gpufleet.cluster.plugins.module_utils.dra_driver.chart import (
    ChartSource,
    parse_release_chart,
)
from ansible_collections.gpufleet.cluster.plugins.module_utils.kube.scheduling import (
    tolerations_for,
)

__all__ = [
    "DevicePluginPlan",
    "plan",
    "pool_decision",
    "selector_affinity",
]

#: Helm release names: at most 53 characters (helm's ``releaseNameMaxLen``) of a DNS
#: subdomain.
RELEASE_NAME_MAX = 53
#: ConfigMap data keys (``IsConfigMapKey``): the names of ``config.map``'s entries.
_CONFIG_KEY = re.compile(r"[-._a-zA-Z0-9]+")
_CONTROL = re.compile("[\x00-\x1f\x7f]")


def pool_decision(pools: Mapping[str, Sequence[str]], group: str) -> dict[str, Any]:
    """Whether the role has anything to do: ``{"run": bool, "message": str}`` from the
    inventory's GPU hosts by path (``gpu_paths.pools``). Without a host on the
    device-plugin path the role changes nothing and says so."""
    plugin_hosts = list(pools.get(gp.DEVICE_PLUGIN) or [])
    dra_hosts = list(pools.get(gp.DRA) or [])
    if not plugin_hosts:
        return {
            "run": False,
            "message": (
                f"skipped: no host of device_plugin_group={group} is on the device-plugin path "
                f"(inventory group {gp.path_group(gp.DEVICE_PLUGIN)}); its {len(dra_hosts)} "
                "GPU host(s) are on DRA, served by the dra_driver role; nothing was changed"
            ),
        }
    return {
        "run": True,
        "message": (
            f"{len(plugin_hosts)} GPU host(s) on the device-plugin path "
            f"({gp.path_group(gp.DEVICE_PLUGIN)}), {len(dra_hosts)} on DRA"
        ),
    }


def selector_affinity(selector: Mapping[str, str]) -> dict[str, Any]:
    """A required node affinity of one term that asks for every label of ``selector``
    (``In`` the one value): the same nodes as the selector, in place of the chart's."""
    expressions = [
        {"key": key, "operator": "In", "values": [value]} for key, value in selector.items()
    ]
    return {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [{"matchExpressions": expressions}]
            }
        }
    }


@dataclass(frozen=True)
class DevicePluginPlan:
    """What the role does: ``chart`` (ChartSource), ``version``, ``values`` (the whole
    values mapping passed to Helm), ``node_selector`` (where the DaemonSet runs),
    ``action`` (``install``, ``upgrade`` or ``reconcile``), ``installed``
    (``"<chart> <version>"`` or ""), ``mig_strategy`` (what verify counts as advertised),
    ``warnings``."""

    chart: ChartSource
    version: ChartVersion
    values: dict[str, Any]
    node_selector: dict[str, str]
    action: str
    installed: str
    mig_strategy: str
    warnings: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {
            "chart": self.chart.to_dict(),
            "chart_version": self.version.text,
            "values": self.values,
            "node_selector": self.node_selector,
            "action": self.action,
            "installed": self.installed,
            "mig_strategy": self.mig_strategy,
            "warnings": list(self.warnings),
        }


def plan(inputs: Mapping[str, Any]) -> DevicePluginPlan:
    """Check every input and build the Helm values. Raises DevicePluginError on the first
    refusal.

    ``inputs`` keys (the role's variables without the ``device_plugin_`` prefix, plus facts):

    - ``chart_version``, ``chart_path``, ``chart_stand_in`` (bool), ``chart_repo_url``,
      ``local_chart`` (parsed Chart.yaml of ``chart_path``)
    - ``release_name``, ``namespace``
    - ``node_selector`` (dict; ``gpufleet.io/gpu-path: device-plugin`` is added),
      ``node_taints`` (list of ``{key, value?, effect}``)
    - ``mig_strategy``, ``device_list_strategy`` (list), ``device_id_strategy``,
      ``nvidia_driver_root``, ``cdi_hook_path``, ``runtime_class_name`` ("" = the chart's)
    - ``config`` (name -> config, a mapping or YAML text), ``config_default``,
      ``config_name`` (an existing ConfigMap)
    - ``extra_values`` (dict merged last)
    - ``installed`` (None or ``{"chart": "<name>-<version>", ...}`` of the release)
    """
    warnings: list[str] = []
    version = parse_chart_version(inputs.get("chart_version"))
    source = chart_source(
        version,
        chart_path=str(inputs.get("chart_path") or ""),
        local_chart=inputs.get("local_chart"),
        stand_in=_stand_in(inputs.get("chart_stand_in")),
        repo_url=str(inputs.get("chart_repo_url") or ""),
    )
    if newer_than_read(version) and not source.stand_in:
        warnings.append(newer_than_read(version))
    _check_release_name(inputs.get("release_name"))
    namespace = inputs.get("namespace")
    selector = _node_selector(inputs.get("node_selector"))
    tolerations = tolerations_for(
        inputs.get("node_taints") or [],
        CHART_TOLERATIONS,
        variable="device_plugin_node_taints",
        error=DevicePluginError,
    )
    options = _plugin_options(inputs)
    extra = inputs.get("extra_values") or {}
    if not isinstance(extra, Mapping):
        raise DevicePluginError(
            "device_plugin_extra_values", extra, "not a mapping", "give Helm values as a dict"
        )
    if source.stand_in:
        values = _stand_in_values(selector, tolerations)
        ignored = sorted(k for k, v in options.items() if v not in (None, "", {}, "none"))
        if ignored:
            warnings.append(
                f"the stand-in chart {source.name} takes none of {', '.join(ignored)}: ignored"
            )
    else:
        values = _nvidia_values(selector, tolerations, options)
    merged = deep_merge(values, plain_value(extra))
    _check_values(merged, namespace, source.stand_in)
    if source.stand_in:
        warnings.append(
            f"chart {source.name} at {source.ref} stands in for NVIDIA's device plugin "
            f"(device_plugin_chart_stand_in, mode: {STAND_IN_MODE})"
        )
    local = inputs.get("local_chart") if isinstance(inputs.get("local_chart"), Mapping) else {}
    wanted = str(local.get("version") or "") if source.stand_in else version.text
    action, installed = _release_action(inputs.get("installed"), source.name, wanted)
    return DevicePluginPlan(
        chart=source,
        version=version,
        values=merged,
        node_selector=selector,
        action=action,
        installed=installed,
        mig_strategy=str(options["migStrategy"]),
        warnings=tuple(warnings),
    )


def _stand_in(value: Any) -> bool:
    """``chart_stand_in`` as Ansible reads a boolean (``"false"`` from an INI inventory is
    false); unset is false."""
    parsed = False if value is None or value == "" else variable_bool(value)
    if parsed is None:
        raise DevicePluginError(
            "device_plugin_chart_stand_in", value, "not a boolean", "give true or false"
        )
    return parsed


def _check_release_name(value: Any) -> None:
    why = k8s_names.dns1123_subdomain(value)
    if why is None and len(value) > RELEASE_NAME_MAX:
        why = f"is {len(value)} characters long, more than a Helm release's {RELEASE_NAME_MAX}"
    if why:
        raise DevicePluginError(
            "device_plugin_release_name", value, why, "give e.g. nvidia-device-plugin"
        )


def _node_selector(value: Any) -> dict[str, str]:
    """The GPU labels with ``gpufleet.io/gpu-path: device-plugin``; refuses another path."""
    if not isinstance(value, Mapping):
        raise DevicePluginError(
            "device_plugin_node_selector", value, "not a mapping", "give label key -> value"
        )
    selector = {}
    for key, raw in value.items():
        # YAML's unquoted true is a boolean; label values are text, and the GPU labels "true"
        text = ("true" if raw else "false") if isinstance(raw, bool) else raw
        text = str(text) if isinstance(text, int | float) else text
        why = k8s_names.qualified_name(key)
        if why:
            raise DevicePluginError(
                "device_plugin_node_selector",
                value,
                f"its key {key!r} {why}",
                "give label keys such as nvidia.com/gpu.present",
            )
        why = k8s_names.label_value(text)
        if why:
            raise DevicePluginError(
                f"device_plugin_node_selector.{key}",
                raw,
                why,
                'give a label value such as "true"',
            )
        selector[key] = text
    if selector.get(gp.PATH_LABEL, gp.DEVICE_PLUGIN) != gp.DEVICE_PLUGIN:
        raise DevicePluginError(
            "device_plugin_node_selector",
            selector,
            f"selects {gp.PATH_LABEL}={selector[gp.PATH_LABEL]}, the nodes of another GPU "
            "path: the device plugin would advertise the GPUs the DRA driver hands out",
            f"drop {gp.PATH_LABEL} from it (the role adds {gp.PATH_LABEL}: {gp.DEVICE_PLUGIN})",
        )
    selector[gp.PATH_LABEL] = gp.DEVICE_PLUGIN
    return selector


def _choice(inputs: Mapping[str, Any], key: str, choices: Sequence[str], default: str) -> str:
    value = inputs.get(key)
    if value is None or value == "":
        return default
    if value not in choices:
        raise DevicePluginError(
            f"device_plugin_{key}",
            value,
            f"not one of the device plugin's choices ({', '.join(choices)}); the plugin "
            "refuses anything else at start",
            f"give one of {', '.join(choices)}" + ("" if default else ", or leave it empty"),
        )
    return str(value)


def _list_strategy(value: Any) -> str:
    """``deviceListStrategy`` as the chart passes it (comma-separated), "" for the chart's."""
    items = value.split(",") if isinstance(value, str) else value
    if items is None:
        return ""
    if isinstance(items, Mapping) or not isinstance(items, Iterable):
        raise DevicePluginError(
            "device_plugin_device_list_strategy",
            value,
            "not a list",
            f"give a list of {', '.join(DEVICE_LIST_STRATEGIES)}",
        )
    names = [str(i).strip() for i in items if str(i).strip()]
    bad = [n for n in names if n not in DEVICE_LIST_STRATEGIES]
    if bad:
        raise DevicePluginError(
            "device_plugin_device_list_strategy",
            value,
            f"{', '.join(bad)} is not a device list strategy of the device plugin "
            f"({', '.join(DEVICE_LIST_STRATEGIES)}); the plugin refuses it at start",
            f"give a list of {', '.join(DEVICE_LIST_STRATEGIES)}, or leave it empty (envvar)",
        )
    return ",".join(dict.fromkeys(names))


def _absolute_path(inputs: Mapping[str, Any], key: str, example: str) -> str:
    value = inputs.get(key)
    if value is None or value == "":
        return ""
    if not isinstance(value, str) or not value.startswith("/") or _CONTROL.search(value):
        raise DevicePluginError(
            f"device_plugin_{key}",
            value,
            "not an absolute path",
            f"give an absolute path such as {example}, or leave it empty",
        )
    return value


def _plugin_options(inputs: Mapping[str, Any]) -> dict[str, Any]:
    """The plugin's settings as the chart names them; "" where the chart's default holds."""
    runtime_class = inputs.get("runtime_class_name") or ""
    if runtime_class and k8s_names.dns1123_subdomain(runtime_class):
        raise DevicePluginError(
            "device_plugin_runtime_class_name",
            runtime_class,
            f"{k8s_names.dns1123_subdomain(runtime_class)}, so no RuntimeClass has that name",
            "give the RuntimeClass of the NVIDIA runtime (nvidia), or leave it empty",
        )
    return {
        "migStrategy": _choice(inputs, "mig_strategy", MIG_STRATEGIES, "none"),
        "deviceListStrategy": _list_strategy(inputs.get("device_list_strategy")),
        "deviceIDStrategy": _choice(inputs, "device_id_strategy", DEVICE_ID_STRATEGIES, ""),
        "nvidiaDriverRoot": _absolute_path(inputs, "nvidia_driver_root", "/run/nvidia/driver"),
        "cdi.nvidiaHookPath": _absolute_path(inputs, "cdi_hook_path", "/usr/bin/nvidia-cdi-hook"),
        "runtimeClassName": str(runtime_class),
        "config": _config(inputs),
    }


def _config(inputs: Mapping[str, Any]) -> dict[str, Any]:
    """``config``: ``{"map": {name: text}, "default": name}`` from ``config`` (each entry a
    mapping, written as JSON, which the plugin's YAML reader takes, or YAML text) and
    ``config_default``, or ``{"name": configmap}`` from ``config_name``; {} for none."""
    entries = inputs.get("config") or {}
    default = str(inputs.get("config_default") or "")
    name = str(inputs.get("config_name") or "")
    if not isinstance(entries, Mapping):
        raise DevicePluginError(
            "device_plugin_config", entries, "not a mapping", "give config name -> config"
        )
    if name and entries:
        raise DevicePluginError(
            "device_plugin_config_name",
            name,
            "the chart takes either an existing ConfigMap (config.name) or the configs "
            "themselves (config.map), not both",
            "empty device_plugin_config or device_plugin_config_name",
        )
    if name:
        why = k8s_names.dns1123_subdomain(name)
        if why:
            raise DevicePluginError(
                "device_plugin_config_name", name, why, "give the name of a ConfigMap"
            )
        return {"name": name, **({"default": default} if default else {})}
    rendered: dict[str, str] = {}
    for key, body in entries.items():
        if not _CONFIG_KEY.fullmatch(str(key)) or len(str(key)) > 253:
            raise DevicePluginError(
                "device_plugin_config",
                str(key),
                "not a ConfigMap key (letters, digits, '-', '_' and '.')",
                "name each config like default or a100-time-slicing",
            )
        if isinstance(body, Mapping):
            rendered[str(key)] = json.dumps(plain_value(body), indent=2, sort_keys=True)
        elif isinstance(body, str) and body.strip():
            rendered[str(key)] = body
        else:
            raise DevicePluginError(
                f"device_plugin_config.{key}",
                body,
                "not a device plugin config (a mapping with version: v1, or its YAML text)",
                "give e.g. {version: v1, flags: {migStrategy: none}}",
            )
    if default and default not in rendered:
        raise DevicePluginError(
            "device_plugin_config_default",
            default,
            f"names no config of device_plugin_config ({', '.join(sorted(rendered)) or 'none'})",
            "give the name of one of them",
        )
    if not rendered:
        return {}
    return {"map": rendered, **({"default": default} if default else {})}


def _nvidia_values(
    selector: dict[str, str], tolerations: list[dict[str, Any]], options: Mapping[str, Any]
) -> dict[str, Any]:
    values: dict[str, Any] = {
        "nodeSelector": dict(selector),
        "affinity": selector_affinity(selector),
        "tolerations": tolerations,
        "migStrategy": options["migStrategy"],
    }
    for key in ("deviceListStrategy", "deviceIDStrategy", "nvidiaDriverRoot", "runtimeClassName"):
        if options[key]:
            values[key] = options[key]
    if options["cdi.nvidiaHookPath"]:
        values["cdi"] = {"nvidiaHookPath": options["cdi.nvidiaHookPath"]}
    if options["config"]:
        values["config"] = dict(options["config"])
    return values


def _stand_in_values(selector: dict[str, str], tolerations: list[dict[str, Any]]) -> dict[str, Any]:
    """The lab's GPU simulator chart in its device-plugin mode (its values.yaml: ``mode``,
    ``devicePlugin.nodeSelector``; the pod's ``kubeletPlugin.affinity``/``tolerations``)."""
    return {
        "mode": STAND_IN_MODE,
        "devicePlugin": {"nodeSelector": dict(selector)},
        "kubeletPlugin": {"affinity": selector_affinity(selector), "tolerations": tolerations},
    }


def _check_values(values: Mapping[str, Any], namespace: Any, stand_in: bool) -> None:
    """The chart's own refusals (templates/validation.yml), and a selector that the extra
    values turned to another path, checked before Helm runs."""
    why = k8s_names.dns1123_label(namespace)
    if why:
        raise DevicePluginError(
            "device_plugin_namespace", namespace, why, "give e.g. nvidia-device-plugin"
        )
    if "namespace" in values:
        raise DevicePluginError(
            "device_plugin_extra_values.namespace",
            values["namespace"],
            "the chart fails when a namespace value is set",
            "drop it and set device_plugin_namespace",
        )
    if namespace == "default" and values.get("allowDefaultNamespace") is not True:
        raise DevicePluginError(
            "device_plugin_namespace",
            namespace,
            "the chart refuses to install into the default namespace",
            "use a namespace of its own (nvidia-device-plugin), or set "
            "device_plugin_extra_values.allowDefaultNamespace: true",
        )
    where = ("devicePlugin", "nodeSelector") if stand_in else ("nodeSelector",)
    selector: Any = values
    for key in where:
        selector = selector.get(key) if isinstance(selector, Mapping) else None
    if not isinstance(selector, Mapping) or selector.get(gp.PATH_LABEL) != gp.DEVICE_PLUGIN:
        raise DevicePluginError(
            "device_plugin_extra_values." + ".".join(where),
            selector,
            f"drops {gp.PATH_LABEL}={gp.DEVICE_PLUGIN}, so the device plugin would also run on "
            "the DRA pools",
            "set where it runs with device_plugin_node_selector instead",
        )
    if not stand_in:
        _check_config(values.get("config"), values.get("migStrategy"))


def _check_config(config: Any, mig_strategy: Any = None) -> None:
    """templates/validation.yml: not ``config.name`` with ``config.map``; with several
    configs in the map, a default must be found (``_helpers.tpl`` ``hasDefaultConfig``:
    ``config.default``, else the fallback strategies ``named``: an entry ``default``,
    ``single``: the only entry, ``empty``: always). And no config of the map names another
    MIG strategy than ``mig_strategy`` (``_check_config_mig``)."""
    if config is None:
        return
    entries = config.get("map") if isinstance(config, Mapping) else None
    if not isinstance(config, Mapping) or not isinstance(entries or {}, Mapping):
        raise DevicePluginError(
            "device_plugin_extra_values.config",
            config,
            "the chart reads config as a mapping with a map of config name -> config",
            "give configs with device_plugin_config (or device_plugin_config_name)",
        )
    entries = entries or {}
    if config.get("name") and entries:
        raise DevicePluginError(
            "device_plugin_extra_values.config",
            dict(config),
            "the chart fails with both config.name and config.map",
            "give one of them (device_plugin_config or device_plugin_config_name)",
        )
    _check_config_mig(entries, mig_strategy)
    if not entries or config.get("default"):
        return
    fallbacks = config.get("fallbackStrategies") or ["named", "single"]
    found = (
        ("named" in fallbacks and "default" in entries)
        or ("single" in fallbacks and len(entries) == 1)
        or "empty" in fallbacks
    )
    if not found:
        raise DevicePluginError(
            "device_plugin_config_default",
            "",
            f"device_plugin_config has {len(entries)} configs ({', '.join(sorted(entries))}) "
            "and none is the default, so the chart fails",
            "set device_plugin_config_default to one of them, or name one of them default",
        )


def _check_config_mig(entries: Mapping[str, Any], mig_strategy: Any) -> None:
    """The chart passes ``migStrategy`` (``device_plugin_mig_strategy``, always set by the
    role) to the plugin as the ``MIG_STRATEGY`` variable of its container
    (templates/daemonset-device-plugin.yml), and the plugin takes a variable over its
    config file (``api/config/v1/config.go`` ``NewConfig``: the command line, then the
    environment, then the file). A config whose ``flags.migStrategy`` names another
    strategy would be ignored on the nodes that pick it, so it is refused; one that names
    none, or the same, is kept."""
    if not isinstance(mig_strategy, str):
        return
    for name, text in entries.items():
        try:
            body = load_yaml(text, "its text") if isinstance(text, str) else text
        except InputError as err:
            raise DevicePluginError(
                f"device_plugin_config.{name}",
                text,
                str(err).partition("; fix: ")[0] + ", so the plugin could not read it either",
                "correct the YAML, or give the config as a mapping ({version: v1, flags: {...}})",
            ) from None
        flags = body.get("flags") if isinstance(body, Mapping) else None
        wanted = flags.get("migStrategy") if isinstance(flags, Mapping) else None
        if wanted is not None and str(wanted) != mig_strategy:
            raise DevicePluginError(
                f"device_plugin_config.{name}.flags.migStrategy",
                wanted,
                f"differs from device_plugin_mig_strategy={mig_strategy}, which the chart "
                "passes to the plugin as MIG_STRATEGY, and the plugin takes that over its "
                f"config file: the nodes that pick config {name} would not get {wanted}",
                f"set device_plugin_mig_strategy: {wanted} and give every config that names "
                f"a migStrategy that one, or drop migStrategy from config {name}",
            )


def _release_action(installed: Any, chart: str, version: str) -> tuple[str, str]:
    """``(action, installed)``: ``install``, ``upgrade``, or ``reconcile`` when ``chart``
    ``version`` is what the release has; and ``"<chart> <version>"`` of the installed
    release, or ""."""
    if not isinstance(installed, Mapping) or not installed:
        return "install", ""
    name, found = parse_release_chart(str(installed.get("chart") or ""))
    text = f"{name} {found}".strip()
    if name == chart and version and found == version:
        return "reconcile", text
    return "upgrade", text
